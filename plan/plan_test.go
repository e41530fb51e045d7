package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

func node(name, model string, n int, sharing cluster.Sharing, labels map[string]string) *cluster.Node {
	m := gpu.Default().MustLookup(model)
	nd := &cluster.Node{Name: name, CPU: 96000, Memory: gpu.GiB(1024), Labels: labels}
	for i := range n {
		g := cluster.GPU{Index: i, Model: m, Memory: m.Usable, Sharing: sharing}
		if sharing == cluster.TimeSliced {
			g.Replicas = 4
		}
		if sharing == cluster.MIG {
			g.Layout, _ = m.MIG.Fit([]string{"3g.40gb", "3g.40gb"})
		}
		nd.GPUs = append(nd.GPUs, g)
	}
	return nd
}

func pod(ns, name, nodeName string, count int, labels map[string]string) *cluster.Pod {
	return &cluster.Pod{Namespace: ns, Name: name, CPU: 2000, NodeName: nodeName, Labels: labels,
		GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: count}}
}

func obs(active float64, pattern usage.PatternName, vram float64, idle float64) usage.PodFacts {
	return usage.PodFacts{Measured: true, ActiveRatio: active, Pattern: pattern, VRAMUsedP95: gpu.GiB(vram), IdleHeldRatio: idle, IdleHeldMeasured: true}
}

// TestDecisions checks the method chosen for each kind of workload.
func TestDecisions(t *testing.T) {
	nodes := []*cluster.Node{node("h1", "H100-80GB", 8, cluster.Exclusive, nil), node("h2", "H100-80GB", 8, cluster.Exclusive, nil),
		node("h3", "H100-80GB", 8, cluster.Exclusive, nil), node("h4", "H100-80GB", 8, cluster.Exclusive, nil), node("l1", "L4", 4, cluster.Exclusive, nil)}
	prod := map[string]string{"app": "ranker", "app.kubernetes.io/component": "inference", "environment": "production"}
	pods := []*cluster.Pod{
		pod("shop", "ranker-0", "h1", 1, prod),
		pod("ml", "notebook-a", "h1", 1, nil),
		pod("ml", "notebook-b", "h1", 1, nil),
		pod("ml", "feat-0", "h1", 1, map[string]string{"app": "feat"}),
		pod("ml", "feat-1", "h1", 1, map[string]string{"app": "feat"}),
		pod("ml", "train", "h2", 4, nil),
		pod("ml", "small-multi", "h2", 2, nil),
		pod("ml", "unmeasured", "h1", 1, nil),
		pod("ml", "vram-unknown", "h1", 1, nil),
		pod("ml", "big", "h1", 1, nil),
		{Namespace: "ml", Name: "huge", GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1, Memory: gpu.GiB(500)}},
		pod("web", "lone", "l1", 1, nil),
		pod("batch", "nightly-x", "h2", 1, map[string]string{"job-name": "nightly"}),
		pod("ml", "large", "h3", 1, nil),
	}
	pods[11].Isolation = cluster.ShareNone
	s, err := cluster.NewSnapshot(gpu.Default(), nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{
		"shop/ranker-0":   obs(0.1, usage.Bursty, 12, 0.1),
		"ml/notebook-a":   obs(0.01, usage.IdleHeld, 4, 0.95),
		"ml/notebook-b":   obs(0.05, usage.Bursty, 8, 0.5),
		"ml/feat-0":       obs(0.05, usage.FlatLow, 3, 0),
		"ml/feat-1":       obs(0.05, usage.FlatLow, 3, 0),
		"ml/train":        obs(0.9, usage.Busy, 200, 0),
		"ml/small-multi":  obs(0.1, usage.FlatLow, 10, 0),
		"ml/vram-unknown": {Measured: true, ActiveRatio: 0.2, Pattern: usage.Bursty},
		"ml/big":          obs(0.7, usage.Busy, 50, 0),
		"web/lone":        obs(0.2, usage.FlatLow, 5, 0),
		"batch/nightly-x": obs(0.9, usage.Busy, 70, 0),
		"ml/large":        obs(0.45, usage.Busy, 20, 0),
	}}
	p, err := Make(context.Background(), s, u, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Action Action
		Method Method
		Code   Code
		After  string
	}
	gotAll := map[string]got{}
	for _, d := range p.Decisions {
		gotAll[d.Workload] = got{d.Action, d.Method, d.Reason.Code, d.After.Resource}
	}
	want := map[string]got{
		"shop/ranker":     {Share, MIG, NeedsIsolation, "nvidia.com/mig-1g.20gb"},
		"ml/notebook-a":   {Reclaim, TimeSlicing, IdleHeld, "nvidia.com/gpu.shared"},
		"ml/notebook-b":   {Share, TimeSlicing, OneTrustBoundary, "nvidia.com/gpu.shared"},
		"ml/feat":         {Share, MPS, CooperatingReplicas, "nvidia.com/gpu.shared"},
		"ml/train":        {Keep, Whole, MultiGPU, "nvidia.com/gpu"},
		"ml/small-multi":  {Share, TimeSlicing, OneTrustBoundary, "nvidia.com/gpu.shared"},
		"ml/unmeasured":   {Keep, Whole, NoUsage, "nvidia.com/gpu"},
		"ml/vram-unknown": {Keep, Whole, VRAMUnknown, "nvidia.com/gpu"},
		// 7g.80gb is the whole H100: no share, so the GPU is kept.
		"ml/big": {Keep, Whole, TooBigToShare, "nvidia.com/gpu"},
		// Too much compute for time slices; 4g.40gb holds it.
		"ml/large":      {Share, MIG, LargeSlice, "nvidia.com/mig-4g.40gb"},
		"ml/huge":       {Unplaceable, Whole, ExceedsEveryDevice, ""},
		"web/lone":      {Keep, Whole, NoMIGHardware, "nvidia.com/gpu"},
		"batch/nightly": {Keep, Whole, TooBigToShare, "nvidia.com/gpu"},
	}
	if diff := cmp.Diff(want, gotAll); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"batch/nightly"}, p.Spot); diff != "" {
		t.Errorf("spot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ml/huge"}, p.Proof.Unplaceable); diff != "" {
		t.Errorf("unplaceable (-want +got):\n%s", diff)
	}
	if p.Proof.GPUsAfter >= p.Proof.GPUsBefore {
		t.Errorf("GPUs in use %d -> %d: the plan saves nothing", p.Proof.GPUsBefore, p.Proof.GPUsAfter)
	}
}

