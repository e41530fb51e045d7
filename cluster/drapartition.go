package cluster

import (
	"fmt"

	"github.com/gpupack/gpupack/gpu"
)

// CounterSet is a set of counters that devices of a DRA pool share
// (ResourceSlice spec.sharedCounters, DRAPartitionableDevices): a device
// that consumes counters can be allocated only while every counter of the
// sets it consumes from covers it after the devices already allocated.
// NVIDIA's driver (dynamic MIG) publishes one set per GPU. Values are
// counts, or bytes for memory, as the driver gives them.
type CounterSet struct {
	Name     string           `json:"name"`
	Counters map[string]int64 `json:"counters"`
}

// CounterUse is what a device consumes of one counter set
// (spec.devices[].consumesCounters).
type CounterUse struct {
	Set      string           `json:"counterSet"`
	Counters map[string]int64 `json:"counters"`
}

// Partition is a device of a partitionable GPU that is made when a claim
// gets it (NVIDIA's dynamic MIG: a MIG device of one profile at one
// placement), consuming counters of the GPU's counter sets.
type Partition struct {
	Device string `json:"device"`
	// Profile is the MIG profile (e.g. 1g.10gb); empty when unknown.
	Profile string `json:"profile,omitempty"`
	// Milli is the share of the GPU's compute the partition takes, Memory
	// its framebuffer; 0 when unknown.
	Milli  gpu.Milli `json:"milli,omitempty"`
	Memory gpu.MiB   `json:"memory,omitempty"`
	// Classes are the DeviceClasses whose selectors select the partition,
	// sorted.
	Classes  []string     `json:"classes,omitempty"`
	Consumes []CounterUse `json:"consumes"`
}

// MaxPartitions is the most partitions gpupack models per GPU (NVIDIA's
// H100 offers 25 placements of its profiles).
const MaxPartitions = 64

// Partitionable reports whether the GPU's devices consume shared counters:
// its partitions are made on demand.
func (d *DRADevice) Partitionable() bool { return len(d.CounterSets) > 0 }

// checkPartitions validates a partitionable GPU's counters: every device
// consumes only counters of its sets, as the apiserver's validation of a
// pool demands.
func checkPartitions(d *DRADevice) error {
	if len(d.Partitions) > MaxPartitions {
		return fmt.Errorf("partitions: %d, gpupack models at most %d per GPU", len(d.Partitions), MaxPartitions)
	}
	if !d.Partitionable() && (len(d.Partitions) > 0 || len(d.Consumes) > 0) {
		return fmt.Errorf("counterSets: missing; partitions and consumes need the counter sets they consume from")
	}
	sets := map[string]map[string]int64{}
	for i, cs := range d.CounterSets {
		if cs.Name == "" || len(cs.Counters) == 0 {
			return fmt.Errorf("counterSets[%d]: a counter set needs a name and counters", i)
		}
		if _, dup := sets[cs.Name]; dup {
			return fmt.Errorf("counterSets[%d]: counter set %s is given twice", i, cs.Name)
		}
		for name, v := range cs.Counters {
			if v < 0 {
				return fmt.Errorf("counterSets[%d].counters.%s: %d is negative", i, name, v)
			}
		}
		sets[cs.Name] = cs.Counters
	}
	check := func(where string, uses []CounterUse) error {
		for i, u := range uses {
			set, ok := sets[u.Set]
			if !ok {
				return fmt.Errorf("%s[%d].counterSet: %s is not among counterSets", where, i, u.Set)
			}
			for name, v := range u.Counters {
				if _, ok := set[name]; !ok {
					return fmt.Errorf("%s[%d].counters.%s: counter set %s has no such counter", where, i, name, u.Set)
				}
				if v < 0 {
					return fmt.Errorf("%s[%d].counters.%s: %d is negative", where, i, name, v)
				}
			}
		}
		return nil
	}
	if err := check("consumes", d.Consumes); err != nil {
		return err
	}
	for j, p := range d.Partitions {
		if len(p.Consumes) == 0 {
			return fmt.Errorf("partitions[%d] (%s): consumes: missing; a partition consumes counters", j, p.Device)
		}
		if p.Milli < 0 || p.Milli > gpu.WholeGPU || p.Memory < 0 {
			return fmt.Errorf("partitions[%d] (%s): milli %d or memory %d out of range", j, p.Device, p.Milli, p.Memory)
		}
		if err := check(fmt.Sprintf("partitions[%d].consumes", j), p.Consumes); err != nil {
			return err
		}
	}
	return nil
}
