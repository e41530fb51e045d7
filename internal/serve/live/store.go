package live

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/usage"
)

// store keeps the pushed-down buckets of a sliding window, one entry per
// complete bucket of time (an hour), plus the current partial one, and the
// counters that /metrics serves. Its size is bounded by the window: buckets
// older than it are retired into the counters and dropped, and pods that
// no bucket names for forgetAfter are forgotten.
type store struct {
	bucket time.Duration
	window time.Duration

	// hours are the complete buckets by start; loadedTo is where the
	// loaded complete buckets end (every hour before it, back to the
	// window's start, is in hours, possibly empty).
	hours    map[time.Time]*hour
	loadedTo time.Time
	// partial is the current, incomplete bucket: read again each refresh.
	partial *hour
	// complete is the account of the complete hours' buckets over
	// [completeFrom, completeTo): built again only when those change (an
	// hour read or retired, at most once an hour once the window is
	// read), so that a refresh clones it and adds only the partial hour.
	complete                 *usage.BucketAccount
	completeFrom, completeTo time.Time

	// retired holds the counters of hours that left the window.
	retired counters
	// emitted are the last values served, so that a counter never goes
	// down when a partial hour reads less than before.
	emitted counters
	// perPod keeps a series per pod in groups; otherwise a series per
	// namespace and workload.
	perPod bool
	// groups are the counters served: each pod's growth since it was last
	// served is added to its group, so that a group's counter only grows
	// while its pods come, go and are forgotten.
	groups map[groupKey]*podCounter

	// devices are the devices seen in the window by key, with the end of
	// the last hour that named each: an hour read without one counts its
	// time as unsampled (withUnseen).
	devices map[string]seenDevice
	// nodes are the cluster's nodes as last seen, nil where the cluster is
	// not known: a device of a node that left the cluster is not counted
	// as unsampled.
	nodes map[string]bool
}

// groupKey names a served series of the pods' counters: a namespace and
// workload, and the pod where the store keeps a series per pod.
type groupKey struct{ Namespace, Workload, Pod string }

// noWorkload is the workload label of the pods whose controller is not
// known (bare pods, or no kube-state-metrics and no cluster to say).
const noWorkload = "(none)"

// seenDevice is a device seen in the window, and the end of the last hour
// that named it.
type seenDevice struct {
	device usage.Device
	last   time.Time
}

// hour is one bucket of time: its buckets as read, and its totals
// accounted once when it was read.
type hour struct {
	start, end time.Time
	buckets    []usage.Bucket
	totals     hourTotals
	// pods are kube-state-metrics' pod times in the hour; nil when not
	// read.
	pods *promql.PodTimes
	// health is what dcgm-exporter's XID gauge said in the hour, once
	// healthRead (readHealth: a complete hour once, the partial hour at
	// each refresh).
	health     []usage.DeviceHealth
	healthRead bool
	// empty marks a complete hour read without any DCGM series while the
	// cluster had GPU nodes: it is read again for a while
	// (Engine.rereadEmpty) and named in the report's warnings.
	empty bool
}

// hourTotals are what the chart and the counters need of one hour.
type hourTotals struct {
	fleet app.Hour
	c     counters
}

// counters are GPU-seconds and money by pod and by node, summed over hours.
type counters struct {
	currency string
	pods     map[podKey]*podCounter
	nodes    map[string]*nodeCounter
	// groups are what /metrics serves of the pods (store.counters fills
	// them): by namespace and workload, or by pod.
	groups map[groupKey]*podCounter
}

type podKey struct{ Namespace, Pod string }

type podCounter struct {
	allocated, active, idle, cost float64
	activityKnown, costKnown      bool
	// last is the end of the latest hour that named the pod.
	last time.Time
}

// add adds o's seconds and cost into p.
func (p *podCounter) add(o *podCounter) {
	p.allocated += o.allocated
	p.active += o.active
	p.idle += o.idle
	p.cost += o.cost
	p.activityKnown = p.activityKnown || o.activityKnown
	p.costKnown = p.costKnown || o.costKnown
	p.last = later(p.last, o.last)
}

type nodeCounter struct {
	unallocated, unsampled float64
	last                   time.Time
}

func newCounters() counters {
	return counters{pods: map[podKey]*podCounter{}, nodes: map[string]*nodeCounter{}}
}

// fromReport takes the counters of one hour's report.
func fromReport(r *usage.Report) counters {
	c := newCounters()
	c.currency = r.Currency
	for _, p := range r.Pods {
		pc := &podCounter{allocated: float64(p.AllocatedGPUSeconds), last: r.End}
		if p.ActiveGPUSeconds.Known() && p.IdleAllocatedGPUSeconds.Known() {
			pc.active, pc.idle, pc.activityKnown = p.ActiveGPUSeconds.Value(), p.IdleAllocatedGPUSeconds.Value(), true
		}
		if p.Cost.Known() {
			pc.cost, pc.costKnown = p.Cost.Value(), true
		}
		c.pods[podKey{p.Namespace, p.Pod}] = pc
	}
	for _, n := range r.Nodes {
		c.nodes[n.Name] = &nodeCounter{unallocated: float64(n.UnallocatedGPUSeconds), unsampled: float64(n.UnsampledGPUSeconds), last: r.End}
	}
	return c
}

