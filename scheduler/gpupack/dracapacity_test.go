package gpupack

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

func (f fakeClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	st := &structured.AllocatedState{AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	for _, c := range f.byName {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if len(r.ConsumedCapacity) > 0 {
				st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(structured.MakeDeviceID(r.Driver, r.Pool, r.Device), r.ConsumedCapacity))
			}
		}
	}
	return st, nil
}

// sharedSlice is a node's slice of one GPU that allows multiple
// allocations, with memory capacity.
func sharedSlice(node, memory string) *resourceapi.ResourceSlice {
	s := gpuSlice(node, 1, "gpu-0")
	s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	s.Spec.Devices[0].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(memory)}}
	return s
}

// memoryClaim asks memory of one shared GPU; allocated on node when given,
// consuming what it asks.
func memoryClaim(name, memory, node string) *resourceapi.ResourceClaim {
	c := claim(name, 1)
	c.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}
	if node != "" {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpus", Driver: "gpu.nvidia.com", Pool: node, Device: "gpu-0", ShareID: ptr.To(k8stypes.UID(name)),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}}}}
	}
	return c
}

// TestDRACapacityPacking: a pod whose claims ask memory of shared GPUs
// scores nodes by the memory their best device would have left: the
// fullest device that still holds it wins, one without room scores 0.
func TestDRACapacityPacking(t *testing.T) {
	m := &fakeDRA{
		slices: []*resourceapi.ResourceSlice{sharedSlice("a", "80Gi"), sharedSlice("b", "80Gi"), sharedSlice("c", "80Gi"), gpuSlice("d", 1, "gpu-0")},
		claims: fakeClaims{byName: map[string]*resourceapi.ResourceClaim{
			"ml/on-a": memoryClaim("on-a", "60Gi", "a"),
			"ml/on-b": memoryClaim("on-b", "20Gi", "b"),
			"ml/on-c": memoryClaim("on-c", "70Gi", "c"),
			"ml/new":  memoryClaim("new", "20Gi", ""),
		}},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}, Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("new")}}}}
	d := &draDemand{need: draNeed(pod, m.ResourceClaims()), capacity: draCapacity(pod, m.ResourceClaims())}
	if d.need != 1 || d.capacity["memory"] != 20<<30 {
		t.Fatalf("demand %+v, want one device and 20Gi of memory", d)
	}
	var err error
	if d.nodes, err = draNodes(m, nil); err != nil {
		t.Fatal(err)
	}
	if d.shared, err = draSharedDevices(m); err != nil {
		t.Fatal(err)
	}
	// a: 20Gi free, filled exactly (1); b: 40Gi of 80Gi left (0.5); c: no
	// room (0); d: one exclusive GPU, by count (1).
	for node, want := range map[string]float64{"a": 1, "b": 0.5, "c": 0, "d": 1} {
		if got := d.score(node); got != want {
			t.Errorf("node %s: score %v, want %v", node, got, want)
		}
	}
}
