package kube_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

const pcieRoot = "resource.kubernetes.io/pcieRoot"

// draH100s are four H100s whose PCIe roots alternate: gpu-0 and gpu-2
// under pci0000:00, gpu-1 and gpu-3 under pci0000:80, so that the first
// two free GPUs never share a root.
func draH100s() []testcluster.DRAGPU {
	var out []testcluster.DRAGPU
	for i, root := range []string{"pci0000:00", "pci0000:80", "pci0000:00", "pci0000:80"} {
		g := draH100(i)
		g.PCIeRoot = root
		out = append(out, g)
	}
	return out
}

// rootClaim is a claim in ml for count GPUs that must share a PCIe root
// (matchAttribute; distinctAttribute when distinct is set).
func rootClaim(name string, count int64, distinct bool) *resourcev1.ResourceClaim {
	c := draClaim(name, testcluster.DeviceClassGPU, count, "")
	k := resourcev1.DeviceConstraint{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(pcieRoot))}
	if distinct {
		k = resourcev1.DeviceConstraint{Requests: []string{"gpu"}, DistinctAttribute: ptr.To(resourcev1.FullyQualifiedName(pcieRoot))}
	}
	c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{k}
	return c
}

// TestBuildDRAConstraints: a claim's constraints are read with the
// attribute's typed value on each device its request accepts; placement
// takes two GPUs of one root (not the first two free) and refuses three
// by the constraint, naming it.
func TestBuildDRAConstraints(t *testing.T) {
	pair, three, distinct := rootClaim("pair", 2, false), rootClaim("three", 3, false), rootClaim("apart", 2, true)
	pods := []*corev1.Pod{draPod("pair", "", *pair), draPod("three", "", *three), draPod("apart", "", *distinct)}
	objs := &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", draH100s()...)},
		Claims: []*resourcev1.ResourceClaim{pair, three, distinct}}
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, pods, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*cluster.Pod{}
	for _, p := range st.Snapshot.Pods {
		byName[p.Name] = p
	}
	id := func(i int) string { return cluster.DeviceID(kube.DriverNVIDIAGPU, "dra-1", "gpu-"+string(rune('0'+i))) }
	want := []cluster.ClaimConstraint{{MatchAttribute: pcieRoot, Evaluated: true, Values: map[string]string{
		id(0): "string:pci0000:00", id(1): "string:pci0000:80", id(2): "string:pci0000:00", id(3): "string:pci0000:80"}}}
	if diff := cmp.Diff(want, byName["pair"].Claims[0].Constraints); diff != "" {
		t.Errorf("pair's constraints (-want +got):\n%s", diff)
	}
	states, _, err := placement.States(st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	fit := func(name string) (placement.Assignment, []placement.Reason) {
		d, err := placement.NewDemand(byName[name], gpu.Default())
		if err != nil {
			t.Fatal(err)
		}
		return placement.Fit(d, states[0])
	}
	gpus := func(a placement.Assignment) []int {
		var out []int
		for _, s := range a.Devices {
			out = append(out, s.GPU)
		}
		return out
	}
	if a, rs := fit("pair"); len(rs) > 0 || !cmp.Equal(gpus(a), []int{0, 2}) {
		t.Errorf("pair: GPUs %v, reasons %v; want GPUs 0 and 2 (root pci0000:00)", gpus(a), rs)
	}
	if a, rs := fit("apart"); len(rs) > 0 || !cmp.Equal(gpus(a), []int{0, 1}) {
		t.Errorf("apart: GPUs %v, reasons %v; want GPUs 0 and 1 (one per root)", gpus(a), rs)
	}
	_, rs := fit("three")
	if len(rs) != 1 || rs[0].Code != placement.ClaimConstraintUnsatisfied || rs[0].Constraint.Best != 2 || rs[0].Constraint.Needed != 3 {
		js, _ := json.Marshal(rs)
		t.Errorf("three: %s; want %s, 2 of the 3 on one root", js, placement.ClaimConstraintUnsatisfied)
	}
}

// TestLiveDRAConstraints: on the real control plane, a claim of three
// GPUs that must share a PCIe root (each root has two) stays pending with
// the scheduler's "cannot allocate all claims", and gpupack names the
// constraint, the attribute and the nearest change; a claim of two is
// allocated by the scheduler to the two GPUs gpupack predicts, whose roots
// are not the first two GPUs'.
func TestLiveDRAConstraints(t *testing.T) {
	c := startDRA(t)
	ctx := t.Context()
	client := c.Client()
	c.AddDRANode("dra-1", draH100s()...)
	const ns = "ml"
	c.CreateNamespace(ns)
	create := func(claim *resourcev1.ResourceClaim) {
		t.Helper()
		claim.Namespace = ns
		if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createClaimPod(t, client, ns, claim.Name, claim.Name)
	}

	create(rootClaim("three", 3, false))
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		if !unschedulable(ps["three"]) {
			return "three is not marked unschedulable"
		}
		return ""
	})
	loaded, err := kube.Load(ctx, client, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := diagnose.Diagnose(loaded.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := loaded.SchedulingFailures[ns+"/three"].Message
	if !strings.Contains(msg, "cannot allocate all claims") {
		t.Fatalf("the scheduler's message %q is not the DRA filter's", msg)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Pod != ns+"/three" {
			continue
		}
		found = true
		t.Logf("kube-scheduler: %s; gpupack (%s): %s", msg, f.Cause, strings.Join(f.Fix, " | "))
		if f.Summary != msg {
			t.Errorf("lines differ:\n  kube-scheduler: %s\n  gpupack:        %s (%s)", msg, f.Summary, f.StockNote)
		}
		if f.Cause != diagnose.Placement || len(f.Fix) == 0 || !strings.Contains(f.Fix[0], "constraint matchAttribute "+pcieRoot) || !strings.Contains(f.Fix[0], "at most 2") {
			t.Errorf("three: cause %s, fix %q; want placement naming the matchAttribute constraint and the 2 GPUs that share a root", f.Cause, f.Fix)
		}
	}
	if !found {
		t.Fatalf("no finding for three; warnings %q", loaded.Warnings)
	}

	create(rootClaim("pair", 2, false))
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		if p := ps["pair"]; p == nil || p.Spec.NodeName == "" {
			return "pair is not bound"
		}
		return ""
	})
	claim, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "pair", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var allocated []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		allocated = append(allocated, r.Device)
	}
	// gpupack's prediction: the pair pod, pending, on the node before it.
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, []*corev1.Pod{draPod("pair", "", *rootClaim("pair", 2, false))},
		nil, &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", draH100s()...)}, Claims: []*resourcev1.ResourceClaim{rootClaim("pair", 2, false)}})
	if err != nil {
		t.Fatal(err)
	}
	states, _, err := placement.States(st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	d, err := placement.NewDemand(st.Snapshot.Pods[0], gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	a, rs := placement.Fit(d, states[0])
	var predicted []string
	for _, s := range a.Devices {
		predicted = append(predicted, st.Snapshot.Nodes[0].GPUs[s.GPU].DRA.Device)
	}
	if len(rs) > 0 || !cmp.Equal(predicted, allocated) {
		t.Errorf("the scheduler allocated %v, gpupack predicts %v (reasons %v)", allocated, predicted, rs)
	}
	t.Logf("the scheduler allocated %v to pair; gpupack predicted %v", allocated, predicted)
}
