package usage

import (
	"cmp"
	"maps"
	"slices"
)

// PodWait is one GPU pod's time in the queue: for a pod pending now, from
// its creation to now; for one scheduled in the window, from its creation
// to its scheduling. Seconds is unknown when either time is.
type PodWait struct {
	Namespace string
	// Shape is the GPU request as diagnose prints it ("1 GPU", "MIG
	// 1g.10gb", "500m GPU"); empty when not known.
	Shape string
	// Cause is the diagnosed cause of a pending pod; empty for a scheduled
	// one and for a pending pod that diagnose skipped.
	Cause   string
	Seconds Amount
}

// WaitStats are the waits of a group of pods: how many, how many of them
// with an unknown wait (left out of the percentiles, never counted as 0),
// and the nearest-rank p50, p95 and max of the known waits in seconds
// (unknown when no wait is known).
type WaitStats struct {
	Pods        int         `json:"pods"`
	UnknownWait int         `json:"unknownWait"`
	Seconds     Percentiles `json:"seconds"`
}

// WaitGroup is the waits of the pods that share a namespace, GPU shape or
// cause, named by Key.
type WaitGroup struct {
	Key string `json:"key"`
	WaitStats
}

// WaitFace is one set of pods' waits, in all and grouped.
type WaitFace struct {
	All         WaitStats   `json:"all"`
	ByNamespace []WaitGroup `json:"byNamespace"`
	ByShape     []WaitGroup `json:"byShape"`
	// ByCause is for pending pods only.
	ByCause []WaitGroup `json:"byCause,omitempty"`
}

// QueueWait is how long GPU pods wait to be scheduled: those pending now
// (nil when the pending pods are not known, as for a report from
// Prometheus alone) and those scheduled in the window.
type QueueWait struct {
	Pending   *WaitFace `json:"pending,omitempty"`
	Scheduled WaitFace  `json:"scheduled"`
}

// MaxWaitGroups caps the groups of each kind (namespaces, shapes, causes):
// the MaxWaitGroups-1 with the most pods keep their name and the rest are
// counted together under OtherGroup, so that a table or a metric label
// never grows with the number of namespaces.
const MaxWaitGroups = 20

// OtherGroup and UnknownGroup name the folded groups and pods whose
// namespace, shape or cause is not known.
const (
	OtherGroup   = "(other)"
	UnknownGroup = "(unknown)"
)

// QueueWaits groups the pending and the scheduled pods' waits by namespace,
// GPU shape and (pending only) cause; pendingKnown says that pending lists
// every pending pod (none pending is then a finding, not a blank).
func QueueWaits(pending []PodWait, pendingKnown bool, scheduled []PodWait) QueueWait {
	q := QueueWait{Scheduled: waitFace(scheduled, false)}
	if pendingKnown {
		f := waitFace(pending, true)
		q.Pending = &f
	}
	return q
}

// ScheduledWaits are the waits of the pods of r scheduled in the window
// (created to scheduled), and of those whose scheduling time is unknown,
// whose wait is unknown; shapes names each pod's GPU request by key
// ("namespace/pod") where known.
func ScheduledWaits(r *Report, shapes map[string]string) []PodWait {
	out := make([]PodWait, 0, len(r.Pods))
	for i := range r.Pods {
		p := &r.Pods[i]
		if at := p.Startup.Scheduled; at != nil && (at.Before(r.Start) || !at.Before(r.End)) {
			continue
		}
		out = append(out, PodWait{Namespace: p.Namespace, Shape: shapes[p.Key()], Seconds: p.Startup.Phase(PhaseScheduling).Seconds})
	}
	return out
}

func waitFace(waits []PodWait, pending bool) WaitFace {
	f := WaitFace{All: waitStats(waits)}
	f.ByNamespace = groupWaits(waits, func(w PodWait) string { return w.Namespace })
	f.ByShape = groupWaits(waits, func(w PodWait) string { return w.Shape })
	if pending {
		f.ByCause = groupWaits(waits, func(w PodWait) string { return w.Cause })
	}
	return f
}

func waitStats(waits []PodWait) WaitStats {
	var g waitGroup
	for _, w := range waits {
		g.add(w.Seconds)
	}
	return g.stats()
}

// waitGroup gathers one group's waits as it needs them: a count and the
// known seconds (8 bytes a pod, where a PodWait is 64: a month of a
// fleet's report groups 180,000 pods three ways).
type waitGroup struct {
	pods  int
	known []float64
}

func (g *waitGroup) add(s Amount) {
	g.pods++
	if s.Known() {
		g.known = append(g.known, s.Value())
	}
}

func (g *waitGroup) stats() WaitStats {
	return WaitStats{Pods: g.pods, UnknownWait: g.pods - len(g.known), Seconds: percentiles(g.known)}
}

// groupWaits groups waits by key, the largest groups first (then by name),
// folding those beyond MaxWaitGroups into OtherGroup.
func groupWaits(waits []PodWait, key func(PodWait) string) []WaitGroup {
	by := map[string]*waitGroup{}
	for _, w := range waits {
		k := key(w)
		if k == "" {
			k = UnknownGroup
		}
		g := by[k]
		if g == nil {
			g = &waitGroup{}
			by[k] = g
		}
		g.add(w.Seconds)
	}
	keys := slices.SortedFunc(maps.Keys(by), func(a, b string) int {
		return cmp.Or(cmp.Compare(by[b].pods, by[a].pods), cmp.Compare(a, b))
	})
	if len(keys) > MaxWaitGroups {
		rest := &waitGroup{}
		for _, k := range keys[MaxWaitGroups-1:] {
			rest.pods += by[k].pods
			rest.known = append(rest.known, by[k].known...)
		}
		keys = append(keys[:MaxWaitGroups-1:MaxWaitGroups-1], OtherGroup)
		by[OtherGroup] = rest
	}
	out := make([]WaitGroup, 0, len(keys))
	for _, k := range keys {
		out = append(out, WaitGroup{Key: k, WaitStats: by[k].stats()})
	}
	return out
}
