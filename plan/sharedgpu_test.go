package plan

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// sharedSnapshot is one node of one time-sliced GPU of model that the two
// pods of workload app hold at once.
func sharedSnapshot(t *testing.T, model string) *cluster.Snapshot {
	t.Helper()
	file := "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes:\n" +
		"- {name: ts, cpu: \"32\", memory: 256Gi, gpus: [{model: " + model + ", count: 1, sharing: time-slicing, replicas: 4}]}\n" +
		"pods:\n" +
		"- {namespace: web, name: app-1, cpu: \"2\", gpu: {count: 1}, node: ts, devices: [{gpu: 0}], labels: {app: app}}\n" +
		"- {namespace: web, name: app-2, cpu: \"2\", gpu: {count: 1}, node: ts, devices: [{gpu: 0}], labels: {app: app}}\n"
	s, err := cluster.ParseFile([]byte(file), "s.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sharedFacts gives both pods of sharedSnapshot what DCGM reports for
// their one GPU: its framebuffer (vram) and activity, and each other as
// the pod they shared it with.
func sharedFacts(vram gpu.MiB, active float64) *usage.Facts {
	f := func(other string) usage.PodFacts {
		return usage.PodFacts{Measured: true, ActiveRatio: active, Pattern: usage.Bursty, VRAMUsedP95: vram, VRAMMeasured: true,
			IdleHeldRatio: 0.1, IdleHeldMeasured: true, SharedWith: []string{other}}
	}
	return &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{"web/app-1": f("web/app-2"), "web/app-2": f("web/app-1")}}
}

// TestSharedGPUSplitAmongItsPods: two pods that share one time-sliced L40S
// each report the GPU's whole framebuffer (37000 MiB of 45 GiB); sized on
// their equal shares they keep sharing one GPU, and the pool asks for no
// whole GPU.
func TestSharedGPUSplitAmongItsPods(t *testing.T) {
	pl, err := Make(context.Background(), sharedSnapshot(t, "L40S"), sharedFacts(37000, 0.3), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	d := pl.Decisions[0]
	type got struct {
		Action   Action
		Method   Method
		VRAMNeed gpu.MiB
		Compute  float64
		Resource string
	}
	// 37000 / 2 pods x 1.2 headroom; 0.3 / 2 x 1.2.
	want := got{Share, TimeSlicing, 22200, 0.18, "nvidia.com/gpu.shared"}
	if diff := cmp.Diff(want, got{d.Action, d.Method, d.VRAMNeed, round2(d.ComputeNeed), d.After.Resource}); diff != "" {
		t.Errorf("decision of %s (-want +got):\n%s\n%s", d.Workload, diff, d.Reason.Detail)
	}
	if !strings.Contains(d.Reason.Detail, "a GPU that 2 pods held at once") {
		t.Errorf("reason %q does not say its figures were split among the 2 pods of its GPU", d.Reason.Detail)
	}
	pp := pl.Pools[0]
	if pp.WholeGPUs != 0 || pp.TimeSlicingGPUsNeeded != 1 {
		t.Errorf("pool %s: %d whole and %d time-sliced GPUs needed, want 0 and 1", pp.Name, pp.WholeGPUs, pp.TimeSlicingGPUsNeeded)
	}
}

// TestSharedGPUKeptWholeIsUnshare: pods that share a time-sliced L4 and
// are too big to share after the split (20 GiB of 22.5 GiB between two)
// keep their request but leave the shared GPU: the action says so, not
// keep, and the pool, with one GPU for two whole ones, warns.
func TestSharedGPUKeptWholeIsUnshare(t *testing.T) {
	pl, err := Make(context.Background(), sharedSnapshot(t, "L4"), sharedFacts(gpu.GiB(20), 0.3), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	d := pl.Decisions[0]
	if d.Action != Unshare || d.Method != Whole || d.Reason.Code != TooBigToShare {
		t.Errorf("decision of %s: %s %s %s (%s), want unshare whole TooBigToShare", d.Workload, d.Action, d.Method, d.Reason.Code, d.Reason.Detail)
	}
	var warned []string
	for _, w := range pl.Warnings {
		if strings.Contains(w, "whole GPUs") {
			warned = append(warned, w)
		}
	}
	want := []string{"pool l4: its kept workloads ask for 2 whole GPUs, and after the plan it offers 1 whole of its 1 GPU; the proof shows what stays pending"}
	if diff := cmp.Diff(want, warned); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestUnsharedGPUKeptIsKeep: the same pods on GPUs of their own are kept,
// and one whole GPU each is what their pool offers: no warning.
func TestUnsharedGPUKeptIsKeep(t *testing.T) {
	nodes := []*cluster.Node{node("l", "L4", 2, cluster.Exclusive, nil)}
	pods := []*cluster.Pod{pod("web", "app-1", "l", 1, map[string]string{"app": "app"}), pod("web", "app-2", "l", 1, map[string]string{"app": "app"})}
	s, err := cluster.NewSnapshot(gpu.Default(), nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	u := sharedFacts(gpu.GiB(20), 0.3)
	for k, f := range u.Pods {
		f.SharedWith = nil
		u.Pods[k] = f
	}
	pl, err := Make(context.Background(), s, u, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if d := pl.Decisions[0]; d.Action != Keep || d.Reason.Code != TooBigToShare {
		t.Errorf("decision of %s: %s %s, want keep TooBigToShare", d.Workload, d.Action, d.Reason.Code)
	}
	for _, w := range pl.Warnings {
		if strings.Contains(w, "whole GPUs") {
			t.Errorf("warning %q for a pool that offers the whole GPUs asked for", w)
		}
	}
}

// TestSharedGPUSizedOnOwnFigures: the same two pods measured by gpupack
// agent: one holds 30000 MiB and 40% of the GPU, the other 5000 MiB and
// 5%. Sized on their own figures (the larger pod's), not on halves of the
// GPU's, and the reason says so.
func TestSharedGPUSizedOnOwnFigures(t *testing.T) {
	u := sharedFacts(37000, 0.3)
	own := map[string]struct {
		vram   gpu.MiB
		active float64
	}{"web/app-1": {30000, 0.4}, "web/app-2": {5000, 0.05}}
	for k, f := range u.Pods {
		f.VRAMUsedP95, f.ActiveRatio, f.PerProcess = own[k].vram, own[k].active, true
		u.Pods[k] = f
	}
	pl, err := Make(context.Background(), sharedSnapshot(t, "L40S"), u, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	d := pl.Decisions[0]
	// 30000 x 1.2 headroom; the mean of 0.4 and 0.05, x 1.2.
	if d.VRAMNeed != 36000 || round2(d.ComputeNeed) != 0.27 {
		t.Errorf("decision of %s: VRAM need %v, compute %v; want 36000 MiB and 0.27 (%s)", d.Workload, d.VRAMNeed, d.ComputeNeed, d.Reason.Detail)
	}
	if !strings.Contains(d.Reason.Detail, "its own VRAM and activity") {
		t.Errorf("reason %q does not say the pods were sized on their own figures", d.Reason.Detail)
	}
}
