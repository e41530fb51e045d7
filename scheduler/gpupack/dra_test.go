package gpupack

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// fakeDRA is the scheduler's DRA view with fixed slices and claims; the
// methods the plugin does not call are left to the embedded nil interfaces.
type fakeDRA struct {
	fwk.SharedDRAManager
	slices []*resourceapi.ResourceSlice
	claims fakeClaims
}

func (f *fakeDRA) ResourceSlices() fwk.ResourceSliceLister  { return f }
func (f *fakeDRA) ResourceClaims() fwk.ResourceClaimTracker { return f.claims }
func (f *fakeDRA) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return f.slices, nil
}

type fakeClaims struct {
	fwk.ResourceClaimTracker
	byName map[string]*resourceapi.ResourceClaim
}

func (f fakeClaims) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := f.byName[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("resourceclaim %s/%s not found", namespace, name)
}

func (f fakeClaims) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	out := sets.New[structured.DeviceID]()
	for _, c := range f.byName {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	return out, nil
}

func gpuSlice(node string, generation int64, devices ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1}}}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
	}
	return s
}

func claim(name string, count int64, allocated ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}}
	if len(allocated) > 0 {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for i := 0; i+1 < len(allocated); i += 2 {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: "gpu.nvidia.com", Pool: allocated[i], Device: allocated[i+1]})
		}
	}
	return c
}

// TestDRAPacking: a claim pod's need counts its unallocated claims'
// devices, and the node its devices fill best scores highest.
func TestDRAPacking(t *testing.T) {
	m := &fakeDRA{
		slices: []*resourceapi.ResourceSlice{
			gpuSlice("a", 1, "gpu-0", "gpu-1", "gpu-2", "gpu-3"),
			gpuSlice("b", 1, "gpu-0", "gpu-1", "gpu-2", "gpu-3"),
			gpuSlice("c", 1, "gpu-0", "gpu-1"),
			// An older generation of b's pool, being replaced: not counted.
			gpuSlice("b", 0, "gpu-9"),
		},
		claims: fakeClaims{byName: map[string]*resourceapi.ResourceClaim{
			"ml/held-a":  claim("held-a", 3, "a", "gpu-0", "a", "gpu-1", "a", "gpu-2"),
			"ml/held-c":  claim("held-c", 1, "c", "gpu-0"),
			"ml/two":     claim("two", 2),
			"ml/one":     claim("one", 1),
			"ml/already": claim("already", 1, "b", "gpu-0"),
		}},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}, Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{
		{Name: "by-name", ResourceClaimName: ptr.To("one")},
		{Name: "from-template", ResourceClaimTemplateName: ptr.To("t")},
		{Name: "shared", ResourceClaimName: ptr.To("already")},
		{Name: "not-yet", ResourceClaimTemplateName: ptr.To("t")},
	}}, Status: v1.PodStatus{ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "from-template", ResourceClaimName: ptr.To("two")}}}}
	// one (1) + two (2); already is allocated, not-yet has no claim yet.
	if got := draNeed(pod, m.ResourceClaims()); got != 3 {
		t.Errorf("need %d, want 3", got)
	}
	nodes, err := draNodes(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]draNode{"a": {4, 1}, "b": {4, 3}, "c": {2, 1}}
	for n, w := range want {
		if nodes[n] != w {
			t.Errorf("node %s: %+v, want %+v", n, nodes[n], w)
		}
	}
	one := &draDemand{need: 1, nodes: nodes}
	// a: fills its last GPU (1); b: 2 of 4 left free (0.5); c: fills it (1).
	for node, w := range map[string]float64{"a": 1, "b": 0.5, "c": 1, "none": 0} {
		if got := one.score(node); got != w {
			t.Errorf("need 1 on %s: score %v, want %v", node, got, w)
		}
	}
	three := &draDemand{need: 3, nodes: nodes}
	if three.score("a") != 0 || three.score("b") != 1 {
		t.Errorf("need 3: a %v, b %v; want 0 (too few free) and 1", three.score("a"), three.score("b"))
	}
}
