package gpupack

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/placement"
)

// draDemand is what the plugin knows of a pod that asks for GPUs through
// ResourceClaims (Dynamic Resource Allocation) only: the GPU devices its
// unallocated claims ask for. The upstream DynamicResources plugin decides
// whether a node can allocate them and allocates; GPUPack only scores, so
// that claim pods are packed onto the nodes whose GPUs they fill best, as
// device-plugin pods are.
type draDemand struct {
	need int
	// tolerations are each unallocated request's tolerations of device
	// taints (a firstAvailable request's first alternative's).
	tolerations [][]cluster.DeviceToleration
	// nodes are the GPU devices of each node, free and in all, as PreScore
	// found them for this cycle.
	nodes map[string]draNode
	// capacity is what the pod's unallocated claims ask of devices'
	// consumable capacity (DRAConsumableCapacity), by capacity name, in
	// whole units; nil when they ask none. shared are then, by node, the
	// GPU devices that allow multiple allocations, with what is left of
	// their capacities, as PreScore found them.
	capacity map[resourceapi.QualifiedName]int64
	shared   map[string][]draShared
}

// draNode counts a node's DRA GPU devices (NVIDIA's driver, published in a
// node-local ResourceSlice).
type draNode struct{ total, free int }

// draNeed is the number of GPU devices the pod's claims ask for and that
// are not allocated yet: each request's exact count (a firstAvailable
// request's first alternative), looked up in the scheduler's claim
// tracker. A claim the tracker does not hold yet (a template's claim not
// yet created) counts nothing: the DynamicResources plugin waits for it.
// Requests for all devices of a class (allocationMode All) count nothing:
// they fill whatever node they land on.
func draNeed(pod *v1.Pod, claims fwk.ResourceClaimTracker) int {
	need := 0
	for _, c := range podClaims(pod, claims) {
		for _, r := range c.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil && r.Exactly.AllocationMode != resourceapi.DeviceAllocationModeAll:
				need += int(max(r.Exactly.Count, 1))
			case r.Exactly == nil && len(r.FirstAvailable) > 0 && r.FirstAvailable[0].AllocationMode != resourceapi.DeviceAllocationModeAll:
				need += int(max(r.FirstAvailable[0].Count, 1))
			}
		}
	}
	return need
}

// draNodes counts the GPU devices of NVIDIA's DRA driver on each node and
// how many of them no claim has allocated, from the scheduler's view of
// ResourceSlices and claims (which includes the allocations of pods it has
// assumed but not yet bound). A device that consumes shared counters (a
// partition of a partitionable GPU, or its whole device) is free only
// while its pool's counters, less what the allocated devices consume,
// still cover it, by placement's own ledger: so a node counts the
// partitions it can still make, and one whose GPUs are cut up counts few.
// A device with a NoSchedule or NoExecute taint (its slice's or a
// DeviceTaintRule's) is free only if one of the pod's requests tolerates
// it (tolerations, as placement judges them with cluster.Untolerated).
func draNodes(m fwk.SharedDRAManager, tolerations [][]cluster.DeviceToleration) (map[string]draNode, error) {
	slices, err := gpuSlices(m)
	if err != nil {
		return nil, err
	}
	allocated, err := m.ResourceClaims().ListAllAllocatedDevices()
	if err != nil {
		return nil, err
	}
	sets := map[string][]cluster.CounterSet{}
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			sets[s.Spec.Pool.Name] = append(sets[s.Spec.Pool.Name], kube.CounterSet(cs))
		}
	}
	ledgers := map[string]*placement.CounterLedger{}
	for pool, cs := range sets {
		ledgers[pool] = placement.NewCounterLedger(cs)
	}
	for _, s := range slices {
		if l := ledgers[s.Spec.Pool.Name]; l != nil {
			for _, d := range s.Spec.Devices {
				if len(d.ConsumesCounters) > 0 && allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
					l.Take(kube.CounterUses(d.ConsumesCounters))
				}
			}
		}
	}
	out := map[string]draNode{}
	for _, s := range slices {
		n := out[*s.Spec.NodeName]
		for _, d := range s.Spec.Devices {
			n.total++
			if allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
				continue
			}
			if len(d.Taints) > 0 && !tolerated(kube.DeviceTaints(d.Name, d.Taints), d.Name, tolerations) {
				continue
			}
			if len(d.ConsumesCounters) > 0 {
				if l := ledgers[s.Spec.Pool.Name]; l == nil || !l.Fits(kube.CounterUses(d.ConsumesCounters)) {
					continue
				}
			}
			n.free++
		}
		out[*s.Spec.NodeName] = n
	}
	return out, nil
}

// tolerated reports whether one of the requests' tolerations lets a
// request take the device despite its taints.
func tolerated(taints []cluster.DeviceTaint, device string, tolerations [][]cluster.DeviceToleration) bool {
	if len(tolerations) == 0 {
		tolerations = [][]cluster.DeviceToleration{nil}
	}
	for _, tols := range tolerations {
		if _, blocked := cluster.Untolerated(taints, device, tols); !blocked {
			return true
		}
	}
	return false
}

// draTolerations are the tolerations of each request of the pod's
// unallocated claims (a firstAvailable request's first alternative's).
func draTolerations(pod *v1.Pod, claims fwk.ResourceClaimTracker) [][]cluster.DeviceToleration {
	var out [][]cluster.DeviceToleration
	for _, c := range podClaims(pod, claims) {
		for _, r := range c.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil:
				out = append(out, kube.Tolerations(r.Exactly.Tolerations))
			case len(r.FirstAvailable) > 0:
				out = append(out, kube.Tolerations(r.FirstAvailable[0].Tolerations))
			}
		}
	}
	return out
}

