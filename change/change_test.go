package change_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/plan"
)

func demo(t *testing.T) (*cluster.Snapshot, *plan.Plan) {
	t.Helper()
	pl, s, err := app.DemoPlan(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return s, pl
}

func node(t *testing.T, set *change.Set, name string) change.Node {
	t.Helper()
	i := slices.IndexFunc(set.Nodes, func(n change.Node) bool { return n.Name == name })
	if i < 0 {
		t.Fatalf("node %s is not in the set", name)
	}
	return set.Nodes[i]
}

// TestHashBindsWhatChanges: the hash is the same for the same cluster and
// plan, ignores what is read again at each step (budgets), and changes
// when a GPU pod lands on a node the set changes.
func TestHashBindsWhatChanges(t *testing.T) {
	s, pl := demo(t)
	a, err := change.Build(s, pl, nil, change.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	key := cluster.PodKey{Namespace: "shop", Name: "ranker-0"}
	b, err := change.Build(s, pl, map[cluster.PodKey]change.Budget{key: {Namespace: "shop", Name: "ranker", DisruptionsAllowed: 0}}, change.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash || len(a.Hash) != 16 {
		t.Errorf("hash %q with no budgets, %q with one: a budget's count is read at each step, not bound", a.Hash, b.Hash)
	}
	if len(b.Warnings) != 1 || !strings.Contains(b.Warnings[0], "shop/ranker-0 (PodDisruptionBudget shop/ranker allows 0)") {
		t.Errorf("warnings %q", b.Warnings)
	}
	// A new pod on h100-1's GPU 3, which the MIG change touches.
	extra := &cluster.Pod{Namespace: "ml", Name: "late", GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}, NodeName: "h100-1",
		Devices: []cluster.Device{{GPU: 3, Slice: -1}}}
	s2, err := cluster.NewSnapshot(s.Catalogue, s.Nodes, append(slices.Clone(s.Pods), extra))
	if err != nil {
		t.Fatal(err)
	}
	c, err := change.Build(s2, pl, nil, change.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash == a.Hash {
		t.Errorf("a new GPU pod on a re-partitioned node left the hash at %s", a.Hash)
	}
	if !slices.ContainsFunc(node(t, c, "h100-1").Stop, func(s change.Stop) bool { return s.Pod == cluster.PodKey{Namespace: "ml", Name: "late"} }) {
		t.Errorf("the new pod is not among h100-1's stops")
	}
}

// TestBuildDemo checks the demo set's nodes against the plan: every
// changed label, the allocatable of the GPUs after, the stops by reason.
func TestBuildDemo(t *testing.T) {
	s, pl := demo(t)
	set, err := change.Build(s, pl, nil, change.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	h := node(t, set, "h100-1")
	if !h.Repartition || len(h.Stop) != 8 || h.Stop[0].Why != change.ForRepartition {
		t.Errorf("h100-1: repartition %v, %d stops", h.Repartition, len(h.Stop))
	}
	want := map[string]int64{"nvidia.com/gpu": 6, "nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-2g.20gb": 3}
	if d := cmp.Diff(want, h.Allocatable); d != "" {
		t.Errorf("h100-1 allocatable after (-want +got):\n%s", d)
	}
	if _, ok := set.MIGConfigs["h100-mig-1"]; !ok {
		t.Errorf("the set lacks the MIG config its label names: %v", set.MIGConfigs)
	}
	// l40s-ts-1 goes from 4 time slices to 2 MPS clients, offered as
	// nvidia.com/gpu.shared: both rerank pods hold the renamed resource,
	// so both are the excess, and both come back to the node's clients.
	l := node(t, set, "l40s-ts-1")
	var stops []string
	for _, st := range l.Stop {
		stops = append(stops, fmt.Sprintf("%s %s -> %s", st.Pod.Name, st.Why, st.Destination))
	}
	if d := cmp.Diff([]string{"rerank-1 excess -> l40s-ts-1", "rerank-2 excess -> l40s-ts-1"}, stops); d != "" {
		t.Errorf("l40s-ts-1 stops (-want +got):\n%s", d)
	}
	var hours float64
	for _, n := range set.Nodes {
		hours += n.GPUHoursLost
	}
	if hours != set.GPUHoursLost || hours <= 0 {
		t.Errorf("GPU-hours lost: nodes add up to %v, the set says %v", hours, set.GPUHoursLost)
	}
	one, err := set.Only([]string{"l40s-ts-1"})
	if err != nil || len(one.Nodes) != 1 || one.Hash == set.Hash || one.GPUHoursLost != l.GPUHoursLost || len(one.MIGConfigs) != 0 {
		t.Errorf("Only: %+v, %v", one, err)
	}
}

func TestOfferedExcessVerify(t *testing.T) {
	h100 := gpu.Default().MustLookup("H100-80GB")
	gpus := []cluster.GPU{
		{Model: h100, Sharing: cluster.Exclusive},
		{Model: h100, Sharing: cluster.TimeSliced, Replicas: 4, SharedResource: true},
		{Model: h100, Sharing: cluster.MPS, Replicas: 3},
		{Model: h100, Sharing: cluster.MIG, Layout: gpu.Layout{{Profile: "3g.40gb", Start: 0}, {Profile: "3g.40gb", Start: 4}}},
		{Model: h100, DRA: &cluster.DRADevice{Driver: "gpu.nvidia.com", Pool: "p", Device: "gpu-0"}},
	}
	offered := change.Offered(gpus)
	want := map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 4, "nvidia.com/mig-3g.40gb": 2}
	if d := cmp.Diff(want, offered); d != "" {
		t.Errorf("Offered (-want +got):\n%s", d)
	}
	pods := []*cluster.Pod{
		{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 3}},
		{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 2}},
		{GPU: cluster.Request{Kind: cluster.MIGSlice, Profile: "1g.10gb"}},
		{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1, SharedResource: true}},
	}
	if d := cmp.Diff(map[string]int64{"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 1}, change.Excess(offered, pods)); d != "" {
		t.Errorf("Excess (-want +got):\n%s", d)
	}
	cases := map[string]struct {
		got  map[string]int64
		want string
	}{
		"exact":             {map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 4, "nvidia.com/mig-3g.40gb": 2, "cpu": 96}, ""},
		"a zero leftover":   {map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 4, "nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 0}, ""},
		"short":             {map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 4, "nvidia.com/mig-3g.40gb": 1}, "nvidia.com/mig-3g.40gb 1, want 2"},
		"an extra resource": {map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 4, "nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7}, "nvidia.com/mig-1g.10gb 7, want none"},
		"nothing yet":       {map[string]int64{}, "nvidia.com/gpu 0, want 4"},
	}
	for name, tc := range cases {
		err := change.Verify(want, tc.got)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Verify: %v, want %q", name, err, tc.want)
		}
	}
}
