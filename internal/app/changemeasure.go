package app

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/usage"
)

// MaxChangesMeasured bounds how many of the newest applied node changes
// the apply controller measures (two accounting queries each).
const MaxChangesMeasured = 20

// ChangeMeasured is what an applied node change did, measured from the
// same accounting as the plan over the hours since it ended, beside what
// the plan expected of the node: the pending pods its proof placed there.
type ChangeMeasured struct {
	Node  string    `json:"node"`
	Hash  string    `json:"hash"`
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Hours float64   `json:"hours"`
	// ExpectedFits are the pending pods the plan's proof placed on the
	// node once changed.
	ExpectedFits []cluster.PodKey `json:"expectedFits"`
	// FitsPlaced are those of them that held GPUs on the node since, and
	// FitsGPUHours the GPU-hours allocated to them there.
	FitsPlaced   []string `json:"fitsPlaced"`
	FitsGPUHours float64  `json:"fitsGPUHours"`
	// AllocatedBeforeGPUHours are the node's allocated GPU-hours over as
	// long a span just before the change started, AllocatedAfterGPUHours
	// over the span since it ended.
	AllocatedBeforeGPUHours float64 `json:"allocatedBeforeGPUHours"`
	AllocatedAfterGPUHours  float64 `json:"allocatedAfterGPUHours"`
	// Error says why it could not be measured (then the figures are 0).
	Error string `json:"error,omitempty"`
}

// MeasureChange measures an applied node change over [Ended, now] (at
// most a week) against as long a span before it started, from m's store.
func MeasureChange(ctx context.Context, m Measurement, r NodeResult, fits []cluster.PodKey, now time.Time) ChangeMeasured {
	out := ChangeMeasured{Node: r.Node, Hash: r.Hash, From: r.Ended, To: now, ExpectedFits: orEmptyKeys(fits), FitsPlaced: []string{}}
	span := now.Sub(r.Ended)
	if span <= 0 {
		out.Error = "no time has passed since the change"
		return out
	}
	span = min(span, 7*24*time.Hour)
	out.From = now.Add(-span)
	before, err := measureSpan(ctx, m, r.Started.Add(-span), r.Started)
	if err != nil {
		out.Error = "measuring before the change: " + err.Error()
		return out
	}
	after, err := measureSpan(ctx, m, out.From, now)
	if err != nil {
		out.Error = "measuring since the change: " + err.Error()
		return out
	}
	return changeFigures(out, before, after)
}

// changeFigures fills in the node's allocation before and after, and
// what the expected pods held on it after.
func changeFigures(out ChangeMeasured, before, after *usage.Report) ChangeMeasured {
	out.Hours = round4(after.End.Sub(after.Start).Hours())
	out.AllocatedBeforeGPUHours = nodeAllocated(before, out.Node)
	out.AllocatedAfterGPUHours = nodeAllocated(after, out.Node)
	want := map[string]bool{}
	for _, k := range out.ExpectedFits {
		want[k.Namespace+"/"+k.Name] = true
	}
	var held float64
	for i := range after.Pods {
		p := &after.Pods[i]
		if p.Node != out.Node || !want[p.Key()] || p.AllocatedGPUSeconds <= 0 {
			continue
		}
		held += p.AllocatedGPUSeconds.Hours()
		if !slices.Contains(out.FitsPlaced, p.Key()) {
			out.FitsPlaced = append(out.FitsPlaced, p.Key())
		}
	}
	slices.Sort(out.FitsPlaced)
	out.FitsGPUHours = round4(held)
	return out
}

func nodeAllocated(r *usage.Report, node string) float64 {
	for _, n := range r.Nodes {
		if n.Name == node {
			return round4(n.AllocatedGPUSeconds.Hours())
		}
	}
	return 0
}

func measureSpan(ctx context.Context, m Measurement, from, to time.Time) (*usage.Report, error) {
	m.Window = usage.Window{Start: from, End: to, Step: usage.DefaultStep(to.Sub(from))}
	m.Hourly = false
	return Measure(ctx, m)
}

func orEmptyKeys(ks []cluster.PodKey) []cluster.PodKey {
	if ks == nil {
		return []cluster.PodKey{}
	}
	return ks
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
