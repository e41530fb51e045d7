package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

const (
	h100Product = "NVIDIA-H100-80GB-HBM3"
	l4Product   = "NVIDIA-L4-SHARED"
	poolLabel   = wellknown.LabelPool
)

// gpuFleet adds the test's GPU nodes: two free-for-all 8 x H100 nodes, an
// 8 x H100 node reserved by a taint, an A100 node in MIG mode (mixed
// strategy) and an L4 node with four time-slicing replicas.
func gpuFleet(c *testcluster.Cluster) {
	h100 := testcluster.GPUNode{Product: h100Product, MemoryMiB: 81559, GPUs: 8}
	c.AddGPUNode("h100-0", h100)
	c.AddGPUNode("h100-1", h100)
	reserved := h100
	reserved.Labels = map[string]string{poolLabel: "reserved"}
	reserved.Taints = []corev1.Taint{{Key: "gpu", Value: "reserved", Effect: corev1.TaintEffectNoSchedule}}
	c.AddGPUNode("h100-reserved", reserved)
	c.AddGPUNode("a100-mig", testcluster.GPUNode{
		Product: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960, GPUs: 2,
		MIG: map[string]int64{"3g.20gb": 2, "2g.10gb": 2}, MIGConfig: "custom-3g-2g",
	})
	c.AddGPUNode("l4-0", testcluster.GPUNode{Product: l4Product, MemoryMiB: 23034, GPUs: 1, Sharing: testcluster.SharingTimeSlicing, Replicas: 4})
}

