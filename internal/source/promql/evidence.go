package promql

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/usage"
)

// containers selects cAdvisor's series of the app containers of pods, as
// the kubelet's /metrics/cadvisor labels them (namespace, pod, container):
// not the pod's own cgroup (container="") nor its sandbox ("POD").
const containers = `{namespace!="", pod!="", container!="", container!="POD"}`

// evidenceSums are one pod's figures as read, before they become rates
// and ratios.
type evidenceSums struct {
	periods, throttled                     float64
	hasPeriods                             bool
	diskBytes, netBytes                    float64
	hasDisk, hasNet                        bool
	seenSeconds                            float64
	pcieRx, pcieTx, nvlinkRx, nvlinkTx     float64
	hasPCIeRx, hasPCIeTx, hasNVRx, hasNVTx bool
	// By container: cAdvisor's quota, period, CPU seconds and periods.
	containerQuota, containerPeriod, cpuUsage, containerPeriods map[string]float64
	// limitCores are kube-state-metrics' CPU limits by container, for
	// where cAdvisor's spec series are dropped (kube-prometheus drops
	// container_spec_*).
	limitCores map[string]float64
}

// LoadEvidence reads, for every pod, what cAdvisor and DCGM say beside its
// GPU activity over the window (usage.Evidence): CFS throttling, the CPU
// limit and use, disk and network reads, and PCIe and NVLink traffic. Each
// figure is one instant query at the window's end over the whole window,
// computed by the query engine, so the raw and hourly paths read the same
// figures and neither pulls samples. A figure whose series are absent
// stays unknown.
func (s *Source) LoadEvidence(ctx context.Context, w usage.Window) ([]usage.Evidence, error) {
	length := w.End.Sub(w.Start)
	if length <= 0 {
		return nil, fmt.Errorf("window %s..%s has no length; give an end after the start", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339))
	}
	rng := fmt.Sprintf("[%dms]", length.Milliseconds())
	// The seconds a pod's series were seen: the span of its CPU counter's
	// sample times, at a resolution of the window's step or a thousandth
	// of the window, whichever is longer.
	res := max(w.Step, length/1000).Milliseconds()
	seen := fmt.Sprintf("max by (namespace, pod) (max_over_time(timestamp(%[1]s%[2]s)[%[3]dms:%[4]dms]) - min_over_time(timestamp(%[1]s%[2]s)[%[3]dms:%[4]dms]))",
		usage.CPUUsageSeconds, containers, length.Milliseconds(), res)
	pods := map[podKey]*evidenceSums{}
	at := func(m model.Metric) *evidenceSums {
		k := podKey{string(m["namespace"]), string(m["pod"])}
		e := pods[k]
		if e == nil {
			e = &evidenceSums{containerQuota: map[string]float64{}, containerPeriod: map[string]float64{}, cpuUsage: map[string]float64{}, containerPeriods: map[string]float64{}, limitCores: map[string]float64{}}
			pods[k] = e
		}
		return e
	}
	queries := []struct {
		what, query string
		add         func(e *evidenceSums, m model.Metric, v float64)
	}{
		{"cAdvisor's CFS periods", "increase(" + usage.CFSPeriods + containers + rng + ")", func(e *evidenceSums, m model.Metric, v float64) {
			e.periods += v
			e.hasPeriods = true
			e.containerPeriods[string(m["container"])] += v
		}},
		{"cAdvisor's CFS throttled periods", "increase(" + usage.CFSThrottledPeriods + containers + rng + ")", func(e *evidenceSums, _ model.Metric, v float64) { e.throttled += v }},
		{"cAdvisor's CPU quota", "last_over_time(" + usage.CPUQuota + containers + rng + ") > 0", func(e *evidenceSums, m model.Metric, v float64) { e.containerQuota[string(m["container"])] = v }},
		{"cAdvisor's CPU period", "last_over_time(" + usage.CPUPeriod + containers + rng + ") > 0", func(e *evidenceSums, m model.Metric, v float64) { e.containerPeriod[string(m["container"])] = v }},
		{"kube-state-metrics' CPU limits", `last_over_time(` + KSMContainerLimits + `{namespace!="", pod!="", container!="", resource="cpu"}` + rng + `) > 0`, func(e *evidenceSums, m model.Metric, v float64) {
			e.limitCores[string(m["container"])] = v
		}},
		{"cAdvisor's CPU seconds", "sum by (namespace, pod, container) (increase(" + usage.CPUUsageSeconds + containers + rng + "))", func(e *evidenceSums, m model.Metric, v float64) { e.cpuUsage[string(m["container"])] += v }},
		{"cAdvisor's disk reads", "sum by (namespace, pod) (increase(" + usage.FSReadsBytes + containers + rng + "))", func(e *evidenceSums, _ model.Metric, v float64) {
			e.diskBytes, e.hasDisk = e.diskBytes+v, true
		}},
		// A pod's network is its sandbox's: every cgroup of the pod reports
		// the same interfaces, so each is taken once.
		{"cAdvisor's network receive", `sum by (namespace, pod) (max by (namespace, pod, interface) (increase(` + usage.NetworkReceiveBytes + `{namespace!="", pod!=""}` + rng + `)))`, func(e *evidenceSums, _ model.Metric, v float64) {
			e.netBytes, e.hasNet = e.netBytes+v, true
		}},
		{"the seconds cAdvisor saw each pod", seen, func(e *evidenceSums, _ model.Metric, v float64) { e.seenSeconds = v }},
	}
	for _, q := range queries {
		err := s.eachSample(ctx, q.query, w.End, func(m model.Metric, v model.SampleValue) {
			if m["namespace"] == "" || m["pod"] == "" || math.IsNaN(float64(v)) {
				return
			}
			q.add(at(m), m, float64(v))
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.what, err)
		}
	}
	if err := s.loadBusEvidence(ctx, rng, w.End, at); err != nil {
		return nil, err
	}
	return evidenceOf(pods), nil
}