// TestConflictingNodeUnchanged: a node mixing MIG and time-slicing is
// named in a warning, gets no labels, and its pods stay where they are.
func TestConflictingNodeUnchanged(t *testing.T) {
	mixed := node("mixed", "A100-80GB", 2, cluster.MIG, nil)
	mixed.GPUs[1].Sharing, mixed.GPUs[1].Layout, mixed.GPUs[1].Replicas = cluster.TimeSliced, nil, 4
	labelled := node("labelled", "H100-80GB", 2, cluster.Exclusive, map[string]string{MIGConfigLabel: "all-1g.10gb"})
	// One GPU offered through DRA, one by the device plugin.
	halfDRA := node("half-dra", "H100-80GB", 2, cluster.Exclusive, nil)
	halfDRA.GPUs[0].DRA = &cluster.DRADevice{Driver: "gpu.nvidia.com", Pool: "half-dra", Device: "gpu-0"}
	p0 := pod("ml", "a", "mixed", 1, nil)
	p0.GPU = cluster.Request{Kind: cluster.MIGSlice, Profile: "3g.40gb"}
	s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{mixed, labelled, halfDRA}, []*cluster.Pod{p0, pod("ml", "b", "labelled", 1, nil), pod("ml", "c", "half-dra", 1, nil)})
	if err != nil {
		t.Fatal(err)
	}
	u := &usage.Facts{Window: 24 * time.Hour, Pods: map[string]usage.PodFacts{"ml/a": obs(0.01, usage.IdleHeld, 1, 0.99), "ml/b": obs(0.01, usage.IdleHeld, 1, 0.99), "ml/c": obs(0.01, usage.IdleHeld, 1, 0.99)}}
	p, err := Make(context.Background(), s, u, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 3 || !strings.Contains(p.Warnings[0], "node mixed: its GPUs mix sharing strategies (mig and time-slicing)") ||
		!strings.Contains(p.Warnings[1], "node labelled: label nvidia.com/mig.config=all-1g.10gb asks for MIG") ||
		!strings.Contains(p.Warnings[2], "node half-dra: some of its GPUs are offered through DRA and some by the device plugin") {
		t.Errorf("warnings = %q", p.Warnings)
	}
	if len(p.Nodes) != 0 {
		t.Errorf("conflicting nodes got changes: %+v", p.Nodes)
	}
	for _, d := range p.Decisions {
		if d.Action != Keep || d.Reason.Code != NodeConflict {
			t.Errorf("%s: %s %s, want keep for NodeConflict", d.Workload, d.Action, d.Reason.Code)
		}
	}
	if p.Proof.GPUsBefore != p.Proof.GPUsAfter {
		t.Errorf("GPUs in use changed on unchanged nodes: %d -> %d", p.Proof.GPUsBefore, p.Proof.GPUsAfter)
	}
}