// draScore is the best fit of the pod's devices on the node: 1 where they
// would fill its last free GPUs, falling as more would be left free (a
// share of the node's devices), so that claim pods fill nodes one by one
// and leave whole nodes free for the pods that need them. A node without
// enough free devices scores 0 (DynamicResources filters it out anyway).
func (d *draDemand) score(node string) float64 {
	if len(d.capacity) > 0 && len(d.shared[node]) > 0 {
		return d.capacityScore(node)
	}
	n := d.nodes[node]
	if n.total == 0 || n.free < d.need {
		return 0
	}
	return 1 - float64(n.free-d.need)/float64(n.total)
}

// gpuSlices are the node-local ResourceSlices of NVIDIA's GPU driver, of
// each pool's newest generation only (older ones are being replaced), as
// the allocator reads them.
func gpuSlices(m fwk.SharedDRAManager) ([]*resourceapi.ResourceSlice, error) {
	all, err := m.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	newest := map[string]int64{}
	for _, s := range all {
		newest[s.Spec.Driver+"/"+s.Spec.Pool.Name] = max(newest[s.Spec.Driver+"/"+s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	var out []*resourceapi.ResourceSlice
	for _, s := range all {
		if s.Spec.Driver == kube.DriverNVIDIAGPU && s.Spec.NodeName != nil && *s.Spec.NodeName != "" && s.Spec.Pool.Generation >= newest[s.Spec.Driver+"/"+s.Spec.Pool.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// draShared is a GPU device that allows multiple allocations: each
// capacity's whole value and what allocated claims consume of it.
type draShared struct {
	total, used map[resourceapi.QualifiedName]int64
}

// draCapacity sums what the pod's unallocated claims ask of consumable
// capacity: each request's capacity.requests (a firstAvailable request's
// first alternative's), as asked; the device's request policy, which may
// round it up, is the allocator's to apply.
func draCapacity(pod *v1.Pod, claims fwk.ResourceClaimTracker) map[resourceapi.QualifiedName]int64 {
	var out map[resourceapi.QualifiedName]int64
	add := func(c *resourceapi.CapacityRequirements) {
		if c == nil {
			return
		}
		for name, q := range c.Requests {
			if out == nil {
				out = map[resourceapi.QualifiedName]int64{}
			}
			out[name] += q.Value()
		}
	}
	for _, c := range podClaims(pod, claims) {
		for _, r := range c.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil:
				add(r.Exactly.Capacity)
			case len(r.FirstAvailable) > 0:
				add(r.FirstAvailable[0].Capacity)
			}
		}
	}
	return out
}

// podClaims are the pod's claims that the tracker holds and that are not
// allocated yet.
func podClaims(pod *v1.Pod, claims fwk.ResourceClaimTracker) []*resourceapi.ResourceClaim {
	if len(pod.Spec.ResourceClaims) == 0 || claims == nil {
		return nil
	}
	names := map[string]string{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			names[s.Name] = *s.ResourceClaimName
		}
	}
	var out []*resourceapi.ResourceClaim
	for _, pc := range pod.Spec.ResourceClaims {
		name := names[pc.Name]
		if pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
		if name == "" {
			continue
		}
		if c, err := claims.Get(pod.Namespace, name); err == nil && c.Status.Allocation == nil {
			out = append(out, c)
		}
	}
	return out
}

// draSharedDevices lists, by node, NVIDIA's GPU devices that allow multiple
// allocations, with their capacities and what the allocated claims
// (assumed ones included) consume of them.
func draSharedDevices(m fwk.SharedDRAManager) (map[string][]draShared, error) {
	slices, err := gpuSlices(m)
	if err != nil {
		return nil, err
	}
	state, err := m.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	out := map[string][]draShared{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || len(d.Capacity) == 0 {
				continue
			}
			dev := draShared{total: map[resourceapi.QualifiedName]int64{}, used: map[resourceapi.QualifiedName]int64{}}
			consumed := state.AggregatedCapacity[structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)]
			for name, c := range d.Capacity {
				dev.total[name] = c.Value.Value()
				if q := consumed[name]; q != nil {
					dev.used[name] = q.Value()
				}
			}
			out[*s.Spec.NodeName] = append(out[*s.Spec.NodeName], dev)
		}
	}
	return out, nil
}

// capacityScore is the best fit by capacity: over the node's shared
// devices that have room for what the pod asks, the one it leaves least
// free (the largest share of any asked capacity left, as a share of the
// device's) gives 1 minus that share; 0 when no device has room.
func (d *draDemand) capacityScore(node string) float64 {
	best := -1.0
	for _, dev := range d.shared[node] {
		left, fits := 0.0, true
		for name, want := range d.capacity {
			total, ok := dev.total[name]
			free := total - dev.used[name]
			if !ok || total <= 0 || free < want {
				fits = false
				break
			}
			left = max(left, float64(free-want)/float64(total))
		}
		if fits && (best < 0 || left < best) {
			best = left
		}
	}
	if best < 0 {
		return 0
	}
	return 1 - best
}

// servedByDRA reports whether a DeviceClass serves the extended resource
// through DRA (spec.extendedResourceName), so that a pod asking for it may
// be given DRA devices on a node that does not offer it in allocatable.
func servedByDRA(m fwk.SharedDRAManager, resource string) bool {
	if m == nil {
		return false
	}
	classes, err := m.DeviceClasses().List()
	if err != nil {
		return false
	}
	for _, c := range classes {
		if c.Spec.ExtendedResourceName != nil && *c.Spec.ExtendedResourceName == resource {
			return true
		}
	}
	return false
}
