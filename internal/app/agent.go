package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/usage"
)

// AgentSources are what the node agent reads each interval: NVML, each
// process's cgroup, the kubelet's device holders and the node's pods.
type AgentSources struct {
	GPUs interface {
		Sample() ([]agent.DeviceSample, error)
	}
	Cgroup  func(pid uint32) (agent.CgroupRef, bool, error)
	Holders func(ctx context.Context) (map[string][]agent.Holder, error)
	Pods    func(ctx context.Context) (map[string]agent.Pod, error)
}

// Agent samples one node's GPUs per interval and serves the last
// interval's per-pod figures as a Prometheus collector. Its memory is
// bounded by the node: the last interval's figures, the PIDs of the last
// intervals (agent.CgroupCache) and the node's pods.
type Agent struct {
	node  string
	src   AgentSources
	log   *slog.Logger
	cache *agent.CgroupCache
	pods  map[string]agent.Pod

	mu       sync.Mutex
	last     agent.Attribution
	lastTime time.Time
	errors   map[string]float64
}

// NewAgent makes the agent of node.
func NewAgent(node string, src AgentSources, log *slog.Logger) *Agent {
	return &Agent{node: node, src: src, log: log, cache: agent.NewCgroupCache(), errors: map[string]float64{}}
}

// Run samples every interval until ctx ends. A failed interval is logged
// and counted, and exports nothing rather than stale figures.
func (a *Agent) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := a.Sample(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("sampling the node's GPUs", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample reads one interval: NVML's processes, their cgroups, the
// holders and (when a process's pod is not known yet) the node's pods,
// and attributes them.
func (a *Agent) Sample(ctx context.Context) error {
	samples, err := a.src.GPUs.Sample()
	if err != nil {
		return a.failed("nvml", err)
	}
	cgroups := a.cache.Resolve(samples, a.src.Cgroup)
	holders, err := a.src.Holders(ctx)
	if err != nil {
		return a.failed("podresources", err)
	}
	if err := a.refreshPods(ctx, cgroups); err != nil {
		return a.failed("pods", err)
	}
	at := agent.Attribute(samples, agent.Node{Cgroups: cgroups, Pods: a.pods, Holders: holders})
	a.mu.Lock()
	a.last, a.lastTime = at, time.Now()
	a.mu.Unlock()
	return nil
}

// refreshPods lists the node's pods when a process runs in a pod or
// container not listed yet: at most once an interval, and not at all
// while the node's pods stay the same.
func (a *Agent) refreshPods(ctx context.Context, cgroups map[uint32]agent.CgroupRef) error {
	stale := a.pods == nil
	for _, ref := range cgroups {
		pod, ok := a.pods[ref.PodUID]
		if _, named := pod.Containers[ref.ContainerID]; !ok || (ref.ContainerID != "" && !named) {
			stale = true
			break
		}
	}
	if !stale {
		return nil
	}
	pods, err := a.src.Pods(ctx)
	if err != nil {
		return err
	}
	a.pods = pods
	return nil
}

// failed counts a failed interval by stage and drops the last figures.
func (a *Agent) failed(stage string, err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errors[stage]++
	a.last = agent.Attribution{}
	return fmt.Errorf("%s: %w", stage, err)
}

// agentDescs are the descriptions of the per-device series, for one set
// of device labels.
type agentDescs struct {
	podSM, podMem, podFB, attributed *prometheus.Desc
}

func newAgentDescs(deviceLabels []string) agentDescs {
	pod := append(append([]string(nil), deviceLabels...), agent.OwnerLabels...)
	return agentDescs{
		podSM:      prometheus.NewDesc(usage.PodSMActive, "Share of the interval, 0..1, in which the container's processes ran kernels on the device (NVML per-process SM utilisation).", pod, nil),
		podMem:     prometheus.NewDesc(usage.PodMemActive, "Share of the interval, 0..1, in which the container's processes used the device's memory interface.", pod, nil),
		podFB:      prometheus.NewDesc(usage.PodFBUsed, "Framebuffer MiB held by the container's processes.", pod, nil),
		attributed: prometheus.NewDesc(usage.DeviceAttributed, "Share, 0..1, of the device's per-process activity (or framebuffer, without activity) attributed to pods holding it.", deviceLabels, nil),
	}
}

// descsOf are the descriptions for d's labels.
func descsOf(d agent.Device) agentDescs {
	if d.MIGUUID != "" {
		return migDescs
	}
	return gpuDescs
}

var (
	gpuDescs   = newAgentDescs(agent.GPULabels)
	migDescs   = newAgentDescs(agent.MIGLabels)
	errorsDesc = prometheus.NewDesc("gpupack_agent_sample_errors_total", "Sampling intervals that failed, by the stage that failed (nvml, podresources, pods).", []string{"Hostname", "stage"}, nil)
	lastDesc   = prometheus.NewDesc("gpupack_agent_last_sample_timestamp_seconds", "When the last interval was sampled, in Unix seconds.", []string{"Hostname"}, nil)
)

// Describe implements prometheus.Collector. It describes nothing: the
// agent is an unchecked collector, because a whole GPU's series leave out
// the MIG labels that a MIG instance's carry, as dcgm-exporter's do.
func (a *Agent) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: the last interval's figures,
// the known ones only.
func (a *Agent) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, f := range a.last.Pods {
		labels := append(agent.DeviceLabelValues(a.node, f.Device), f.Owner.Namespace, f.Owner.Pod, f.Owner.Container)
		descs := descsOf(f.Device)
		gauge(ch, descs.podSM, f.SMActive, labels)
		gauge(ch, descs.podMem, f.MemActive, labels)
		gauge(ch, descs.podFB, f.FBUsedMiB, labels)
	}
	for _, d := range a.last.Devices {
		gauge(ch, descsOf(d.Device).attributed, d.Coverage, agent.DeviceLabelValues(a.node, d.Device))
	}
	for stage, n := range a.errors {
		ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, n, a.node, stage)
	}
	if !a.lastTime.IsZero() {
		ch <- prometheus.MustNewConstMetric(lastDesc, prometheus.GaugeValue, float64(a.lastTime.UnixMilli())/1000, a.node)
	}
}

// gauge sends v unless it is unknown.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v usage.Amount, labels []string) {
	if v.Known() {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v.Value(), labels...)
	}
}
