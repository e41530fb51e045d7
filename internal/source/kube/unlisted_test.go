package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// TestUnlistedGPUsDiagnosedAndPlanned: on a cluster of GPUs gpupack's
// catalogue does not list, known only by their nodes' labels, a pending
// pod is diagnosed and a plan is made, and both name what is unknown.
func TestUnlistedGPUsDiagnosedAndPlanned(t *testing.T) {
	c, err := gpu.ParseCatalogue([]byte("currency: EUR\nmodels: [{name: T4, usableMiB: 15360, pricePerHour: 0.35}]"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const product = "NVIDIA-B300-SXM6-AC"
	nodes := []*corev1.Node{
		makeNode("b300-1").gfd(product, "275040", "4").alloc(ResourceGPU, "4").obj(),
		makeNode("b300-2").gfd(product, "275040", "4").alloc(ResourceGPU, "4").obj(),
		makeNode("b300-3").gfd(product, "275040", "4").alloc(ResourceGPU, "4").obj(),
	}
	var pods []*corev1.Pod
	for i := range 12 {
		p := makePod(fmt.Sprintf("chat-%d", i)).req(ResourceGPU, "1").node(fmt.Sprintf("b300-%d", 1+i/4)).obj()
		p.Labels = map[string]string{"app": "chat"}
		pods = append(pods, p)
	}
	pending := makePod("new").req(ResourceGPU, "1").obj()
	pending.Spec.NodeSelector = map[string]string{LabelGPUProduct: product}
	pods = append(pods, pending)

	st, err := Build(c, nodes, pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Snapshot
	want := []cluster.UnknownModel{{Model: product, GPUs: 12, Unknown: []string{"price", "MIG geometry"}}}

	rep, err := diagnose.Diagnose(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Pod != "ml/new" || rep.Findings[0].Cause != diagnose.Allocation {
		t.Fatalf("findings = %+v, want ml/new waiting for allocation", rep.Findings)
	}
	if got := rep.Findings[0].Evidence.GPUModels; !cmp.Equal(got, []string{product}) {
		t.Errorf("evidence GPU models = %v, want [%s]", got, product)
	}
	if diff := cmp.Diff(want, rep.UnknownModels); diff != "" {
		t.Errorf("diagnosis: unknown models (-want +got):\n%s", diff)
	}

	u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{}}
	for _, p := range pods[:12] {
		u.Pods["ml/"+p.Name] = usage.PodFacts{Measured: true, ActiveRatio: 0.02, Pattern: usage.IdleHeld,
			VRAMUsedP95: gpu.GiB(10), IdleHeldRatio: 0.95, IdleHeldMeasured: true}
	}
	pl, err := plan.Make(context.Background(), s, u, plan.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, pl.UnknownModels); diff != "" {
		t.Errorf("plan: unknown models (-want +got):\n%s", diff)
	}
	for _, d := range pl.Decisions {
		if d.Method == plan.MIG {
			t.Errorf("%s: planned MIG on a GPU whose MIG geometry is unknown", d.Workload)
		}
	}
	if len(pl.Proof.NodesFreed) == 0 {
		t.Fatalf("the plan freed no node (proof %+v, decisions %+v); the test's premise changed", pl.Proof, pl.Decisions)
	}
	for _, w := range []string{
		"GPU model " + product + " is not in gpupack's catalogue, so the plan shares its GPUs by time-slicing or MPS only",
		fmt.Sprintf("the monthly saving leaves out the %d freed GPUs of %s, whose price is unknown", 4*len(pl.Proof.NodesFreed), product),
	} {
		if !strings.Contains(strings.Join(pl.Warnings, "\n"), w) {
			t.Errorf("plan warnings %q\nwant one containing %q", pl.Warnings, w)
		}
	}
}