// loadBusEvidence reads DCGM's PCIe and NVLink rates: each series' mean
// over the samples it has in the window (the time its pod held the GPU),
// summed over the pod's GPUs.
func (s *Source) loadBusEvidence(ctx context.Context, rng string, t time.Time, at func(model.Metric) *evidenceSums) error {
	for _, f := range []struct {
		metric string
		add    func(e *evidenceSums, v float64)
	}{
		{usage.PCIeRxBytes, func(e *evidenceSums, v float64) { e.pcieRx, e.hasPCIeRx = e.pcieRx+v, true }},
		{usage.PCIeTxBytes, func(e *evidenceSums, v float64) { e.pcieTx, e.hasPCIeTx = e.pcieTx+v, true }},
		{usage.NVLinkRxBytes, func(e *evidenceSums, v float64) { e.nvlinkRx, e.hasNVRx = e.nvlinkRx+v, true }},
		{usage.NVLinkTxBytes, func(e *evidenceSums, v float64) { e.nvlinkTx, e.hasNVTx = e.nvlinkTx+v, true }},
	} {
		err := s.eachSample(ctx, "avg_over_time("+s.Selector.of(f.metric)+rng+")", t, func(m model.Metric, v model.SampleValue) {
			o := owner(m)
			if o.Pod == "" || math.IsNaN(float64(v)) {
				return
			}
			f.add(at(model.Metric{"namespace": model.LabelValue(o.Namespace), "pod": model.LabelValue(o.Pod)}), float64(v))
		})
		if err != nil {
			return fmt.Errorf("%s from dcgm-exporter: %w", f.metric, err)
		}
	}
	return nil
}

type podKey struct{ namespace, pod string }

// evidenceOf turns the sums into rates and ratios, sorted by pod.
func evidenceOf(pods map[podKey]*evidenceSums) []usage.Evidence {
	out := make([]usage.Evidence, 0, len(pods))
	for k, e := range pods {
		ev := usage.Evidence{Namespace: k.namespace, Pod: k.pod}
		if e.hasPeriods && e.periods > 0 {
			ev.CPUThrottledRatio = usage.Known(round4(e.throttled / e.periods))
		}
		limit, used, limited := cpuLimitAndUse(e)
		if limited {
			ev.CPULimitCores = usage.Known(round4(limit))
			if used >= 0 {
				ev.CPUUsedCores = usage.Known(round4(used))
			}
		}
		rate := func(has bool, bytes float64) usage.Amount {
			if !has || e.seenSeconds <= 0 {
				return usage.Unknown
			}
			return usage.Known(math.Round(bytes / e.seenSeconds))
		}
		ev.DiskReadBytesPerSecond = rate(e.hasDisk, e.diskBytes)
		ev.NetworkReceiveBytesPerSecond = rate(e.hasNet, e.netBytes)
		gauge := func(has bool, v float64) usage.Amount {
			if !has {
				return usage.Unknown
			}
			return usage.Known(math.Round(v))
		}
		ev.PCIeRxBytesPerSecond, ev.PCIeTxBytesPerSecond = gauge(e.hasPCIeRx, e.pcieRx), gauge(e.hasPCIeTx, e.pcieTx)
		ev.NVLinkRxBytesPerSecond, ev.NVLinkTxBytesPerSecond = gauge(e.hasNVRx, e.nvlinkRx), gauge(e.hasNVTx, e.nvlinkTx)
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// KSMContainerLimits is kube-state-metrics' family of containers'
// resource limits.
const KSMContainerLimits = "kube_pod_container_resource_limits"

// KSMNodeLabels is kube-state-metrics' family of node labels, each
// label_<name>, read for --prices' nodeRules.
const KSMNodeLabels = "kube_node_labels"

// kubeletCFSPeriod is the CFS period the kubelet sets, in microseconds:
// the period of a container whose spec series are not read.
const kubeletCFSPeriod = 100000

// cpuLimitAndUse sums, over the pod's containers with a CPU limit and CFS
// periods, the limit in cores (cAdvisor's quota over period, else
// kube-state-metrics' limit) and the cores used while runnable (CPU
// seconds over the seconds of the periods in which the container could
// run); used is -1 where such a container had no period counted. limited
// is false where no container had both.
func cpuLimitAndUse(e *evidenceSums) (limit, used float64, limited bool) {
	for c, periods := range e.containerPeriods {
		cores, period, ok := containerLimit(e, c)
		if !ok {
			continue
		}
		limited = true
		limit += cores
		if periods <= 0 || used < 0 {
			used = -1
			continue
		}
		used += e.cpuUsage[c] / (periods * period / 1e6)
	}
	return limit, used, limited
}

// containerLimit is container c's CPU limit in cores and its CFS period in
// microseconds: cAdvisor's spec, else kube-state-metrics' limit at the
// kubelet's period.
func containerLimit(e *evidenceSums, c string) (cores, period float64, ok bool) {
	if quota, okQ := e.containerQuota[c]; okQ {
		if period, okP := e.containerPeriod[c]; okP {
			return quota / period, period, true
		}
	}
	if cores, ok := e.limitCores[c]; ok {
		return cores, kubeletCFSPeriod, true
	}
	return 0, 0, false
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
