package sim

import (
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// Unallocated splits the GPU capacity a run leaves free at its end by what
// kept the GPU pods that failed from it. The parts are exclusive and add
// up to capacity minus allocation, in milli-GPU. A pod that failed found
// no room when it arrived, and a run without churn only fills nodes, so
// at the end no failed pod fits anywhere: each part says which of its
// requests ran out.
type Unallocated struct {
	// CPUStrandedGPUMilli is the free GPU on nodes whose free CPU or
	// memory is less than every failed GPU pod asks for.
	CPUStrandedGPUMilli int64 `json:"cpu_stranded_gpu_milli"`
	// IdleGPUMilli is whole idle GPUs on the other nodes.
	IdleGPUMilli int64 `json:"idle_gpu_milli"`
	// SliverGPUMilli is free compute on partly used GPUs of the other
	// nodes that is less than the smallest failed one-GPU share (all of
	// it when no such share failed).
	SliverGPUMilli int64 `json:"sliver_gpu_milli"`
	// OtherGPUMilli is the rest: partly used GPUs with room for the
	// smallest failed share, which it could not take for another reason
	// (GPU model, GPU memory, or a larger share).
	OtherGPUMilli int64 `json:"other_gpu_milli"`
}

// failedTally keeps what the failed GPU pods asked for, as far as
// unallocatedOf needs it.
type failedTally struct {
	// smallestShare is the least share of one GPU among them.
	smallestShare gpu.Milli
	// asks are the distinct (CPU, memory) requests among them.
	asks map[[2]int64]struct{}
}

func (f *failedTally) add(d *placement.Demand) {
	if d.Devices == 0 {
		return
	}
	if f.asks == nil {
		f.asks = map[[2]int64]struct{}{}
		f.smallestShare = gpu.WholeGPU
	}
	if d.Devices == 1 {
		f.smallestShare = min(f.smallestShare, d.PerGPUMilli)
	}
	f.asks[[2]int64{int64(d.CPU), int64(d.Memory)}] = struct{}{}
}

// starved says whether the node's free CPU or memory is short of every
// failed GPU pod's request; false when none failed.
func (f *failedTally) starved(s *placement.NodeState) bool {
	if len(f.asks) == 0 {
		return false
	}
	for a := range f.asks {
		if gpu.CPUMilli(a[0]) <= s.FreeCPU && gpu.MiB(a[1]) <= s.FreeMemory {
			return false
		}
	}
	return true
}

// unallocatedOf splits the free GPU of the states at a run's end.
func unallocatedOf(states []*placement.NodeState, failed *failedTally) Unallocated {
	smallest := gpu.WholeGPU
	if failed.asks != nil {
		smallest = failed.smallestShare
	}
	var u Unallocated
	for _, s := range states {
		starved := failed.starved(s)
		for _, g := range s.GPUs {
			free := int64(g.FreeMilli)
			switch {
			case free == 0:
			case starved:
				u.CPUStrandedGPUMilli += free
			case g.FreeMilli == gpu.WholeGPU:
				u.IdleGPUMilli += free
			case g.FreeMilli < smallest:
				u.SliverGPUMilli += free
			default:
				u.OtherGPUMilli += free
			}
		}
	}
	return u
}