// add adds o into c.
func (c *counters) add(o counters) {
	if o.currency != "" {
		c.currency = o.currency
	}
	for k, v := range o.pods {
		p := c.pods[k]
		if p == nil {
			p = &podCounter{}
			c.pods[k] = p
		}
		p.add(v)
	}
	for k, v := range o.nodes {
		n := c.nodes[k]
		if n == nil {
			n = &nodeCounter{}
			c.nodes[k] = n
		}
		n.unallocated += v.unallocated
		n.unsampled += v.unsampled
		n.last = later(n.last, v.last)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func newStore(bucket, window time.Duration, perPod bool) *store {
	return &store{bucket: bucket, window: window, hours: map[time.Time]*hour{}, retired: newCounters(), emitted: newCounters(),
		perPod: perPod, groups: map[groupKey]*podCounter{}, devices: map[string]seenDevice{}}
}

// caughtUp says whether at most one complete bucket before cur, the
// partial bucket's start, is still to be read: a refresh's usual work,
// not the first read of the window nor a catch-up after an outage.
func (s *store) caughtUp(cur time.Time) bool {
	return !s.loadedTo.IsZero() && !s.loadedTo.Before(cur.Add(-s.bucket))
}

// slide drops the hours that start before from, adding their counters to
// the retired ones, and forgets retired pods and nodes that no hour has
// named since forget.
func (s *store) slide(from, forget time.Time) {
	for start, h := range s.hours {
		if start.Before(from) {
			s.retired.add(h.totals.c)
			delete(s.hours, start)
		}
	}
	if s.loadedTo.Before(from) {
		s.loadedTo = from
	}
	maps.DeleteFunc(s.retired.pods, func(_ podKey, p *podCounter) bool { return p.last.Before(forget) })
	maps.DeleteFunc(s.retired.nodes, func(_ string, n *nodeCounter) bool { return n.last.Before(forget) })
	maps.DeleteFunc(s.emitted.pods, func(k podKey, p *podCounter) bool {
		_, kept := s.retired.pods[k]
		return !kept && p.last.Before(forget)
	})
	maps.DeleteFunc(s.emitted.nodes, func(k string, n *nodeCounter) bool {
		_, kept := s.retired.nodes[k]
		return !kept && n.last.Before(forget)
	})
	maps.DeleteFunc(s.groups, func(_ groupKey, g *podCounter) bool { return g.last.Before(forget) })
	maps.DeleteFunc(s.devices, func(_ string, d seenDevice) bool { return !d.last.After(from) })
}

// withUnseen is bs, the buckets of [start, start+length) as read, with a
// bucket without samples added for each device seen earlier in the window
// that bs lacks, on a node still in the cluster where that is known, so
// that its time there counts as unsampled, not as no capacity at all; it
// notes the devices that bs names.
func (s *store) withUnseen(bs []usage.Bucket, start time.Time, length, step time.Duration) []usage.Bucket {
	end := start.Add(length)
	in := map[string]bool{}
	for _, b := range bs {
		k := b.Device.Key()
		in[k] = true
		if d, ok := s.devices[k]; !ok || d.last.Before(end) {
			s.devices[k] = seenDevice{device: b.Device, last: end}
		}
	}
	out := bs
	for _, k := range slices.Sorted(maps.Keys(s.devices)) {
		if d := s.devices[k]; !in[k] && d.last.Before(end) && (s.nodes == nil || s.nodes[d.device.Node]) {
			out = append(slices.Clip(out), usage.Bucket{Start: start, Length: length, Step: step, Device: d.device})
		}
	}
	return out
}

// replace puts h in place of the complete hour that starts where it does
// (an hour read again), so that the window's account is built again.
func (s *store) replace(h *hour) {
	s.hours[h.start] = h
	s.complete = nil
}

// emptyHoursWarning says which complete hours of the window were read
// without any DCGM series while the cluster had GPU nodes; nil if none.
func (s *store) emptyHoursWarning() []string {
	var spans []string
	var from, to time.Time
	flush := func() {
		if !from.IsZero() {
			spans = append(spans, from.Format(time.RFC3339)+".."+to.Format(time.RFC3339))
		}
		from = time.Time{}
	}
	for _, h := range s.sorted() {
		switch {
		case !h.empty:
			flush()
		case !from.IsZero() && h.start.Equal(to):
			to = h.end
		default:
			flush()
			from, to = h.start, h.end
		}
	}
	flush()
	if len(spans) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("no DCGM series in %s although the cluster has GPU nodes: dcgm-exporter or Prometheus was down, or --prometheus-selector matches none of its series; the GPU time there is unsampled (gpupack_gpu_unsampled_seconds_total), and the hours are read again for %s after they end", strings.Join(spans, ", "), emptyRereadFor)}
}

// sorted returns the complete hours in time order, then the partial one.
func (s *store) sorted() []*hour {
	out := make([]*hour, 0, len(s.hours)+1)
	for _, start := range slices.SortedFunc(maps.Keys(s.hours), func(a, b time.Time) int { return a.Compare(b) }) {
		out = append(out, s.hours[start])
	}
	if s.partial != nil {
		out = append(out, s.partial)
	}
	return out
}

// account is the window [from, end)'s account of every bucket, complete
// hours and partial, added in time order: what usage.AccountBuckets
// accounts over them, at the cost of a copy of the complete hours' account
// (built again only when they changed) and of the partial hour's buckets.
func (s *store) account(from, end time.Time) (*usage.BucketAccount, error) {
	// The complete hours are those from from up to loadedTo (slide drops
	// those before from, hours are only ever read at loadedTo): the two
	// name them.
	if s.complete == nil || !s.completeFrom.Equal(from) || !s.completeTo.Equal(s.loadedTo) {
		s.complete = nil
		a, err := usage.NewBucketAccount(from, s.loadedTo)
		if err != nil {
			return nil, err
		}
		for _, h := range s.sorted() {
			if h != s.partial {
				if err := a.AddAll(h.buckets); err != nil {
					return nil, err
				}
			}
		}
		s.complete, s.completeFrom, s.completeTo = a, from, s.loadedTo
	}
	a, err := s.complete.Clone(end)
	if err != nil {
		return nil, err
	}
	if s.partial != nil {
		if err := a.AddAll(s.partial.buckets); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// podTimes joins the pod times of every hour of the window, complete and
// partial, into the pods' times over the window.
func (s *store) podTimes() []usage.PodEvents {
	var spans []*promql.PodTimes
	for _, h := range s.sorted() {
		if h.pods != nil {
			spans = append(spans, h.pods)
		}
	}
	return promql.MergePodTimes(spans)
}

// counters sums the retired counters and every hour's, and keeps each
// value at least the last one served, so that the served counters only
// grow (a partial hour read again may come back with less); its groups
// are the pods' counters by namespace and workload (workloads, by pod),
// or by pod where the store keeps a series per pod.
func (s *store) counters(workloads map[podKey]string) counters {
	c := newCounters()
	c.add(s.retired)
	for _, h := range s.sorted() {
		c.add(h.totals.c)
	}
	for k, p := range c.pods {
		if e := s.emitted.pods[k]; e != nil {
			p.allocated = max(p.allocated, e.allocated)
			p.active = max(p.active, e.active)
			p.idle = max(p.idle, e.idle)
			p.cost = max(p.cost, e.cost)
		}
	}
	for k, n := range c.nodes {
		if e := s.emitted.nodes[k]; e != nil {
			n.unallocated = max(n.unallocated, e.unallocated)
		}
	}
	// Pods and nodes served before and not in the window any more (until
	// forgotten) keep their last values rather than vanish.
	for k, e := range s.emitted.pods {
		if c.pods[k] == nil {
			cp := *e
			c.pods[k] = &cp
		}
	}
	for k, e := range s.emitted.nodes {
		if c.nodes[k] == nil {
			cp := *e
			c.nodes[k] = &cp
		}
	}
	prev := s.emitted.pods
	s.emitted = newCounters()
	s.emitted.add(c)
	s.served(c, prev, workloads)
	c.groups = make(map[groupKey]*podCounter, len(s.groups))
	for k, g := range s.groups {
		cp := *g
		c.groups[k] = &cp
	}
	return c
}

// served adds to the groups what each pod's counters grew by since last
// served (c, counters' result; prev, the pods' values then), the pod
// filed under its workload (workloads, by pod; noWorkload where not
// known). A group's counter so only grows, whichever of its pods leave
// the window or are forgotten.
func (s *store) served(c counters, prev map[podKey]*podCounter, workloads map[podKey]string) {
	for k, p := range c.pods {
		g := groupKey{Namespace: k.Namespace, Workload: cmp.Or(workloads[k], noWorkload)}
		if s.perPod {
			g.Pod = k.Pod
		}
		sum := s.groups[g]
		if sum == nil {
			sum = &podCounter{}
			s.groups[g] = sum
		}
		var was podCounter
		if v := prev[k]; v != nil {
			was = *v
		}
		sum.allocated += p.allocated - was.allocated
		sum.active += p.active - was.active
		sum.idle += p.idle - was.idle
		sum.cost += p.cost - was.cost
		sum.activityKnown = sum.activityKnown || p.activityKnown
		sum.costKnown = sum.costKnown || p.costKnown
		sum.last = later(sum.last, p.last)
	}
}
