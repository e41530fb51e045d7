package testcluster

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
)

// multiprocessorsPerSlice is the multiprocessors the test GPUs count per
// compute slice of a MIG profile.
const multiprocessorsPerSlice = 16

// nvmlProfileID is NVML's GPU instance profile ID of a profile by its
// compute slices and memory slots (1g: 19, 1g with two slots: 15, 2g: 14,
// 3g: 9, 4g: 5, 7g: 0), which the driver puts in a MIG device's name.
func nvmlProfileID(p gpu.Profile) int {
	switch [2]int{p.Compute, p.Slots} {
	case [2]int{1, 1}:
		return 19
	case [2]int{1, 2}:
		return 15
	case [2]int{2, 2}:
		return 14
	case [2]int{3, 4}:
		return 9
	case [2]int{4, 4}:
		return 5
	case [2]int{7, 8}:
		return 0
	}
	return 100 + p.Compute*10 + p.Slots
}

// CounterSetName is the driver's name of the GPU's counter set.
func (g DRAGPU) CounterSetName() string { return fmt.Sprintf("gpu-%d-counter-set", g.Minor) }

// PartitionName is the driver's name of the MIG device of profile p at
// memory slot start on the GPU.
func (g DRAGPU) PartitionName(p gpu.Profile, start int) string {
	return DRAMIG{Profile: p.Name, ProfileID: nvmlProfileID(p), Start: start}.DeviceName(g.Minor)
}

// NVIDIASlices are the ResourceSlices that NVIDIA's DRA driver publishes
// for the node's GPUs: NVIDIASlice alone, or, when a GPU is partitionable
// (DRAGPU.Partitions), its dynamic-MIG split form for Kubernetes 1.35 and
// later (cmd/gpu-kubelet-plugin, generateSplitResourceSlices and
// partitions.go, commit 22407113): one slice with every partitionable
// GPU's counter set gpu-<minor>-counter-set (multiprocessors, memory in
// bytes, memory-slice-<i> of 1 each), then one slice per such GPU with the
// whole GPU, consuming every counter, and a MIG device per profile and
// placement, consuming its multiprocessors, memory and memory slices; the
// other GPUs in a slice of their own. All in the pool named after the node.
func NVIDIASlices(node string, gpus ...DRAGPU) []*resourcev1.ResourceSlice {
	var plain, parts []DRAGPU
	for _, g := range gpus {
		if g.Partitions != nil {
			parts = append(parts, g)
		} else {
			plain = append(plain, g)
		}
	}
	if len(parts) == 0 {
		return []*resourcev1.ResourceSlice{NVIDIASlice(node, gpus...)}
	}
	qty := func(v int64) resourcev1.Counter {
		return resourcev1.Counter{Value: *resource.NewQuantity(v, resource.BinarySI)}
	}
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: ptr.To(s)} }
	counters := func(compute int, memory gpu.MiB, start, slots int) map[string]resourcev1.Counter {
		out := map[string]resourcev1.Counter{"multiprocessors": qty(int64(compute * multiprocessorsPerSlice)), "memory": qty(int64(memory) << 20)}
		for i := start; i < start+slots; i++ {
			out[fmt.Sprintf("memory-slice-%d", i)] = qty(1)
		}
		return out
	}
	slice := func(name string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       resourcev1.ResourceSliceSpec{Driver: kube.DriverNVIDIAGPU, Pool: resourcev1.ResourcePool{Name: node, Generation: 1}, NodeName: ptr.To(node)},
		}
	}
	sets := slice(node + "-" + kube.DriverNVIDIAGPU + "-counters")
	out := []*resourcev1.ResourceSlice{sets}
	for _, g := range parts {
		geo := g.Partitions
		arch := g.Architecture
		if arch == "" {
			arch = "Hopper"
		}
		largest := geo.Profiles[len(geo.Profiles)-1]
		all := counters(geo.ComputeSlices, largest.Memory, 0, geo.MemorySlots)
		sets.Spec.SharedCounters = append(sets.Spec.SharedCounters, resourcev1.CounterSet{Name: g.CounterSetName(), Counters: all})
		s := slice(fmt.Sprintf("%s-%s-gpu-%d", node, kube.DriverNVIDIAGPU, g.Minor))
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: g.DeviceName(),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": str("gpu"), "uuid": str(g.UUID(node)), "productName": str(g.Product), "architecture": str(arch),
			},
			Capacity:         map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: *resource.NewQuantity(g.MemoryMiB<<20, resource.BinarySI)}},
			ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: g.CounterSetName(), Counters: all}},
		})
		for _, p := range geo.Profiles {
			for _, start := range p.Starts {
				s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
					Name: g.PartitionName(p, start),
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
						"type": str("mig"), "parentUUID": str(g.UUID(node)), "profile": str(p.Name), "productName": str(g.Product), "architecture": str(arch),
					},
					Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
						"memory":          {Value: *resource.NewQuantity(int64(p.Memory)<<20, resource.BinarySI)},
						"multiprocessors": {Value: *resource.NewQuantity(int64(p.Compute*multiprocessorsPerSlice), resource.BinarySI)},
					},
					ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: g.CounterSetName(), Counters: counters(p.Compute, p.Memory, start, p.Slots)}},
				})
			}
		}
		out = append(out, s)
	}
	if len(plain) > 0 {
		s := NVIDIASlice(node, plain...)
		s.Name += "-whole"
		out = append(out, s)
	}
	for _, s := range out {
		s.Spec.Pool.ResourceSliceCount = int64(len(out))
	}
	return out
}
