package placement

import (
	"sort"

	"github.com/gpupack/gpupack/gpu"
)

// TaskType is one kind of task in a workload distribution: what it asks for
// and how often it occurs.
type TaskType struct {
	CPU         gpu.CPUMilli
	PerGPUMilli gpu.Milli // per device; 0 for CPU-only tasks
	Devices     int
	models      modelSet
	modelKey    string
	// Freq is the task type's share of the distribution; the shares of a
	// Workload add up to 1.
	Freq float64
}

// Workload is the distribution of tasks that fragmentation is measured
// against: FGD's "target workload".
type Workload struct {
	Types []TaskType
}

// TypicalCoverage is the share of tasks that a workload distribution
// keeps: the most frequent task types up to 95% of tasks, as the paper's
// public simulator does (pkg/utils/frag.go, GetTypicalPods, with its
// default popularity threshold of 95). The simulator and the scheduler
// plugin both build their workloads with it.
const TypicalCoverage = 0.95

// NewWorkload builds the distribution from demands as FGD does: tasks are
// grouped by (CPU, per-GPU milli, GPU count, model constraint), CPU-only
// tasks included; the most frequent types are kept until they cover
// coverage (0..1] of all tasks, and their frequencies renormalised.
func NewWorkload(demands []*Demand, coverage float64) Workload {
	type key struct {
		cpu     gpu.CPUMilli
		milli   gpu.Milli
		devices int
		models  string
	}
	counts := map[key]int{}
	sets := map[key]modelSet{}
	for _, d := range demands {
		k := key{d.CPU, d.PerGPUMilli, d.Devices, modelsKey(d)}
		counts[k]++
		sets[k] = d.models
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	// Most frequent first; ties broken by the larger tuple, as FGD does.
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if counts[a] != counts[b] {
			return counts[a] > counts[b]
		}
		if a.cpu != b.cpu {
			return a.cpu > b.cpu
		}
		if a.milli != b.milli {
			return a.milli > b.milli
		}
		if a.devices != b.devices {
			return a.devices > b.devices
		}
		return a.models > b.models
	})
	total := len(demands)
	var w Workload
	covered := 0
	for _, k := range keys {
		if total > 0 && float64(covered) >= coverage*float64(total) {
			break
		}
		covered += counts[k]
		w.Types = append(w.Types, TaskType{CPU: k.cpu, PerGPUMilli: k.milli, Devices: k.devices, models: sets[k], modelKey: k.models, Freq: float64(counts[k])})
	}
	for i := range w.Types {
		w.Types[i].Freq /= float64(covered)
	}
	return w
}

func modelsKey(d *Demand) string {
	if d.models.any {
		return ""
	}
	b := make([]byte, 0, 8*len(d.models.bits))
	for _, w := range d.models.bits {
		for i := 0; i < 8; i++ {
			b = append(b, byte(w>>(8*i)))
		}
	}
	return string(b)
}
