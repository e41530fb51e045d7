package report

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

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

// tally keeps the counters that --serve exposes. It starts from the first
// report and, at each scrape, accounts only the span since the last one, in
// windows of at most usage.MaxSteps steps, and adds it: the counters grow
// monotonically and no query grows with the time served. A pod or node keeps
// its counters for forgetAfter after it was last seen, then its series ends,
// so that churn over days cannot grow the tally without bound.
type tally struct {
	// account reads one window; nil for a source that does not move on
	// (the demo).
	account func(usage.Window) (*usage.Report, error)
	now     func() time.Time
	step    time.Duration

	mu       sync.Mutex
	end      time.Time // where the counted time ends
	currency string
	pods     map[usage.Owner]*podCounters
	nodes    map[string]*nodeCounters
}

// forgetAfter is how long a pod or node that no report names any more
// keeps its counters: long enough for Prometheus to scrape its last values.
const forgetAfter = time.Hour

// podCounters are one pod's counters; active and idle are the sums over
// the spans whose activity was known, cost over those with a price. seen
// is the end of the last report that named the pod.
type podCounters struct {
	allocated, active, idle, cost float64
	activityKnown, costKnown      bool
	seen                          time.Time
}

// nodeCounters are one node's counter and when a report last named it.
type nodeCounters struct {
	unallocated float64 // GPU-seconds
	seen        time.Time
}

func newTally(first *usage.Report, account func(usage.Window) (*usage.Report, error), now func() time.Time, step time.Duration) *tally {
	t := &tally{account: account, now: now, step: step, end: first.End, pods: map[usage.Owner]*podCounters{}, nodes: map[string]*nodeCounters{}}
	t.add(first)
	return t
}

func (t *tally) add(r *usage.Report) {
	t.currency = r.Currency
	for _, p := range r.Pods {
		k := usage.Owner{Namespace: p.Namespace, Pod: p.Pod}
		c := t.pods[k]
		if c == nil {
			c = &podCounters{}
			t.pods[k] = c
		}
		c.allocated += float64(p.AllocatedGPUSeconds)
		c.seen = r.End
		if p.ActiveGPUSeconds.Known && p.IdleAllocatedGPUSeconds.Known {
			c.active += p.ActiveGPUSeconds.Value
			c.idle += p.IdleAllocatedGPUSeconds.Value
			c.activityKnown = true
		}
		if p.Cost.Known {
			c.cost += p.Cost.Value
			c.costKnown = true
		}
	}
	for _, n := range r.Nodes {
		c := t.nodes[n.Name]
		if c == nil {
			c = &nodeCounters{}
			t.nodes[n.Name] = c
		}
		c.unallocated += float64(n.UnallocatedGPUSeconds)
		c.seen = r.End
	}
	forget := r.End.Add(-forgetAfter)
	maps.DeleteFunc(t.pods, func(_ usage.Owner, c *podCounters) bool { return c.seen.Before(forget) })
	maps.DeleteFunc(t.nodes, func(_ string, c *nodeCounters) bool { return c.seen.Before(forget) })
}

// catchUp accounts the time from the counted end to now, MaxSteps steps
// at a time. A failed window leaves the counters where the last good one
// put them, to be retried at the next scrape.
func (t *tally) catchUp() error {
	if t.account == nil {
		return nil
	}
	now := t.now().UTC().Truncate(t.step)
	for t.end.Before(now) {
		w := usage.Window{Start: t.end, End: now, Step: t.step}
		if w.Slots() > usage.MaxSteps {
			w.End = w.Start.Add(usage.MaxSteps * t.step)
		}
		r, err := t.account(w)
		if err != nil {
			return err
		}
		t.add(r)
		t.end = w.End
	}
	return nil
}

// collector serves a tally as counters.
type collector struct {
	tally *tally
}

var _ prometheus.Collector = &collector{}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{allocatedDesc, activeDesc, idleDesc, unallocatedDesc, costDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	t := c.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.catchUp(); err != nil {
		ch <- prometheus.NewInvalidMetric(allocatedDesc, err)
		return
	}
	for _, k := range slices.SortedFunc(maps.Keys(t.pods), func(a, b usage.Owner) int { return cmp.Compare(a.PodKey(), b.PodKey()) }) {
		p := t.pods[k]
		ch <- prometheus.MustNewConstMetric(allocatedDesc, prometheus.CounterValue, p.allocated, k.Namespace, k.Pod)
		if p.activityKnown {
			ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.CounterValue, p.active, k.Namespace, k.Pod)
			ch <- prometheus.MustNewConstMetric(idleDesc, prometheus.CounterValue, p.idle, k.Namespace, k.Pod)
		}
		if p.costKnown {
			ch <- prometheus.MustNewConstMetric(costDesc, prometheus.CounterValue, p.cost, k.Namespace, k.Pod, t.currency)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(t.nodes)) {
		ch <- prometheus.MustNewConstMetric(unallocatedDesc, prometheus.CounterValue, t.nodes[n].unallocated, n)
	}
}