// TestLiveDiagnosisAgreesWithScheduler submits GPU pods of every cause the
// scheduler can express, lets the real kube-scheduler bind what fits, and
// checks that gpupack's live snapshot agrees with the apiserver on every
// allocation and that gpupack's cause for each pending pod is one that the
// scheduler's FailedScheduling message implies.
func TestLiveDiagnosisAgreesWithScheduler(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	gpuFleet(c)
	const ns = "ml"
	c.CreateNamespace(ns)
	gpuRes, mig3g, mig2g := testcluster.ResourceGPU, testcluster.ResourceMIG("3g.20gb"), testcluster.ResourceMIG("2g.10gb")

	// Pods that fit: they fill both free H100 nodes, both 3g.20gb slices
	// and all four L4 replicas, and take one 2g.10gb slice.
	fitting := []*corev1.Pod{
		makePod(ns, "train-a").gpus(gpuRes, 8).obj(),
		makePod(ns, "train-b").gpus(gpuRes, 8).obj(),
		makePod(ns, "mig-a").gpus(mig3g, 1).obj(),
		makePod(ns, "mig-b").gpus(mig3g, 1).obj(),
		makePod(ns, "mig-small").gpus(mig2g, 1).obj(),
	}
	for i := range 4 {
		fitting = append(fitting, makePod(ns, fmt.Sprintf("infer-%d", i)).gpus(gpuRes, 1).selector(testcluster.LabelGPUProduct, l4Product).obj())
	}
	// Pods that cannot fit, by the cause gpupack must find.
	pending := map[string]struct {
		pod  *corev1.Pod
		want diagnose.Cause
	}{
		"wants-h100":   {makePod(ns, "wants-h100").gpus(gpuRes, 1).selector(testcluster.LabelGPUProduct, h100Product).obj(), diagnose.Allocation},
		"wants-mig":    {makePod(ns, "wants-mig").gpus(mig3g, 1).obj(), diagnose.Allocation},
		"wants-l4":     {makePod(ns, "wants-l4").gpus(gpuRes, 1).selector(testcluster.LabelGPUProduct, l4Product).obj(), diagnose.Allocation},
		"wrong-pool":   {makePod(ns, "wrong-pool").gpus(gpuRes, 1).selector(poolLabel, "batch").obj(), diagnose.Placement},
		"untolerated":  {makePod(ns, "untolerated").gpus(gpuRes, 1).selector(poolLabel, "reserved").obj(), diagnose.Placement},
		"sixteen-gpus": {makePod(ns, "sixteen-gpus").gpus(gpuRes, 16).tolerate("gpu", "reserved").obj(), diagnose.NoSuchHardware},
		"wrong-model":  {makePod(ns, "wrong-model").gpus(gpuRes, 1).selector(testcluster.LabelGPUProduct, "NVIDIA-A100-SXM4-80GB").obj(), diagnose.Placement},
		// No layout has a 1g.5gb slice; the scheduler sees no such device,
		// gpupack sees that the A100s' layout is the cause: a re-layout
		// would offer one.
		"wants-1g": {makePod(ns, "wants-1g").gpus(testcluster.ResourceMIG("1g.5gb"), 1).tolerate("gpu", "reserved").obj(), diagnose.Placement},
	}
	pods := c.Client().CoreV1().Pods(ns)
	for _, p := range fitting {
		if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
	poll(t, "the fitting pods to run", func(ctx context.Context) (bool, string, error) {
		var waiting []string
		for _, p := range fitting {
			got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if got.Spec.NodeName == "" || got.Status.Phase != corev1.PodRunning {
				waiting = append(waiting, p.Name)
			}
		}
		return len(waiting) == 0, fmt.Sprintf("not running: %v", waiting), nil
	})
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		if _, err := pods.Create(t.Context(), pending[name].pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	// Wait for the scheduler's verdict on every pending pod: its
	// condition, and its FailedScheduling event, which Load reads.
	poll(t, "FailedScheduling events for every pending pod", func(ctx context.Context) (bool, string, error) {
		events, err := c.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + kube.ReasonFailedScheduling})
		if err != nil {
			return false, "", err
		}
		seen := map[string]bool{}
		for _, e := range events.Items {
			seen[e.InvolvedObject.Name] = true
		}
		var missing []string
		for name := range pending {
			if !seen[name] {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no event yet for %v", missing), nil
	})

	st, err := kube.Load(t.Context(), c.Client(), gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Warnings) > 0 {
		t.Errorf("loader warnings: %q", st.Warnings)
	}
	checkAllocations(t, c, st.Snapshot)

	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]diagnose.Cause{}
	for _, f := range rep.Findings {
		got[strings.TrimPrefix(f.Pod, ns+"/")] = f.Cause
		failure, ok := st.SchedulingFailures[f.Pod]
		if !ok {
			t.Errorf("%s: no FailedScheduling message in the live state", f.Pod)
			continue
		}
		implies := diagnose.ImpliedCauses(f, failure.Message)
		if !slices.Contains(implies, f.Cause) {
			t.Errorf("%s: gpupack finds %s, but the scheduler's message %q implies %v", f.Pod, f.Cause, failure.Message, implies)
		}
		t.Logf("%s: gpupack %s; kube-scheduler: %s", f.Pod, f.Cause, failure.Message)
	}
	want := map[string]diagnose.Cause{}
	for name, p := range pending {
		want[name] = p.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causes of the pending pods (-want +got):\n%s", diff)
	}

	// The CLI says the same, in words.
	var out bytes.Buffer
	root := newRoot(t, &out, "diagnose", "--kubeconfig", c.Kubeconfig())
	if err := root.Execute(); err != nil {
		t.Fatalf("gpupack diagnose --kubeconfig: %v\n%s", err, out.String())
	}
	if n, want := strings.Count(out.String(), "agreement: yes"), len(pending); n != want {
		t.Errorf("gpupack diagnose --kubeconfig: %d pods with \"agreement: yes\", want %d:\n%s", n, want, out.String())
	}
}

// checkAllocations checks, node by node and resource by resource, that the
// snapshot offers the devices the node advertises as allocatable and that
// gpupack's placement of the bound pods holds as many as the apiserver's
// pods request.
func checkAllocations(t *testing.T, c *testcluster.Cluster, s *cluster.Snapshot) {
	t.Helper()
	nodes, err := c.Client().CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Client().CoreV1().Pods(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type count struct{ Allocatable, Used int64 }
	want := map[string]map[string]count{} // node -> resource -> count
	for _, n := range nodes.Items {
		want[n.Name] = map[string]count{}
		for name, q := range n.Status.Allocatable {
			if isGPUResource(name) && q.Value() > 0 {
				want[n.Name][string(name)] = count{Allocatable: q.Value()}
			}
		}
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			for name, q := range ctr.Resources.Limits {
				if isGPUResource(name) && q.Value() > 0 {
					cur := want[p.Spec.NodeName][string(name)]
					cur.Used += q.Value()
					want[p.Spec.NodeName][string(name)] = cur
				}
			}
		}
	}

	states, warnings, err := placement.States(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("gpupack cannot place the bound pods where they are: %q", warnings)
	}
	got := map[string]map[string]count{}
	for i, n := range s.Nodes {
		got[n.Name] = map[string]count{}
		add := func(resource string, allocatable, used int64) {
			cur := got[n.Name][resource]
			got[n.Name][resource] = count{cur.Allocatable + allocatable, cur.Used + used}
		}
		for j, g := range n.GPUs {
			gs := states[i].GPUs[j]
			switch g.Sharing {
			case cluster.TimeSliced, cluster.MPS:
				add(string(testcluster.ResourceGPU), int64(g.Replicas), int64(gs.UsedReplicas))
			case cluster.MIG:
				for k, sl := range g.Layout {
					add(string(testcluster.ResourceMIG(sl.Profile)), 1, int64(gs.UsedSlices>>k&1))
				}
			default:
				add(string(testcluster.ResourceGPU), 1, int64(min(gs.Holders, 1)))
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPU devices per node and resource, apiserver (-) vs gpupack's live snapshot (+):\n%s", diff)
	}
}

func isGPUResource(name corev1.ResourceName) bool {
	return name == testcluster.ResourceGPU || strings.HasPrefix(string(name), "nvidia.com/mig-")
}
