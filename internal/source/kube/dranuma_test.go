package kube_test

import (
	"encoding/json"
	"fmt"
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

const numaNode = "resource.kubernetes.io/numaNode"

// TestBuildDRANUMA: the standard numaNode attribute (an int) is read on
// NVIDIA's GPUs and typed as the allocator compares it; a claim of two
// GPUs on one NUMA node gets GPUs 0 and 2, one of three is refused by the
// constraint, with 2 of the 3 on one node.
func TestBuildDRANUMA(t *testing.T) {
	var gpus []testcluster.DRAGPU
	for i, n := range []int64{0, 1, 0, 1} {
		g := draH100(i)
		g.NUMANode = ptr.To(n)
		gpus = append(gpus, g)
	}
	claim := func(name string, count int64) *resourcev1.ResourceClaim {
		c := draClaim(name, testcluster.DeviceClassGPU, count, "")
		c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(numaNode))}}
		return c
	}
	pair, three := claim("pair", 2), claim("three", 3)
	objs := &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", gpus...)},
		Claims: []*resourcev1.ResourceClaim{pair, three}}
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, []*corev1.Pod{draPod("pair", "", *pair), draPod("three", "", *three)}, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) string { return cluster.DeviceID(kube.DriverNVIDIAGPU, "dra-1", "gpu-"+string(rune('0'+i))) }
	want := []cluster.ClaimConstraint{{MatchAttribute: numaNode, Evaluated: true, Values: map[string]string{id(0): "int:0", id(1): "int:1", id(2): "int:0", id(3): "int:1"}}}
	byName := map[string]*cluster.Pod{}
	for _, p := range st.Snapshot.Pods {
		byName[p.Name] = p
	}
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
	a, rs := fit("pair")
	var got []int
	for _, s := range a.Devices {
		got = append(got, s.GPU)
	}
	if len(rs) > 0 || !cmp.Equal(got, []int{0, 2}) {
		t.Errorf("pair: GPUs %v, reasons %v; want GPUs 0 and 2 (NUMA node 0)", got, rs)
	}
	if _, rs := fit("three"); len(rs) != 1 || rs[0].Code != placement.ClaimConstraintUnsatisfied || rs[0].Constraint.Best != 2 {
		js, _ := json.Marshal(rs)
		t.Errorf("three: %s; want %s with 2 of 3 on one NUMA node", js, placement.ClaimConstraintUnsatisfied)
	}
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Pod == "ml/three" && (f.Cause != diagnose.Placement || !strings.Contains(strings.Join(f.Fix, " "), "at most 2 of the device(s) they accept share one value (resource.kubernetes.io/numaNode = 0)")) {
			t.Errorf("three: %s %q; want placement naming NUMA node 0's two GPUs", f.Cause, f.Fix)
		}
	}
}

// nicSlice is the ResourceSlice of a NIC driver (dra.net) on node dra-1,
// one NIC per NUMA node given, with the standard numaNode attribute.
func nicSlice(numa ...int64) *resourcev1.ResourceSlice {
	var devices []resourcev1.Device
	for i, n := range numa {
		devices = append(devices, resourcev1.Device{Name: fmt.Sprintf("nic-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{numaNode: {IntValue: ptr.To(n)}}})
	}
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-1-dra.net"}, Spec: resourcev1.ResourceSliceSpec{Driver: "dra.net",
		Pool: resourcev1.ResourcePool{Name: "dra-1", Generation: 1, ResourceSliceCount: 1}, NodeName: ptr.To("dra-1"), Devices: devices}}
}

// nicClass selects the NIC driver's devices.
func nicClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.dra.net"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "dra.net"`}}}}}
}

// alignedClaim asks one GPU and one NIC on one NUMA node.
func alignedClaim(name string) *resourcev1.ResourceClaim {
	c := draClaim(name, testcluster.DeviceClassGPU, 1, "")
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: "nic",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "nic.dra.net", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}})
	c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(numaNode))}}
	return c
}

