package kube_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

// The GPUs of the DRA tests, as NVIDIA's DRA driver publishes them.
var (
	draH100 = func(minor int) testcluster.DRAGPU {
		return testcluster.DRAGPU{Minor: minor, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559}
	}
	// draA100MIG is an A100-40GB in MIG mode with 3g.20gb@4 and two 1g.5gb.
	draA100MIG = func(minor int) testcluster.DRAGPU {
		return testcluster.DRAGPU{Minor: minor, Product: "NVIDIA A100-SXM4-40GB", Architecture: "Ampere", MemoryMiB: 40960, MIG: []testcluster.DRAMIG{
			{Profile: "3g.20gb", ProfileID: 9, Start: 4, MemoryMiB: 19968},
			{Profile: "1g.5gb", ProfileID: 19, Start: 0, MemoryMiB: 4864},
			{Profile: "1g.5gb", ProfileID: 19, Start: 1, MemoryMiB: 4864},
		}}
	}
)

// draPod is a pod in namespace ml whose claims are given by name
// (ResourceClaimName) or by template (the claim's name then in the status).
func draPod(name, node string, claims ...resourcev1.ResourceClaim) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for i, c := range claims {
		podClaim := "claim-" + string(rune('a'+i))
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimTemplateName: ptr.To(c.Name + "-template")})
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: ptr.To(c.Name)})
	}
	return p
}

// draClaim is a claim in namespace ml for count devices of class,
// allocated to the named devices (driver gpu.nvidia.com, pool the node).
func draClaim(name, class string, count int64, node string, devices ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count},
		}}}},
	}
	if len(devices) > 0 {
		alloc := &resourcev1.AllocationResult{}
		for _, d := range devices {
			alloc.Devices.Results = append(alloc.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: kube.DriverNVIDIAGPU, Pool: node, Device: d})
		}
		c.Status.Allocation = alloc
	}
	return c
}

