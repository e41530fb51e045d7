package gpupack

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/kube"
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
	// nodes are the GPU devices of each node, free and in all, as PreScore
	// found them for this cycle.
	nodes map[string]draNode
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
	if len(pod.Spec.ResourceClaims) == 0 || claims == nil {
		return 0
	}
	names := map[string]string{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			names[s.Name] = *s.ResourceClaimName
		}
	}
	need := 0
	for _, pc := range pod.Spec.ResourceClaims {
		name := names[pc.Name]
		if pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
		if name == "" {
			continue
		}
		c, err := claims.Get(pod.Namespace, name)
		if err != nil || c.Status.Allocation != nil {
			continue
		}
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
func draNodes(m fwk.SharedDRAManager) (map[string]draNode, error) {
	slices, err := m.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	allocated, err := m.ResourceClaims().ListAllAllocatedDevices()
	if err != nil {
		return nil, err
	}
	// A pool's slices of an older generation are being replaced: only the
	// newest generation counts, as for the allocator.
	newest := map[string]int64{}
	for _, s := range slices {
		newest[s.Spec.Driver+"/"+s.Spec.Pool.Name] = max(newest[s.Spec.Driver+"/"+s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	var current []*resourceapi.ResourceSlice
	sets := map[string][]cluster.CounterSet{}
	for _, s := range slices {
		if s.Spec.Driver != kube.DriverNVIDIAGPU || s.Spec.NodeName == nil || *s.Spec.NodeName == "" || s.Spec.Pool.Generation < newest[s.Spec.Driver+"/"+s.Spec.Pool.Name] {
			continue
		}
		current = append(current, s)
		for _, cs := range s.Spec.SharedCounters {
			sets[s.Spec.Pool.Name] = append(sets[s.Spec.Pool.Name], kube.CounterSet(cs))
		}
	}
	ledgers := map[string]*placement.CounterLedger{}
	for pool, cs := range sets {
		ledgers[pool] = placement.NewCounterLedger(cs)
	}
	for _, s := range current {
		if l := ledgers[s.Spec.Pool.Name]; l != nil {
			for _, d := range s.Spec.Devices {
				if len(d.ConsumesCounters) > 0 && allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
					l.Take(kube.CounterUses(d.ConsumesCounters))
				}
			}
		}
	}
	out := map[string]draNode{}
	for _, s := range current {
		n := out[*s.Spec.NodeName]
		for _, d := range s.Spec.Devices {
			n.total++
			if allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
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

// draScore is the best fit of the pod's devices on the node: 1 where they
// would fill its last free GPUs, falling as more would be left free (a
// share of the node's devices), so that claim pods fill nodes one by one
// and leave whole nodes free for the pods that need them. A node without
// enough free devices scores 0 (DynamicResources filters it out anyway).
func (d *draDemand) score(node string) float64 {
	n := d.nodes[node]
	if n.total == 0 || n.free < d.need {
		return 0
	}
	return 1 - float64(n.free-d.need)/float64(n.total)
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
