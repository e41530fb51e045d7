package app

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/usage"
)

// TestChangeFigures: an applied node change is measured as the node's
// allocated GPU-hours before against after, and the GPU-hours that the
// pending pods it was for held on that node since (another node's, or
// another pod's, are not theirs).
func TestChangeFigures(t *testing.T) {
	start := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	report := func(from time.Time, node float64, pods ...usage.PodUsage) *usage.Report {
		r := &usage.Report{Start: from, End: from.Add(10 * time.Hour), Pods: pods}
		r.Nodes = []usage.NodeUsage{{GroupUsage: usage.GroupUsage{Name: "gpu-1"}}, {GroupUsage: usage.GroupUsage{Name: "gpu-2"}}}
		r.Nodes[0].AllocatedGPUSeconds = usage.Seconds(node * 3600)
		r.Nodes[1].AllocatedGPUSeconds = 99 * 3600
		return r
	}
	pod := func(ns, name, node string, hours float64) usage.PodUsage {
		p := usage.PodUsage{Namespace: ns, Pod: name, Node: node}
		p.AllocatedGPUSeconds = usage.Seconds(hours * 3600)
		return p
	}
	fits := []cluster.PodKey{{Namespace: "ml", Name: "a"}, {Namespace: "ml", Name: "b"}, {Namespace: "ml", Name: "never"}}
	cases := map[string]struct {
		after *usage.Report
		want  ChangeMeasured
	}{
		"one expected pod placed": {
			after: report(start.Add(11*time.Hour), 30, pod("ml", "a", "gpu-1", 5), pod("ml", "b", "gpu-2", 7), pod("ml", "other", "gpu-1", 20)),
			want: ChangeMeasured{Node: "gpu-1", ExpectedFits: fits, Hours: 10, FitsPlaced: []string{"ml/a"}, FitsGPUHours: 5,
				AllocatedBeforeGPUHours: 8, AllocatedAfterGPUHours: 30},
		},
		"none placed, the node emptier": {
			after: report(start.Add(11*time.Hour), 2, pod("ml", "other", "gpu-1", 2)),
			want: ChangeMeasured{Node: "gpu-1", ExpectedFits: fits, Hours: 10, FitsPlaced: []string{},
				AllocatedBeforeGPUHours: 8, AllocatedAfterGPUHours: 2},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := changeFigures(ChangeMeasured{Node: "gpu-1", ExpectedFits: fits, FitsPlaced: []string{}}, report(start, 8), c.after)
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestMeasureChangeNoTime: a change that ended now has nothing measured
// yet, and says so instead of showing zeros as a measure.
func TestMeasureChangeNoTime(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	got := MeasureChange(context.Background(), Measurement{}, NodeResult{Node: "gpu-1", Started: now.Add(-time.Hour), Ended: now}, nil, now)
	if got.Error == "" || got.ExpectedFits == nil || got.FitsPlaced == nil {
		t.Errorf("measured a change with no time since it: %+v", got)
	}
}

// TestChangeControllerMeasures: the controller measures its applied
// results from the store (here the demo's scenario) since they ended,
// the pods the change was for included, and again only once MeasureEvery
// has passed.
func TestChangeControllerMeasures(t *testing.T) {
	week, err := demo.Measure()
	if err != nil {
		t.Fatal(err)
	}
	p := week.Week.Pods[0]
	end := demo.End()
	now := end
	m, set := migWorld()
	set.Nodes[0].Fits = []cluster.PodKey{{Namespace: p.Namespace, Name: p.Pod}}
	opts := testOptions(nil)
	opts.Now = func() time.Time { return now }
	c := &ChangeController{
		Build:     func(context.Context) (*change.Set, error) { return set, nil },
		Approvals: func(context.Context) (map[string]string, error) { return map[string]string{set.Hash: "bob"}, nil },
		Actuator:  m, Options: opts, Interval: time.Hour,
		Measurement: &Measurement{}, MeasureEvery: 5 * time.Minute,
	}
	c.Once(context.Background())
	st := c.Status()
	if len(st.Results) != 1 || st.Results[0].Outcome != OutcomeApplied {
		t.Fatalf("results %+v, want one applied", st.Results)
	}
	// The change is taken to have run on the pod's node, ending 6 hours
	// before the week's end.
	r := st.Results[0]
	r.Node, r.Started, r.Ended = p.Node, end.Add(-7*time.Hour), end.Add(-6*time.Hour)
	c.fits[r.Hash+"/"+r.Node] = set.Nodes[0].Fits
	c.update(func(s *ChangeStatus) { s.Results = []NodeResult{r}; s.Measured = nil })
	now = end.Add(time.Minute)
	c.measured = end // a minute ago: not yet
	c.Once(context.Background())
	if got := c.Status().Measured; len(got) != 0 {
		t.Fatalf("measured again within MeasureEvery: %+v", got)
	}
	now = end.Add(5 * time.Minute)
	c.measured = end
	c.Once(context.Background())
	got := c.Status().Measured
	if len(got) != 1 || got[0].Error != "" || got[0].Node != p.Node || got[0].AllocatedAfterGPUHours <= 0 || !slices.Contains(got[0].FitsPlaced, p.Key()) || got[0].FitsGPUHours <= 0 {
		t.Errorf("measured %+v; want %s's allocation since the change, %s among the pods placed", got, p.Node, p.Key())
	}
}