// TestBuildDRA: the GPUs of ResourceSlices join their nodes (whole GPUs,
// MIG devices as the slices of their GPU, unlisted products as the
// catalogue's unlisted models), tagged with the classes whose CEL selectors
// select them; allocated claims make their pods hold those devices, so that
// placement counts them used and no bound pod is said not to fit; pending
// pods with claims, or asking nvidia.com/gpu that a class serves, are GPU
// pods; and what gpupack does not model is named in a warning.
func TestBuildDRA(t *testing.T) {
	c := gpu.Default()
	tainted := draH100(1)
	tainted.Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	published := []*resourcev1.ResourceSlice{
		testcluster.NVIDIASlice("dra-1", draH100(0), draH100(1), draA100MIG(2)),
		testcluster.NVIDIASlice("dra-2", testcluster.DRAGPU{Minor: 0, Product: "NVIDIA B300 SXM6 AC", MemoryMiB: 275040}, tainted),
	}
	nic := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"}, Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver == 'nic.example.com'"}}}}}
	train := draClaim("train-gpu", testcluster.DeviceClassGPU, 1, "dra-1", "gpu-1")
	infer := draClaim("infer-mig", testcluster.DeviceClassMIG, 1, "dra-1", testcluster.DRAMIG{Profile: "1g.5gb", ProfileID: 19, Start: 1}.DeviceName(2))
	waiting := draClaim("waiting-gpu", testcluster.DeviceClassGPU, 4, "")
	net := draClaim("net", "nic.example.com", 1, "")
	ext := draClaim("ext-claim", testcluster.DeviceClassGPU, 1, "dra-2", "gpu-1")

	legacy := draPod("legacy", "")
	legacy.Spec.Containers[0].Resources.Requests = corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}
	extPod := draPod("ext", "dra-2")
	extPod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}
	extPod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "ext-claim",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: string(kube.ResourceGPU), RequestName: "container-0-request-0"}}}
	pods := []*corev1.Pod{draPod("train", "dra-1", *train), draPod("infer", "dra-1", *infer), draPod("waiting", "", *waiting), draPod("net", "", *net), legacy, extPod}
	nodes := []*corev1.Node{draNode("dra-1"), draNode("dra-2")}
	objs := &kube.DRAObjects{Classes: append(testcluster.NVIDIADeviceClasses(), nic), Slices: published, Claims: []*resourcev1.ResourceClaim{train, infer, waiting, net, ext}}

	st, err := kube.BuildDRA(c, nodes, pods, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot
	if got := snap.GPUCount(); got != 5 {
		t.Fatalf("GPUCount = %d, want 5 (3 on dra-1, one of them MIG, and 2 on dra-2); warnings: %q", got, st.Warnings)
	}
	n1, _ := snap.Node("dra-1")
	if g := n1.GPUs[0]; g.Model.Name != "H100-80GB" || g.Memory != 81559 || g.DRA == nil || g.DRA.Device != "gpu-0" || !slices.Equal(g.DRA.Classes, []string{testcluster.DeviceClassGPU}) {
		t.Errorf("dra-1 GPU 0 = %+v (DRA %+v), want the H100 gpu-0 of class %s", g, g.DRA, testcluster.DeviceClassGPU)
	}
	mig := n1.GPUs[2]
	if mig.Sharing != cluster.MIG || mig.Model.Name != "A100-40GB" || len(mig.Layout) != 3 || !slices.Equal(mig.DRA.Classes, []string{testcluster.DeviceClassMIG}) {
		t.Fatalf("dra-1 GPU 2 = %+v (DRA %+v), want the A100-40GB in MIG with 3 slices, of class %s", mig, mig.DRA, testcluster.DeviceClassMIG)
	}
	for i, sl := range mig.Layout {
		if name := mig.DRA.SliceDevices[i]; !strings.Contains(name, "-mig-"+strings.ReplaceAll(sl.Profile, ".", "")+"-") {
			t.Errorf("slice %d (%s) is device %s", i, sl.Profile, name)
		}
	}
	n2, _ := snap.Node("dra-2")
	if g := n2.GPUs[0]; !g.Model.Unlisted || g.Memory != 275040 {
		t.Errorf("dra-2 GPU 0 = %+v, want the unlisted B300 with 275040 MiB", g)
	}

	byName := map[string]*cluster.Pod{}
	for _, p := range snap.Pods {
		byName[p.Name] = p
	}
	if p := byName["train"]; p.GPU != (cluster.Request{Kind: cluster.WholeGPUs, Count: 1}) || !cmp.Equal(p.Devices, []cluster.Device{{GPU: 1, Slice: -1}}) {
		t.Errorf("train: GPU %v, devices %+v; want 1 GPU, GPU 1 of dra-1", p.GPU, p.Devices)
	}
	if p := byName["infer"]; p.GPU.Kind != cluster.MIGSlice || p.GPU.Profile != "1g.5gb" || len(p.Devices) != 1 || p.Devices[0].GPU != 2 ||
		mig.DRA.SliceDevices[p.Devices[0].Slice] != infer.Status.Allocation.Devices.Results[0].Device {
		t.Errorf("infer: GPU %v, devices %+v; want MIG 1g.5gb on the slice of %s", p.GPU, p.Devices, infer.Status.Allocation.Devices.Results[0].Device)
	}
	if p := byName["waiting"]; p.Bound() || p.GPU != (cluster.Request{Kind: cluster.WholeGPUs, Count: 4}) || p.Claims[0].Name != "waiting-gpu" {
		t.Errorf("waiting: GPU %v, claims %+v; want a pending pod asking 4 GPUs through claim waiting-gpu", p.GPU, p.Claims)
	}
	if p := byName["net"]; p.WantsGPU() {
		t.Errorf("net: GPU %v; a claim of a class that selects no GPU is no GPU request", p.GPU)
	}
	if p := byName["legacy"]; len(p.Claims) != 1 || p.Claims[0].ExtendedResource != string(kube.ResourceGPU) || p.Claims[0].Requests[0].DeviceClass != testcluster.DeviceClassGPU {
		t.Errorf("legacy: claims %+v; want nvidia.com/gpu served by class %s", p.Claims, testcluster.DeviceClassGPU)
	}
	if p := byName["ext"]; !cmp.Equal(p.Devices, []cluster.Device{{GPU: 1, Slice: -1}}) || p.Claims[0].Name != "ext-claim" {
		t.Errorf("ext: devices %+v, claims %+v; want GPU 1 of dra-2 through ext-claim", p.Devices, p.Claims)
	}

	states, misfits, err := placement.States(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(misfits) > 0 {
		t.Errorf("bound DRA pods do not fit where their claims put them: %q", misfits)
	}
	if s := states[0]; s.GPUs[1].FreeMilli != 0 || s.GPUs[0].FreeMilli != gpu.WholeGPU || s.GPUs[2].UsedSlices != 1<<byName["infer"].Devices[0].Slice {
		t.Errorf("dra-1 state = %+v; want GPU 1 used, GPU 0 free and one MIG slice used", s.GPUs)
	}
	if want := []cluster.DeviceTaint{{Device: "gpu-1", Key: "gpu.nvidia.com/xid", Value: "79", Effect: cluster.TaintEffectNoSchedule}}; !cmp.Equal(n2.GPUs[1].DRA.Taints, want) {
		t.Errorf("dra-2 GPU 1 taints = %+v, want %+v", n2.GPUs[1].DRA.Taints, want)
	}
	for _, want := range []string{`"NVIDIA B300 SXM6 AC" (attribute productName) is not in gpupack's catalogue`} {
		if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
			t.Errorf("no warning says %q; warnings: %q", want, st.Warnings)
		}
	}
}

