package live

import (
	"cmp"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/app"
)

// ViewCollector serves a view that no engine refreshes (serve --demo's)
// as the metrics Engine.Collector serves, under the same names and
// labels: the pods' counters by namespace and workload and the nodes'
// counters are the window's totals, the gauges are as of the view's end.
// view returns the view as far as it is built; before it is, only
// gpupack_refresh_ok (0) is served.
func ViewCollector(view func() *app.View) prometheus.Collector { return viewCollector{view} }

type viewCollector struct{ view func() *app.View }

func (c viewCollector) Describe(ch chan<- *prometheus.Desc) {
	collector{&Engine{}}.Describe(ch)
}

func (c viewCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.view()
	if v == nil {
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(asOfDesc, prometheus.GaugeValue, float64(v.AsOf.Unix()))
	if r := v.Report; r != nil {
		cs := fromReport(r)
		// The view's pods grouped as the live store groups them, grown
		// from nothing.
		grouped := &store{groups: map[groupKey]*podCounter{}}
		grouped.served(cs, nil, workloadsOf(r))
		cs.groups = grouped.groups
		collector{&Engine{}}.collectPods(ch, cs)
		for _, n := range slices.Sorted(maps.Keys(cs.nodes)) {
			ch <- prometheus.MustNewConstMetric(unallocatedDesc, prometheus.CounterValue, cs.nodes[n].unallocated, n)
			ch <- prometheus.MustNewConstMetric(unsampledDesc, prometheus.CounterValue, cs.nodes[n].unsampled, n)
		}
	}
	collectViewPending(ch, v)
	unhealthy := map[string]int{}
	for _, h := range v.Health {
		if h.Critical != 0 {
			unhealthy[h.Node]++
		}
	}
	for _, n := range slices.Sorted(maps.Keys(unhealthy)) {
		ch <- prometheus.MustNewConstMetric(unhealthyDesc, prometheus.GaugeValue, float64(unhealthy[n]), n)
	}
	if q := v.QueueWait; q != nil {
		if q.Pending != nil {
			collectWaits(ch, pendingWaitDesc, q.Pending)
		}
		collectWaits(ch, scheduledWaitDesc, &q.Scheduled)
	}
}

// collectViewPending sends the view's pending GPU pods by namespace and
// cause, with the longest wait of each, as pendingGPUPods counts them.
func collectViewPending(ch chan<- prometheus.Metric, v *app.View) {
	pending := map[[2]string]*pendingStat{}
	for _, p := range v.Pending {
		if p.Cause == "" || p.Workload != nil {
			continue // skipped, or a workload without pods
		}
		key, _ := cluster.ParsePodKey(p.Pod)
		k := [2]string{key.Namespace, string(p.Cause)}
		s := pending[k]
		if s == nil {
			s = &pendingStat{}
			pending[k] = s
		}
		s.pods++
		if p.WaitedSeconds.Known() {
			s.maxWait = max(s.maxWait, p.WaitedSeconds.Value())
			s.waitKnown = true
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(pending), func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) }) {
		p := pending[k]
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(p.pods), k[0], k[1])
		if p.waitKnown {
			ch <- prometheus.MustNewConstMetric(waitDesc, prometheus.GaugeValue, p.maxWait, k[0], k[1])
		}
	}
}
