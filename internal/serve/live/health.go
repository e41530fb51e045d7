package live

import (
	"context"
	"maps"
	"slices"

	"github.com/gpupack/gpupack/usage"
)

// windowHealth is the health of hours (each hour's as read): per GPU, the
// distinct XIDs, sorted as usage sorts them (by node and UUID, XIDs by
// value); an empty, non-nil list when no GPU reported any.
func windowHealth(hours []*hour) []usage.DeviceHealth {
	byGPU := map[string]*usage.DeviceHealth{}
	for _, hr := range hours {
		for _, h := range hr.health {
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
	out := make([]usage.DeviceHealth, 0, len(byGPU))
	for _, key := range slices.Sorted(maps.Keys(byGPU)) {
		g := byGPU[key]
		slices.Sort(g.XIDs)
		out = append(out, *g)
	}
	return out
}

// readHealth reads the GPU health of the store's hours as readUsage left
// them (it runs after a good usage read): each complete hour whose health
// is not read yet with one query of its own (promsource.LoadHealth over
// the hour), and the partial hour again; the hours carry it, so it slides
// with them and its size is bounded by the window's hours times the GPUs
// with XIDs. It publishes the window's health in next.Health. A failed
// read keeps the hours read so far and next.Health as it was (the last
// good one), and returns the error; the hours not read are asked again at
// the next refresh.
func (e *Engine) readHealth(ctx context.Context, next *State) error {
	hours := e.store.sorted()
	for _, h := range hours {
		if h.healthRead { // never the partial hour: each usage read makes it anew
			continue
		}
		hs, err := e.src.LoadHealth(ctx, usage.Window{Start: h.start, End: h.end, Step: e.o.Step})
		if err != nil {
			return err
		}
		h.health, h.healthRead = hs, true
	}
	next.Health = windowHealth(hours)
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
