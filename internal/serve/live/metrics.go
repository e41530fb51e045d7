package live

import (
	"cmp"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/usage"
)

// The metrics /metrics serves, declared once. The counters count from the
// start of the window that the process read at its start: a restarted
// serve starts them again from its window's totals, which Prometheus'
// rate() and increase() read as a counter reset. Each hour is read from
// Prometheus once; the counters then grow by the hours that follow, never
// by reading history again.
//
// The pods' counters are served by namespace and workload (workloadDescs):
// a series per pod seen in the window would grow with every pod a busy
// cluster runs. serve --metrics-per-pod adds the pod label (podDescs).
var (
	workloadDescs = newPodDescs("namespace", "workload")
	podDescs      = newPodDescs("namespace", "workload", "pod")

	unallocatedDesc = prometheus.NewDesc("gpupack_gpu_unallocated_seconds_total",
		"GPU-seconds of the node's GPUs held by no pod, the MIG slices that no instance covers included.", []string{"node"}, nil)
	unsampledDesc = prometheus.NewDesc("gpupack_gpu_unsampled_seconds_total",
		"GPU-seconds of the node's GPUs seen in the window that had no DCGM sample (dcgm-exporter or Prometheus down, or the GPU gone): whether a pod held them is unknown. Capacity = allocated + unallocated + unsampled.", []string{"node"}, nil)
	pendingDesc = prometheus.NewDesc("gpupack_pending_pods",
		"Pending GPU pods by namespace and diagnosed cause.", []string{"namespace", "cause"}, nil)
	waitDesc = prometheus.NewDesc("gpupack_pending_wait_seconds",
		"The longest time a pending GPU pod of the namespace and cause has waited since it was created.", []string{"namespace", "cause"}, nil)
	pendingWaitDesc = prometheus.NewDesc("gpupack_pending_gpu_pod_wait_seconds",
		"How long the GPU pods pending now have waited since they were created: the stat (p50, p95, max; nearest rank) of the pods grouped by namespace, GPU shape or diagnosed cause (label by), the largest 19 groups of each named and the rest under group=\"(other)\"; absent where no wait is known.", []string{"by", "group", "stat"}, nil)
	scheduledWaitDesc = prometheus.NewDesc("gpupack_scheduled_gpu_pod_wait_seconds",
		"How long the GPU pods scheduled in the window waited from creation to scheduling: the stat (p50, p95, max; nearest rank) by namespace or GPU shape (label by), the largest 19 groups of each named and the rest under group=\"(other)\"; absent where no wait is known.", []string{"by", "group", "stat"}, nil)
	unhealthyDesc = prometheus.NewDesc("gpupack_gpus_unhealthy",
		"GPUs of the node that reported an XID error marking them unhealthy (dcgm-exporter's DCGM_FI_DEV_XID_ERRORS; application XIDs not counted) in the window; only nodes with one, and none before GPU health was first read.", []string{"node"}, nil)
	asOfDesc = prometheus.NewDesc("gpupack_data_as_of_timestamp_seconds",
		"End of the accounting that the last good refresh read, as a Unix time; absent before the first.", nil, nil)
	upDesc = prometheus.NewDesc("gpupack_refresh_ok",
		"1 if the last refresh read Prometheus and the cluster without error, else 0.", nil, nil)
)

// podMetricDescs are the descriptions of the pods' counters, for one set
// of labels.
type podMetricDescs struct {
	allocated, active, idle, cost *prometheus.Desc
}

// newPodDescs describes the pods' counters, summed over the pods that
// labels (namespace, workload, and pod or not) name; the workload is
// "(none)" for pods whose controller is not known.
func newPodDescs(labels ...string) podMetricDescs {
	of := "the pods of the namespace and workload (\"(none)\": bare, or the controller not known)"
	if len(labels) == 3 {
		of = "the pod"
	}
	return podMetricDescs{
		allocated: prometheus.NewDesc("gpupack_gpu_allocated_seconds_total",
			"GPU-seconds allocated to "+of+" (a whole GPU counts 1 per second, a MIG slice or time-slice its share).", labels, nil),
		active: prometheus.NewDesc("gpupack_gpu_active_seconds_total",
			"GPU-seconds the GPUs of "+of+" were active (activity ratio integrated over time); absent when activity is unknown.", labels, nil),
		idle: prometheus.NewDesc("gpupack_gpu_idle_allocated_seconds_total",
			"GPU-seconds allocated to "+of+" while its GPUs were idle; absent when activity is unknown.", labels, nil),
		cost: prometheus.NewDesc("gpupack_gpu_cost_total",
			"Cost of the GPU time allocated to "+of+", in the currency of the label.", append(slices.Clone(labels), "currency"), nil),
	}
}