// TestBuildDRANotModelled: devices that are not local to one node and
// devices of other drivers are never dropped silently; a partitionable GPU
// with its counter set in its devices' slice (the form before Kubernetes
// 1.35) is read with its partition.
func TestBuildDRANotModelled(t *testing.T) {
	s := testcluster.NVIDIASlice("dra-1", draH100(0))
	s.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "gpu-0-counter-set", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("80Gi")}}}}
	consumes := []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0-counter-set", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("10Gi")}}}}
	s.Spec.Devices[0].ConsumesCounters = consumes
	part := *s.Spec.Devices[0].DeepCopy()
	part.Name = "gpu-0-mig-1g10gb-19-0"
	part.Attributes["type"] = resourcev1.DeviceAttribute{StringValue: ptr.To("mig")}
	part.Attributes["profile"] = resourcev1.DeviceAttribute{StringValue: ptr.To("1g.10gb")}
	s.Spec.Devices = append(s.Spec.Devices, part)
	net := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nic"}, Spec: resourcev1.ResourceSliceSpec{Driver: "nic.example.com", Pool: resourcev1.ResourcePool{Name: "p", Generation: 1, ResourceSliceCount: 1}, NodeName: ptr.To("dra-1"), Devices: []resourcev1.Device{{Name: "eth0"}}}}
	shared := testcluster.NVIDIASlice("fabric", draH100(0))
	shared.Spec.NodeName, shared.Spec.AllNodes = nil, ptr.To(true)
	shared.Spec.Pool.Name = "fabric"
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, nil, nil, &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: []*resourcev1.ResourceSlice{s, net, shared}})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Snapshot.GPUCount(); got != 1 {
		t.Errorf("GPUCount = %d, want 1 (the whole GPU behind the partition)", got)
	}
	if g := st.Snapshot.Nodes[0].GPUs[0]; g.DRA == nil || len(g.DRA.Partitions) != 1 {
		t.Errorf("GPU 0 = %+v, want one partition", g.DRA)
	}
	for _, want := range []string{
		"ResourceSlices of driver nic.example.com (1 devices)",
		"ResourceSlice fabric-gpu.nvidia.com: device gpu-0 is not local to one node",
	} {
		if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
			t.Errorf("no warning says %q; warnings:\n%s", want, strings.Join(st.Warnings, "\n"))
		}
	}
}

func draNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		}},
	}
}

