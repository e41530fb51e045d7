package report

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpupack/gpupack/usage"
)

// The derived metrics, declared once.
var (
	allocatedDesc = prometheus.NewDesc("gpupack_gpu_allocated_seconds_total",
		"GPU-seconds allocated to the pod (a whole GPU counts 1 per second, a MIG slice or time-slice its share).", []string{"namespace", "pod"}, nil)
	activeDesc = prometheus.NewDesc("gpupack_gpu_active_seconds_total",
		"GPU-seconds the pod's GPUs were active (activity ratio integrated over time); absent when activity is unknown.", []string{"namespace", "pod"}, nil)
	idleDesc = prometheus.NewDesc("gpupack_gpu_idle_allocated_seconds_total",
		"GPU-seconds allocated to the pod while its GPUs were idle; absent when activity is unknown.", []string{"namespace", "pod"}, nil)
	unallocatedDesc = prometheus.NewDesc("gpupack_gpu_unallocated_seconds_total",
		"GPU-seconds of the node's GPUs held by no pod, the MIG slices that no instance covers included.", []string{"node"}, nil)
	costDesc = prometheus.NewDesc("gpupack_gpu_cost_total",
		"Cost of the GPU time allocated to the pod, in the currency of the label.", []string{"namespace", "pod", "currency"}, nil)
)

// collector serves the latest report as counters.
type collector struct {
	latest func() (*usage.Report, error)
}

var _ prometheus.Collector = &collector{}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{allocatedDesc, activeDesc, idleDesc, unallocatedDesc, costDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	r, err := c.latest()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(allocatedDesc, err)
		return
	}
	for _, p := range r.Pods {
		ch <- prometheus.MustNewConstMetric(allocatedDesc, prometheus.CounterValue, float64(p.AllocatedGPUSeconds), p.Namespace, p.Pod)
		if p.ActiveGPUSeconds.Known {
			ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.CounterValue, p.ActiveGPUSeconds.Value, p.Namespace, p.Pod)
			ch <- prometheus.MustNewConstMetric(idleDesc, prometheus.CounterValue, p.IdleAllocatedGPUSeconds.Value, p.Namespace, p.Pod)
		}
		if p.Cost.Known {
			ch <- prometheus.MustNewConstMetric(costDesc, prometheus.CounterValue, p.Cost.Value, p.Namespace, p.Pod, r.Currency)
		}
	}
	for _, n := range r.Nodes {
		ch <- prometheus.MustNewConstMetric(unallocatedDesc, prometheus.CounterValue, float64(n.UnallocatedGPUSeconds), n.Name)
	}
}
