package live

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// healthStore keeps what dcgm-exporter's XID gauge said in each complete
// hour of the window, read once (promsource.LoadHealth over the hour), and
// in the current partial hour, read again each refresh. Like the usage
// store it slides with the window: an hour that leaves it is dropped, so
// its size is bounded by the window's hours times the GPUs with XIDs.
type healthStore struct {
	// hours are the complete hours by start; loadedTo is where the loaded
	// complete hours end.
	hours    map[time.Time][]usage.DeviceHealth
	loadedTo time.Time
	partial  []usage.DeviceHealth
}

func newHealthStore() *healthStore {
	return &healthStore{hours: map[time.Time][]usage.DeviceHealth{}}
}

// slide drops the hours that start before from.
func (s *healthStore) slide(from time.Time) {
	maps.DeleteFunc(s.hours, func(start time.Time, _ []usage.DeviceHealth) bool { return start.Before(from) })
	if s.loadedTo.Before(from) {
		s.loadedTo = from
	}
}

// window is the health of the whole window: per GPU, the distinct XIDs of
// its hours and of the partial one, sorted as usage sorts them (by node
// and UUID, XIDs by value); an empty, non-nil list when no GPU reported
// any.
func (s *healthStore) window() []usage.DeviceHealth {
	byGPU := map[string]*usage.DeviceHealth{}
	add := func(hs []usage.DeviceHealth) {
		for _, h := range hs {
			key := h.Node + "/" + h.UUID
			g := byGPU[key]
			if g == nil {
				g = &usage.DeviceHealth{Node: h.Node, UUID: h.UUID, GPU: h.GPU}
				byGPU[key] = g
			}
			for _, x := range h.XIDs {
				if !slices.Contains(g.XIDs, x) {
					g.XIDs = append(g.XIDs, x)
				}
			}
		}
	}
	for _, hs := range s.hours {
		add(hs)
	}
	add(s.partial)
	out := make([]usage.DeviceHealth, 0, len(byGPU))
	for _, key := range slices.Sorted(maps.Keys(byGPU)) {
		g := byGPU[key]
		slices.Sort(g.XIDs)
		out = append(out, *g)
	}
	return out
}

// readHealth brings the health store up to now as readUsage does the
// usage: it drops the hours that left the window, reads each complete
// hour not read yet with one query of its own and the partial hour again,
// and publishes the window's health in next.Health. A failed read keeps
// the hours read so far and next.Health as it was (the last good one),
// and returns the error.
func (e *Engine) readHealth(ctx context.Context, now time.Time, next *State) error {
	s := e.health
	cur := now.Add(-e.o.settle()).Truncate(e.o.Bucket) // the partial hour's start
	s.slide(cur.Add(-e.o.Window))
	for s.loadedTo.Before(cur) {
		w := usage.Window{Start: s.loadedTo, End: s.loadedTo.Add(e.o.Bucket), Step: e.o.Step}
		hs, err := e.src.LoadHealth(ctx, w)
		if err != nil {
			return err
		}
		s.hours[w.Start] = hs
		s.loadedTo = w.End
	}
	s.partial = nil
	if end := now.Truncate(e.o.Step); end.After(cur) {
		hs, err := e.src.LoadHealth(ctx, usage.Window{Start: cur, End: end, Step: e.o.Step})
		if err != nil {
			return err
		}
		s.partial = hs
	}
	next.Health = s.window()
	return nil
}

// withHealth gives the report the window's health, as report's hourly path
// does (Report.Health), so that its usage facts name the unhealthy GPUs
// and the plan taints them. The report is copied: the one published
// before may be read meanwhile.
func withHealth(r *usage.Report, health []usage.DeviceHealth) *usage.Report {
	if r == nil || health == nil {
		return r
	}
	cp := *r
	cp.Health = health
	if len(health) == 0 {
		cp.Health = nil // as the CLI's report: no GPU with XIDs, no field
	}
	return &cp
}