// TestOvercommitRefused: five 4-GPU pods bound to one 8-GPU node are no
// cluster to plan; Make names the node, what is bound and what it has.
func TestOvercommitRefused(t *testing.T) {
	var pods []*cluster.Pod
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		pods = append(pods, pod("ml", name, "n1", 4, nil))
	}
	s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{node("n1", "H100-80GB", 8, cluster.Exclusive, nil)}, pods)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Make(context.Background(), s, nil, DefaultOptions())
	for _, want := range []string{"node n1 is over-committed", "20 GPU in all", "ml/e (4 GPU)", "8 x H100-80GB (exclusive)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Make: err = %v, want one containing %q", err, want)
		}
	}
}

// TestSizingWithinHardware: headroom over measured use never sizes a pod
// above the GPUs it holds; the reason says where the cap cut it, and a
// pod that needs all of its GPU is not moved to a slice of it.
func TestSizingWithinHardware(t *testing.T) {
	nodes := []*cluster.Node{node("h1", "H100-80GB", 8, cluster.Exclusive, nil), node("h2", "H100-80GB", 8, cluster.Exclusive, nil)}
	pods := []*cluster.Pod{pod("ml", "pretrain", "h1", 8, nil), pod("ml", "full", "h2", 1, nil)}
	s, err := cluster.NewSnapshot(gpu.Default(), nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{
		"ml/pretrain": obs(0.91, usage.Busy, 600, 0),
		"ml/full":     obs(0.5, usage.Bursty, 75, 0),
	}}
	p, err := Make(context.Background(), s, u, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Action      Action
		Method      Method
		VRAMNeed    gpu.MiB
		ComputeNeed float64
	}
	h100 := gpu.Default().MustLookup("H100-80GB")
	want := map[string]got{
		"ml/pretrain": {Keep, Whole, 8 * h100.Usable, 8},
		"ml/full":     {Keep, Whole, h100.Usable, 0.6},
	}
	notes := map[string][]string{
		"ml/pretrain": {"VRAM p95 600GiB plus 20% headroom is 720GiB, capped at the 637.2GiB of 8 x H100-80GB", "activity 0.91 plus 20% headroom is 8.74 GPU, capped at its 8 GPUs"},
		"ml/full":     {"VRAM p95 75GiB plus 20% headroom is 90GiB, capped at the 79.6GiB of 1 x H100-80GB"},
	}
	for _, d := range p.Decisions {
		if diff := cmp.Diff(want[d.Workload], got{d.Action, d.Method, d.VRAMNeed, math.Round(d.ComputeNeed*100) / 100}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", d.Workload, diff)
		}
		for _, n := range notes[d.Workload] {
			if !strings.Contains(d.Reason.Detail, n) {
				t.Errorf("%s: reason %q lacks %q", d.Workload, d.Reason.Detail, n)
			}
		}
	}
	// A measurement beyond what the pod holds is refused.
	u.Pods["ml/full"] = obs(0.5, usage.Bursty, 90, 0)
	if _, err := Make(context.Background(), s, u, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "usage of pod ml/full: VRAM p95 90GiB is more than the 79.6GiB that its 1 x H100-80GB on node h2 has") {
		t.Errorf("Make with 90GiB used on an 80GiB GPU: err = %v", err)
	}
}

