package sim

import (
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// gapTally bounds what a run could have allocated, given the pods of more
// than half a GPU it placed. Two such pods never share a GPU, so each
// leaves on its GPU a gap of 1000 - m milli that only pods of at most that
// share can use. For any size g, the gaps of at most g can take only the
// workload's pods of at most g: even if every such pod that arrived went
// into them, at least (sum of the gaps of at most g) - (sum of those pods)
// stays free. The largest of these over g is a floor under the capacity
// left free by any placement that places the same large pods, so
// 1 - floor/capacity bounds its GPU allocation. It is a bound, not a
// packing: it ignores CPU, memory and GPU models.
//
// On openb, online policies place nearly every 0.81-GPU pod that arrives
// before the cluster fills (each leaves 190 milli that only the trace's
// rare pods of 50-160 milli fit), which is what keeps them near 97% when
// the hindsight packing, placing those pods last, reaches 98.6%.
type gapTally struct {
	// gaps counts the placed large pods' gaps by size; small the
	// arrived single-GPU shares by size.
	gaps, small map[gpu.Milli]int64
}

// arrived counts an arriving pod's share if it could fill a gap.
func (t *gapTally) arrived(d *placement.Demand) {
	if d.Devices == 1 && d.PerGPUMilli > 0 && d.PerGPUMilli < gpu.WholeGPU/2 {
		if t.small == nil {
			t.small = map[gpu.Milli]int64{}
		}
		t.small[d.PerGPUMilli]++
	}
}

// placed counts a placed pod's gap if it holds more than half a GPU.
func (t *gapTally) placed(d *placement.Demand) {
	if d.Devices == 1 && d.PerGPUMilli > gpu.WholeGPU/2 && d.PerGPUMilli < gpu.WholeGPU {
		if t.gaps == nil {
			t.gaps = map[gpu.Milli]int64{}
		}
		t.gaps[gpu.WholeGPU-d.PerGPUMilli]++
	}
}

// floor is the least capacity, in milli-GPUs, that the gaps leave free.
func (t *gapTally) floor() gpu.Milli {
	var best int64
	for g := range t.gaps {
		var gaps, fill int64
		for size, n := range t.gaps {
			if size <= g {
				gaps += int64(size) * n
			}
		}
		for size, n := range t.small {
			if size <= g {
				fill += int64(size) * n
			}
		}
		best = max(best, gaps-fill)
	}
	return gpu.Milli(best)
}