// TestBuildDRANUMAWithNIC: a claim of a GPU and a NIC of another driver
// on one NUMA node is judged with the NICs that gpupack reads for it: with
// the GPUs on NUMA node 0 and the only NIC on 1, placement says so; with
// a NIC on 0 too, the GPU of that node fits.
func TestBuildDRANUMAWithNIC(t *testing.T) {
	var gpus []testcluster.DRAGPU
	for i, n := range []int64{1, 0} {
		g := draH100(i)
		g.NUMANode = ptr.To(n)
		gpus = append(gpus, g)
	}
	cases := map[string]struct {
		nics    []int64
		wantGPU int // -1: does not fit
		wantFix string
	}{
		"the only NIC on the other NUMA node": {nics: []int64{2}, wantGPU: -1,
			wantFix: "claim aligned: its constraint matchAttribute resource.kubernetes.io/numaNode cannot be met: the requests it covers take 1 device(s); no free GPU they accept on dra-1 shares a value of resource.kubernetes.io/numaNode with the free devices of request(s) nic (they have 2)"},
		"a NIC on GPU 1's NUMA node": {nics: []int64{2, 0}, wantGPU: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := alignedClaim("aligned")
			objs := &kube.DRAObjects{Classes: append(testcluster.NVIDIADeviceClasses(), nicClass()),
				Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", gpus...), nicSlice(tc.nics...)}, Claims: []*resourcev1.ResourceClaim{c}}
			st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, []*corev1.Pod{draPod("aligned", "", *c)}, nil, objs)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "only for the constraints of claims that also ask for GPUs") {
				t.Errorf("warnings %q; want only the one naming the NIC driver", st.Warnings)
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
			got := -1
			if len(rs) == 0 && len(a.Devices) == 1 {
				got = a.Devices[0].GPU
			}
			if got != tc.wantGPU {
				js, _ := json.Marshal(rs)
				t.Errorf("GPU %d, reasons %s; want GPU %d", got, js, tc.wantGPU)
			}
			if tc.wantFix == "" {
				return
			}
			rep, err := diagnose.Diagnose(st.Snapshot, nil)
			if err != nil {
				t.Fatal(err)
			}
			if f := rep.Findings[0]; f.Cause != diagnose.Placement || len(f.Fix) == 0 || !strings.HasPrefix(f.Fix[0], tc.wantFix) {
				t.Errorf("finding %s %q; want placement: %s", f.Cause, f.Fix, tc.wantFix)
			}
		})
	}
}

// TestLiveDRANUMAWithNIC: on the real control plane, with ResourceSlices
// of two drivers (NVIDIA's GPUs on NUMA nodes 1 and 0, a NIC driver's
// devices), a claim of a GPU and a NIC on one NUMA node stays pending while
// the only NIC is on NUMA node 2, as gpupack says (placement, naming the
// constraint); once a NIC on NUMA node 0 is published the scheduler
// allocates GPU 1 and that NIC, the GPU gpupack predicts. Both readers
// (Load and the Watcher) see the same.
func TestLiveDRANUMAWithNIC(t *testing.T) {
	c := startDRA(t, nicClass())
	ctx := t.Context()
	client := c.Client()
	var gpus []testcluster.DRAGPU
	for i, n := range []int64{1, 0} {
		g := draH100(i)
		g.NUMANode = ptr.To(n)
		gpus = append(gpus, g)
	}
	c.AddDRANode("dra-1", gpus...)
	slice, err := client.ResourceV1().ResourceSlices().Create(ctx, nicSlice(2), metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "ml"
	c.CreateNamespace(ns)
	claim := alignedClaim("aligned")
	claim.Namespace = ns
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}
	createClaimPod(t, client, ns, "aligned", "aligned")
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		if !unschedulable(ps["aligned"]) {
			return "aligned is not marked unschedulable"
		}
		return ""
	})
	loaded, watched := readDRA(t, client, gpu.Default())
	for reader, st := range map[string]*kube.State{"Load": loaded, "Watcher": watched} {
		rep, err := diagnose.Diagnose(st.Snapshot, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 1 || rep.Findings[0].Cause != diagnose.Placement || !strings.Contains(strings.Join(rep.Findings[0].Fix, " "), "with the free devices of request(s) nic (they have 2)") {
			t.Errorf("%s: findings %+v; want placement naming the NIC's NUMA node 2", reader, rep.Findings)
		}
	}
	msg := loaded.SchedulingFailures[ns+"/aligned"].Message
	if !strings.Contains(msg, "cannot allocate all claims") {
		t.Errorf("the scheduler's message %q is not the DRA filter's", msg)
	}

	// gpupack's prediction with a NIC on NUMA node 0, then the scheduler's.
	slice.Spec.Devices = nicSlice(2, 0).Spec.Devices
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, []*corev1.Pod{draPod("aligned", "", *alignedClaim("aligned"))}, nil,
		&kube.DRAObjects{Classes: append(testcluster.NVIDIADeviceClasses(), nicClass()), Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", gpus...), slice},
			Claims: []*resourcev1.ResourceClaim{alignedClaim("aligned")}})
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
	if len(rs) > 0 || len(a.Devices) != 1 {
		t.Fatalf("with a NIC on NUMA node 0 gpupack predicts %+v, reasons %v", a.Devices, rs)
	}
	predicted := st.Snapshot.Nodes[0].GPUs[a.Devices[0].GPU].DRA.Device
	if _, err := client.ResourceV1().ResourceSlices().Update(ctx, slice, metav1.UpdateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		if p := ps["aligned"]; p == nil || p.Spec.NodeName == "" {
			return "aligned is not bound"
		}
		return ""
	})
	got, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "aligned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := map[string]string{}
	for _, r := range got.Status.Allocation.Devices.Results {
		allocated[r.Request] = r.Device
	}
	if want := map[string]string{"gpu": predicted, "nic": "nic-1"}; !cmp.Equal(allocated, want) {
		t.Errorf("the scheduler allocated %v; gpupack predicts %v", allocated, want)
	}
	t.Logf("the scheduler allocated %v; gpupack predicted GPU %s", allocated, predicted)
}