// TestSharingConfigsCoverWholeNodes: the device plugin shares every GPU
// of a node it configures, so the plan counts (and its config states)
// every GPU of the time-sliced node, not only the one its work needs.
func TestSharingConfigsCoverWholeNodes(t *testing.T) {
	nodes := []*cluster.Node{node("h1", "H100-80GB", 8, cluster.Exclusive, nil), node("h2", "H100-80GB", 8, cluster.Exclusive, nil)}
	pods := []*cluster.Pod{pod("ml", "nb-a", "h1", 1, nil), pod("ml", "nb-b", "h1", 1, nil), pod("ml", "train", "h2", 8, nil)}
	s, err := cluster.NewSnapshot(gpu.Default(), nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{
		"ml/nb-a": obs(0.05, usage.Bursty, 8, 0.3), "ml/nb-b": obs(0.05, usage.Bursty, 8, 0.3), "ml/train": obs(0.9, usage.Busy, 500, 0)}}
	p, err := Make(context.Background(), s, u, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	pp := p.Pools[0]
	type counts struct{ Nodes, GPUs, Needed int }
	if diff := cmp.Diff(counts{1, 8, 1}, counts{pp.TimeSlicingNodes, pp.TimeSlicingGPUs, pp.TimeSlicingGPUsNeeded}); diff != "" {
		t.Errorf("time-slicing (-want +got):\n%s", diff)
	}
	sliced := 0
	for _, nc := range p.Nodes {
		if c := p.DevicePlugin[nc.Labels[DevicePluginConfigLabel]]; c.Sharing != nil && c.Sharing.TimeSlicing != nil {
			n, _ := s.Node(nc.Node)
			sliced += len(n.GPUs)
			for _, r := range c.Sharing.TimeSlicing.Resources {
				if r.Devices != "all" {
					t.Errorf("config %s: devices %q, want all (the plugin honours no other)", nc.Labels[DevicePluginConfigLabel], r.Devices)
				}
			}
		}
	}
	if sliced != pp.TimeSlicingGPUs {
		t.Errorf("nodes labelled for time-slicing have %d GPUs; the pool plan says %d", sliced, pp.TimeSlicingGPUs)
	}
	cm, err := p.DevicePluginConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cm), "devices: all") {
		t.Errorf("ConfigMap does not state devices: all:\n%s", cm)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{ReclaimIdleRatio: 0, Headroom: 0.2}, {ReclaimIdleRatio: 1.5, Headroom: 0.2}, {ReclaimIdleRatio: 0.8, Headroom: -1},
		{ReclaimIdleRatio: 0.8, Headroom: 0.2, ReserveDiscount: 1}, {ReclaimIdleRatio: 0.8, Headroom: 0.2, SpotDiscount: -0.1},
		{ReclaimIdleRatio: 0.8, Headroom: 0.2, ReserveDiscount: math.NaN()}, {ReclaimIdleRatio: 0.8, Headroom: 0.2, SpotDiscount: 60}} {
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("the default options: %v", err)
	}
}

// benchPlanCluster is nodes x 8 GPUs in four pools (H100, A100-80GB, L4,
// L40S) and one workload per GPU of the first pods, of every kind.
func benchPlanCluster(b *testing.B, nodes, workloads int) (*cluster.Snapshot, *usage.Facts) {
	models := []string{"H100-80GB", "A100-80GB", "L4", "L40S"}
	var ns []*cluster.Node
	for i := range nodes {
		m := models[i%len(models)]
		ns = append(ns, node(fmt.Sprintf("n-%d", i), m, 8, cluster.Exclusive, map[string]string{"gpupack.io/pool": strings.ToLower(m)}))
	}
	u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{}}
	var pods []*cluster.Pod
	kinds := []struct {
		labels map[string]string
		o      usage.PodFacts
	}{
		{map[string]string{"app.kubernetes.io/component": "inference", "environment": "production"}, obs(0.1, usage.Bursty, 12, 0.1)},
		{nil, obs(0.01, usage.IdleHeld, 4, 0.95)},
		{nil, obs(0.05, usage.Bursty, 8, 0.5)},
		{nil, obs(0.05, usage.FlatLow, 3, 0)},
		{nil, obs(0.9, usage.Busy, 70, 0)},
	}
	for w := range workloads {
		k := kinds[w%len(kinds)]
		labels := map[string]string{"app": fmt.Sprintf("w%d", w)}
		for key, v := range k.labels {
			labels[key] = v
		}
		n := w % nodes
		replicas := 1
		if w%len(kinds) == 3 {
			replicas = 2
		}
		for r := range replicas {
			p := pod(fmt.Sprintf("team-%d", w%40), fmt.Sprintf("w%d-%d", w, r), fmt.Sprintf("n-%d", n), 1, labels)
			p.Devices = []cluster.Device{{GPU: (w/nodes + r) % 8, Slice: -1}}
			pods = append(pods, p)
			u.Pods[p.Key()] = k.o
		}
	}
	s, err := cluster.NewSnapshot(gpu.Default(), ns, pods)
	if err != nil {
		b.Fatal(err)
	}
	return s, u
}

// BenchmarkPlan2000x8 plans 2,000 nodes x 8 GPUs with 10,000 workloads.
func BenchmarkPlan2000x8(b *testing.B) {
	s, u := benchPlanCluster(b, 2000, 10000)
	b.ReportAllocs()
	for b.Loop() {
		p, err := Make(context.Background(), s, u, DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Decisions) != 10000 {
			b.Fatalf("%d decisions", len(p.Decisions))
		}
	}
}

// TestMakeStopsOnCancel: a cancelled context (a signal) stops the proof's
// replay with the context's error instead of a plan.
func TestMakeStopsOnCancel(t *testing.T) {
	s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{node("h", "H100-80GB", 8, cluster.Exclusive, nil)}, []*cluster.Pod{pod("ml", "a", "h", 1, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u := &usage.Facts{Window: 24 * time.Hour, Pods: map[string]usage.PodFacts{"ml/a": obs(0.01, usage.IdleHeld, 1, 0.99)}}
	if _, err := Make(ctx, s, u, DefaultOptions()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
