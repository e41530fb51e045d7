package kube_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

type classList []*resourcev1.DeviceClass

func (l classList) List() ([]*resourcev1.DeviceClass, error) { return l, nil }
func (l classList) Get(name string) (*resourcev1.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no DeviceClass %s", name)
}

// TestCapacityAgreesWithAllocator: on a GPU that allows multiple
// allocations, for each kind of memory request policy, what earlier
// claims consume and what a new claim asks, gpupack's placement.Fit (on
// the snapshot the loader builds) and the kube-scheduler's own allocator
// (k8s.io/dynamic-resource-allocation/structured, with DRAConsumableCapacity)
// agree whether the claim fits and, when it does, on the memory it takes.
func TestCapacityAgreesWithAllocator(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	policies := map[string]*resourcev1.CapacityRequestPolicy{
		"none":         nil,
		"range":        {Default: q("10Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: q("10Gi"), Max: q("40Gi"), Step: q("10Gi")}},
		"range no max": {ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: q("8Gi")}},
		"values":       {Default: q("20Gi"), ValidValues: []resource.Quantity{*q("20Gi"), *q("40Gi")}},
		"values only":  {ValidValues: []resource.Quantity{*q("20Gi"), *q("40Gi")}},
	}
	classes := testcluster.NVIDIADeviceClasses()
	celCache := dracel.NewCache(10, dracel.Features{EnableConsumableCapacity: true})
	node := draNode("dra-1")
	for pname, policy := range policies {
		for _, used := range []string{"", "30Gi", "70Gi"} {
			for _, asked := range []string{"", "1Gi", "5Gi", "25Gi", "40Gi", "45Gi", "90Gi"} {
				name := fmt.Sprintf("policy %s, used %q, asked %q", pname, used, asked)
				t.Run(name, func(t *testing.T) {
					g := testcluster.DRAGPU{Minor: 0, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 80 << 10, Shared: true, MemoryPolicy: policy}
					slice := testcluster.NVIDIASlice("dra-1", g)
					id := structured.MakeDeviceID(kube.DriverNVIDIAGPU, "dra-1", "gpu-0")
					state := structured.AllocatedState{AllocatedSharedDeviceIDs: nil, AggregatedCapacity: structured.NewConsumedCapacityCollection()}
					var claims []*resourcev1.ResourceClaim
					var pods []*corev1.Pod
					if used != "" {
						held := draClaim("held", testcluster.DeviceClassGPU, 1, "dra-1", "gpu-0")
						r := &held.Status.Allocation.Devices.Results[0]
						r.ShareID = ptr.To(types.UID("share-held"))
						r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(used)}
						claims, pods = append(claims, held), append(pods, draPod("held", "dra-1", *held))
						state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
						state.AllocatedSharedDeviceIDs = sets.New(structured.MakeSharedDeviceID(id, r.ShareID))
					}
					claim := draClaim("new", testcluster.DeviceClassGPU, 1, "")
					if asked != "" {
						claim.Spec.Devices.Requests[0].Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(asked)}}
					}
					claims, pods = append(claims, claim), append(pods, draPod("new", "", *claim))

					alloc, err := structured.NewAllocator(t.Context(), structured.Features{ConsumableCapacity: true}, state, classList(classes), []*resourcev1.ResourceSlice{slice}, celCache)
					if err != nil {
						t.Fatal(err)
					}
					results, err := alloc.Allocate(t.Context(), node, []*resourcev1.ResourceClaim{claim})
					if err != nil {
						t.Fatalf("allocator: %v", err)
					}

					st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{node}, pods, nil, &kube.DRAObjects{Classes: classes, Slices: []*resourcev1.ResourceSlice{slice}, Claims: claims})
					if err != nil {
						t.Fatal(err)
					}
					a, reasons := fitFirstNode(t, st.Snapshot, "new")
					if fits := len(reasons) == 0; fits != (results != nil) {
						t.Fatalf("gpupack fits: %v (%v); the allocator: %v", fits, reasons, results)
					}
					if results == nil {
						if len(reasons) != 1 || reasons[0].Code != placement.ClaimCapacityInsufficient {
							t.Errorf("reasons %v, want %s", reasons, placement.ClaimCapacityInsufficient)
						}
						return
					}
					want := results[0].Devices.Results[0].ConsumedCapacity["memory"]
					if len(a.Devices) != 1 || len(a.Devices[0].Consumed) != 1 || int64(a.Devices[0].Consumed[0]) != want.Value() {
						t.Errorf("gpupack takes %+v; the allocator %s of memory", a.Devices, want.String())
					}
				})
			}
		}
	}
}

// fitFirstNode is placement.Fit of the named pod of the snapshot on its
// first node, as it stands.
func fitFirstNode(t *testing.T, s *cluster.Snapshot, pod string) (placement.Assignment, []placement.Reason) {
	t.Helper()
	states, _, err := placement.States(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Pods {
		if p.Name == pod {
			d, err := placement.NewDemand(p, s.Catalogue)
			if err != nil {
				t.Fatal(err)
			}
			return placement.Fit(d, states[0])
		}
	}
	t.Fatalf("no pod %s in the snapshot", pod)
	return placement.Assignment{}, nil
}

// TestBuildDRACapacity: the loader reads a device's capacities with their
// request policies and a claim request's capacity, and gives no warning
// that consumable capacity is not modelled: placement models it.
func TestBuildDRACapacity(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	g := testcluster.DRAGPU{Minor: 0, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 80 << 10, Shared: true,
		MemoryPolicy: &resourcev1.CapacityRequestPolicy{Default: q("10Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: q("10Gi"), Step: q("5Gi")}}}
	claim := draClaim("new", testcluster.DeviceClassGPU, 1, "")
	claim.Spec.Devices.Requests[0].Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("12Gi")}}
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, []*corev1.Pod{draPod("new", "", *claim)}, nil,
		&kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: []*resourcev1.ResourceSlice{testcluster.NVIDIASlice("dra-1", g)}, Claims: []*resourcev1.ResourceClaim{claim}})
	if err != nil {
		t.Fatal(err)
	}
	gi := cluster.Quantity(1 << 30)
	qp := func(v cluster.Quantity) *cluster.Quantity { return &v }
	want := []cluster.DeviceCapacity{{Name: "memory", Value: 80 * gi, Policy: &cluster.CapacityPolicy{Default: qp(10 * gi), Min: qp(10 * gi), Step: qp(5 * gi)}}}
	if diff := cmp.Diff(want, st.Snapshot.Nodes[0].GPUs[0].DRA.Capacity); diff != "" {
		t.Errorf("capacities (-want +got):\n%s", diff)
	}
	if got := st.Snapshot.Pods[0].Claims[0].Requests[0].Capacity; got["memory"] != 12*gi {
		t.Errorf("request capacity = %v, want memory 12Gi", got)
	}
	for _, w := range st.Warnings {
		if strings.Contains(w, "consumable capacity") {
			t.Errorf("warning %q: consumable capacity is modelled", w)
		}
	}
}
