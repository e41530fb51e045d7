package kube

import (
	"cmp"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// NVIDIA's DRA driver for GPUs publishes dynamic MIG (its DynamicMIG feature
// gate; github.com/NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin,
// partitions.go and driver.go, followed at commit 22407113 of May 2026,
// v0.4.0-rc.1+) as partitionable devices (KEP 4815): per GPU one counter set
// gpu-<minor>-counter-set, in a ResourceSlice of its own on Kubernetes 1.35
// and later (a slice has devices or shared counters, not both), with one
// counter per capacity of the largest profile (multiprocessors,
// copy-engines, decoders, encoders, jpeg-engines, ofa-engines, memory in
// bytes) and memory-slice-<i> (1 each); the whole GPU gpu-<minor> consumes
// every counter, and each MIG device of a profile at a placement
// (gpu-<minor>-mig-<profile>-<profileID>-<start>, attributes type mig,
// profile, parentUUID) consumes its capacities and the memory slices of
// its placement.
const draCounterMultiprocessors = "multiprocessors"

// partitionGroup is a partitionable GPU: the devices that consume one
// counter set of a pool, the whole GPU among them when it is offered.
type partitionGroup struct {
	node, set string
	whole     *draDevice
	parts     []*draDevice
}

// partitionGroups gathers the devices that consume shared counters by
// the counter set they consume from, in the order first met.
type partitionGroups struct {
	groups map[string]*partitionGroup
	order  []string
	// multi are the devices that consume more than one counter set, which
	// gpupack cannot give to one GPU.
	multi []*draDevice
}

func (ps *partitionGroups) add(d *draDevice, whole bool) {
	if len(d.device.ConsumesCounters) != 1 {
		ps.multi = append(ps.multi, d)
		return
	}
	set := d.device.ConsumesCounters[0].CounterSet
	key := d.node + "/" + d.slice.Spec.Driver + "/" + d.slice.Spec.Pool.Name + "/" + set
	g, ok := ps.groups[key]
	if !ok {
		g = &partitionGroup{node: d.node, set: set}
		ps.groups[key] = g
		ps.order = append(ps.order, key)
	}
	if whole {
		g.whole = d
	} else {
		g.parts = append(g.parts, d)
	}
}

// addPartitionable adds each partitionable GPU with its counter set, what
// its whole device consumes and its partitions. What it cannot model is
// named in a warning and left out: a device consuming several counter
// sets, a counter set that no slice of the pool publishes, more partitions
// than gpupack models.
func (v *draView) addPartitionable(ps *partitionGroups, model func(*draDevice) *gpu.Model, add func(string, cluster.GPU, []string, []int)) {
	for _, d := range ps.multi {
		v.warnf("ResourceSlice %s: device %s consumes %d counter sets (DRAPartitionableDevices); gpupack models a device consuming one and leaves it out", d.slice.Name, d.device.Name, len(d.device.ConsumesCounters))
	}
	for _, key := range ps.order {
		g := ps.groups[key]
		first := cmp.Or(g.whole, g.parts[0])
		pool := first.slice.Spec.Driver + "/" + first.slice.Spec.Pool.Name
		cs, ok := v.counterSets[pool][g.set]
		if !ok {
			v.warnf("ResourceSlice %s: device %s consumes counter set %s, which no current ResourceSlice of pool %s publishes; the kube-scheduler treats the pool as invalid, and gpupack leaves its devices out", first.slice.Name, first.device.Name, g.set, pool)
			continue
		}
		m := model(first)
		if m == nil {
			continue
		}
		set := CounterSet(cs)
		dra := &cluster.DRADevice{Driver: first.slice.Spec.Driver, Pool: first.slice.Spec.Pool.Name, Product: first.str(draAttrProduct), CounterSets: []cluster.CounterSet{set}}
		gp := cluster.GPU{Model: m, Memory: m.Usable, UUID: first.str(draAttrParentUUID), Sharing: cluster.Exclusive, DRA: dra}
		if mem, ok := set.Counters[draCapMemory]; ok && mem > 0 {
			gp.Memory = gpu.MiB(mem / mib)
		}
		var names []string
		var idx []int
		if w := g.whole; w != nil {
			dra.Device = w.device.Name
			dra.Classes = v.classesOf(w)
			dra.Consumes = CounterUses(w.device.ConsumesCounters)
			dra.Taints = append(dra.Taints, w.taints...)
			gp.UUID = w.str(draAttrUUID)
			if mem := w.memory(); mem > 0 {
				gp.Memory = mem
			}
			names, idx = []string{w.device.Name}, []int{-1}
		}
		if len(g.parts) > cluster.MaxPartitions {
			v.warnf("ResourceSlice %s: GPU %s offers %d partitions; gpupack models the first %d by name and leaves the rest out", first.slice.Name, cmp.Or(gp.UUID, g.set), len(g.parts), cluster.MaxPartitions)
			g.parts = g.parts[:cluster.MaxPartitions]
		}
		for _, d := range g.parts {
			p := cluster.Partition{Device: d.device.Name, Profile: d.str(draAttrProfile), Memory: d.memory(), Classes: v.classesOf(d), Consumes: CounterUses(d.device.ConsumesCounters)}
			p.Milli = share(p.Consumes[0].Counters, set.Counters)
			dra.Partitions = append(dra.Partitions, p)
			dra.Taints = append(dra.Taints, d.taints...)
		}
		add(g.node, gp, names, idx)
	}
}

// share is the part of the GPU's compute that a partition takes: its
// multiprocessors of the set's, else its memory of the set's; 0 when
// neither is counted.
func share(consumed, total map[string]int64) gpu.Milli {
	for _, name := range []string{draCounterMultiprocessors, draCapMemory} {
		if t := total[name]; t > 0 {
			return gpu.Milli(min((consumed[name]*int64(gpu.WholeGPU)+t/2)/t, int64(gpu.WholeGPU)))
		}
	}
	return 0
}

func counters(in map[string]resourcev1.Counter) map[string]int64 {
	out := make(map[string]int64, len(in))
	for name, c := range in {
		out[name] = c.Value.Value()
	}
	return out
}

// CounterSet converts a ResourceSlice's counter set.
func CounterSet(cs resourcev1.CounterSet) cluster.CounterSet {
	return cluster.CounterSet{Name: cs.Name, Counters: counters(cs.Counters)}
}

// CounterUses converts what a device consumes of counter sets
// (consumesCounters).
func CounterUses(in []resourcev1.DeviceCounterConsumption) []cluster.CounterUse {
	out := make([]cluster.CounterUse, len(in))
	for i, u := range in {
		out[i] = cluster.CounterUse{Set: u.CounterSet, Counters: counters(u.Counters)}
	}
	return out
}