// TestBuildDRAShares: claims holding shares (shareID, consumed memory) of a
// device that allows multiple allocations each count as a share of it, and a
// claim naming an unknown DeviceClass is said so.
func TestBuildDRAShares(t *testing.T) {
	shared := draH100(0)
	shared.Shared = true
	var claims []*resourcev1.ResourceClaim
	var pods []*corev1.Pod
	for i, memory := range []string{"20Gi", "30Gi"} {
		name := fmt.Sprintf("share-%d", i)
		cl := draClaim(name, testcluster.DeviceClassGPU, 1, "dra-1", "gpu-0")
		r := &cl.Status.Allocation.Devices.Results[0]
		r.ShareID = ptr.To(types.UID(fmt.Sprintf("share-uid-%d", i)))
		r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}
		claims = append(claims, cl)
		pods = append(pods, draPod(name, "dra-1", *cl))
	}
	unknown := draClaim("odd", "no-such-class", 1, "")
	claims = append(claims, unknown)
	pods = append(pods, draPod("odd", "", *unknown))
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, pods, nil,
		&kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", shared)}, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	g := st.Snapshot.Nodes[0].GPUs[0]
	if !g.DRA.Shared || g.Sharing != cluster.Fractional {
		t.Fatalf("GPU = %+v (DRA %+v), want a shared DRA device", g, g.DRA)
	}
	states, misfits, err := placement.States(st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(misfits) > 0 {
		t.Errorf("misfits: %q", misfits)
	}
	if s := states[0].GPUs[0]; s.Holders != 2 || s.FreeMemory != g.Memory-(20+30)*1024 {
		t.Errorf("GPU state = %+v; want 2 holders and %d MiB free", s, g.Memory-(20+30)*1024)
	}
	want := "pod ml/odd: claim odd, request gpu: DeviceClass no-such-class was not listed"
	if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
		t.Errorf("no warning says %q; warnings: %q", want, st.Warnings)
	}
}

// TestBuildDRAEvaluatesClaims: a pending pod's claim requests carry the
// devices their class and selectors accept, judged by the upstream CEL
// evaluator (none is not "not evaluated"), a selector that fails at run
// time is recorded with the allocator's words, and a claim whose template
// does not exist is missing.
func TestBuildDRAEvaluatesClaims(t *testing.T) {
	withSelector := func(name, expr string) *resourcev1.ResourceClaim {
		c := draClaim(name, testcluster.DeviceClassGPU, 1, "")
		c.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
		return c
	}
	h100 := withSelector("h100", "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'")
	b200 := withSelector("b200", "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'")
	broken := withSelector("broken", "device.attributes['gpu.nvidia.com'].nosuch == 'x'")
	gone := draPod("orphan", "")
	gone.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gone")}}
	pods := []*corev1.Pod{draPod("h100", "", *h100), draPod("b200", "", *b200), draPod("broken", "", *broken), gone}
	objs := &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Claims: []*resourcev1.ResourceClaim{h100, b200, broken},
		Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", draH100(0), draH100(1), draA100MIG(2))}}
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, pods, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cluster.Claim{}
	for _, p := range st.Snapshot.Pods {
		got[p.Name] = p.Claims[0]
	}
	req := func(name string) cluster.ClaimRequest { return got[name].Requests[0] }
	if r := req("h100"); !r.Evaluated || !slices.Equal(r.Accepts, []string{"gpu.nvidia.com/dra-1/gpu-0", "gpu.nvidia.com/dra-1/gpu-1"}) || len(r.SelectorErrors) != 0 {
		t.Errorf("h100's request = %+v; want both H100s accepted", r)
	}
	if r := req("b200"); !r.Evaluated || len(r.Accepts) != 0 {
		t.Errorf("b200's request = %+v; want evaluated, accepting nothing", r)
	}
	r := req("broken")
	wantErr := "claim ml/broken: selector #0 on device gpu.nvidia.com/dra-1/gpu-0: CEL runtime error: "
	if !r.Evaluated || len(r.Accepts) != 0 || len(r.SelectorErrors) != 2 || !strings.HasPrefix(r.SelectorErrors["gpu.nvidia.com/dra-1/gpu-0"], wantErr) {
		t.Errorf("broken's request = %+v; want a runtime error on each whole GPU, starting %q", r, wantErr)
	}
	if c := got["orphan"]; !c.Missing {
		t.Errorf("orphan's claim = %+v; want missing (its template does not exist)", c)
	}
}