// TestBuildDRABoundAligned: a bound pod's claim that holds a GPU and a NIC
// on one NUMA node is read with the NIC request's devices and the
// constraint's values, as a pending pod's is, so that the plan sees the
// alignment it must keep.
func TestBuildDRABoundAligned(t *testing.T) {
	var gpus []testcluster.DRAGPU
	for i, n := range []int64{1, 0} {
		g := draH100(i)
		g.NUMANode = ptr.To(n)
		gpus = append(gpus, g)
	}
	c := alignedClaim("aligned")
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: kube.DriverNVIDIAGPU, Pool: "dra-1", Device: "gpu-1"}, {Request: "nic", Driver: "dra.net", Pool: "dra-1", Device: "nic-1"}}}}
	objs := &kube.DRAObjects{Classes: append(testcluster.NVIDIADeviceClasses(), nicClass()),
		Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", gpus...), nicSlice(2, 0)}, Claims: []*resourcev1.ResourceClaim{c}}
	pod := draPod("aligned", "dra-1", *c)
	pod.Status.Phase = corev1.PodRunning
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, []*corev1.Pod{pod}, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	got := st.Snapshot.Pods[0].Claims[0]
	gpuID := func(i int) string { return cluster.DeviceID(kube.DriverNVIDIAGPU, "dra-1", fmt.Sprintf("gpu-%d", i)) }
	nicID := func(i int) string { return cluster.DeviceID("dra.net", "dra-1", fmt.Sprintf("nic-%d", i)) }
	wantValues := map[string]string{gpuID(0): "int:1", gpuID(1): "int:0", nicID(0): "int:2", nicID(1): "int:0"}
	if diff := cmp.Diff(wantValues, got.Constraints[0].Values); diff != "" {
		t.Errorf("the bound claim's constraint values (-want +got):\n%s", diff)
	}
	wantNICs := []cluster.OtherDevice{{ID: nicID(0), Node: "dra-1"}, {ID: nicID(1), Node: "dra-1", Held: true}}
	if nic := got.Requests[1]; !nic.OthersRead || !cmp.Equal(wantNICs, nic.Others) {
		t.Errorf("the bound claim's NIC request: read %v, devices %+v; want %+v", nic.OthersRead, nic.Others, wantNICs)
	}
	if n := len(st.Snapshot.Nodes[0].GPUs); n != 2 || len(st.Snapshot.Pods[0].Devices) != 1 || st.Snapshot.Pods[0].Devices[0].GPU != 1 {
		t.Errorf("the pod holds %+v of %d GPUs; want GPU 1", st.Snapshot.Pods[0].Devices, n)
	}
}