// descs are the descriptions of the pods' counters that e serves.
func (e *Engine) descs() podMetricDescs {
	if e.o.MetricsPerPod {
		return podDescs
	}
	return workloadDescs
}

// Collector serves the engine's state as metrics. It reads only what the
// last refresh published: a scrape never queries Prometheus, and when
// Prometheus is down the counters keep their last values.
func (e *Engine) Collector() prometheus.Collector { return collector{e} }

type collector struct{ e *Engine }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	pd := c.e.descs()
	for _, d := range []*prometheus.Desc{pd.allocated, pd.active, pd.idle, unallocatedDesc, unsampledDesc, pd.cost, pendingDesc, waitDesc, pendingWaitDesc, scheduledWaitDesc, unhealthyDesc, asOfDesc, upDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.State()
	ok := 0.0
	if st.Err == "" && !st.AsOf.IsZero() {
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, ok)
	if !st.AsOf.IsZero() {
		ch <- prometheus.MustNewConstMetric(asOfDesc, prometheus.GaugeValue, float64(st.AsOf.Unix()))
	}
	cs := st.counters
	c.collectPods(ch, cs)
	for _, n := range slices.Sorted(maps.Keys(cs.nodes)) {
		ch <- prometheus.MustNewConstMetric(unallocatedDesc, prometheus.CounterValue, cs.nodes[n].unallocated, n)
		ch <- prometheus.MustNewConstMetric(unsampledDesc, prometheus.CounterValue, cs.nodes[n].unsampled, n)
	}
	pending := pendingGPUPods(st, c.e.o.Now())
	for _, k := range slices.SortedFunc(maps.Keys(pending), func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) }) {
		p := pending[k]
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(p.pods), k[0], k[1])
		if p.waitKnown {
			ch <- prometheus.MustNewConstMetric(waitDesc, prometheus.GaugeValue, p.maxWait, k[0], k[1])
		}
	}
	unhealthy := map[string]int{}
	for _, h := range st.Health {
		if h.Critical() != 0 {
			unhealthy[h.Node]++
		}
	}
	for _, n := range slices.Sorted(maps.Keys(unhealthy)) {
		ch <- prometheus.MustNewConstMetric(unhealthyDesc, prometheus.GaugeValue, float64(unhealthy[n]), n)
	}
	if st.Diagnosis != nil {
		q := app.QueueWait(st.Report, st.Snapshot, st.Diagnosis, st.Created, c.e.o.Now())
		if q.Pending != nil {
			collectWaits(ch, pendingWaitDesc, q.Pending)
		}
		collectWaits(ch, scheduledWaitDesc, &q.Scheduled)
	}
}

// collectPods sends the pods' counters, by namespace and workload, or by
// pod.
func (c collector) collectPods(ch chan<- prometheus.Metric, cs counters) {
	pd := c.e.descs()
	for _, k := range slices.SortedFunc(maps.Keys(cs.groups), func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Workload, b.Workload), cmp.Compare(a.Pod, b.Pod))
	}) {
		g := cs.groups[k]
		labels := []string{k.Namespace, k.Workload}
		if c.e.o.MetricsPerPod {
			labels = append(labels, k.Pod)
		}
		ch <- prometheus.MustNewConstMetric(pd.allocated, prometheus.CounterValue, g.allocated, labels...)
		if g.activityKnown {
			ch <- prometheus.MustNewConstMetric(pd.active, prometheus.CounterValue, g.active, labels...)
			ch <- prometheus.MustNewConstMetric(pd.idle, prometheus.CounterValue, g.idle, labels...)
		}
		if g.costKnown {
			ch <- prometheus.MustNewConstMetric(pd.cost, prometheus.CounterValue, g.cost, append(labels, cs.currency)...)
		}
	}
}

// collectWaits sends a face's waits by group; usage.MaxWaitGroups bounds
// the groups of each kind, so the series are at most 3 x 3 x MaxWaitGroups.
// The label is stat, not quantile: these are gauges of a snapshot, not a
// Prometheus summary (promtool refuses quantile on a gauge).
func collectWaits(ch chan<- prometheus.Metric, d *prometheus.Desc, f *usage.WaitFace) {
	for _, by := range []struct {
		name   string
		groups []usage.WaitGroup
	}{{"namespace", f.ByNamespace}, {"shape", f.ByShape}, {"cause", f.ByCause}} {
		for _, g := range by.groups {
			for _, q := range []struct {
				stat string
				v    usage.Amount
			}{{"p50", g.Seconds.P50}, {"p95", g.Seconds.P95}, {"max", g.Seconds.Max}} {
				if q.v.Known() {
					ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, q.v.Value(), by.name, g.Key, q.stat)
				}
			}
		}
	}
}
