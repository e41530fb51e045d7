package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

func TestUnallocatedOf(t *testing.T) {
	node := func(cpu gpu.CPUMilli, mem gpu.MiB, frees ...gpu.Milli) *placement.NodeState {
		s := &placement.NodeState{FreeCPU: cpu, FreeMemory: mem}
		for _, f := range frees {
			s.GPUs = append(s.GPUs, placement.GPUState{FreeMilli: f})
		}
		return s
	}
	pod := func(devices int, milli gpu.Milli, cpu gpu.CPUMilli, mem gpu.MiB) *placement.Demand {
		return &placement.Demand{Devices: devices, PerGPUMilli: milli, CPU: cpu, Memory: mem}
	}
	world := []*placement.NodeState{
		node(500, 1<<20, 1000, 190, 0),   // too little CPU for any failed pod
		node(64000, 100, 1000, 300),      // too little memory
		node(64000, 1<<20, 1000, 190, 0), // room: idle, sliver
		node(64000, 1<<20, 250, 0, 1000), // room: other (250 >= 220), idle
	}
	cases := map[string]struct {
		failed []*placement.Demand
		want   Unallocated
	}{
		"nothing failed: partly used GPUs are slivers": {
			want: Unallocated{IdleGPUMilli: 4000, SliverGPUMilli: 190 + 300 + 190 + 250},
		},
		"CPU and memory strand whole nodes": {
			failed: []*placement.Demand{pod(1, 810, 4000, 1024), pod(1, 220, 8000, 2048), pod(2, 1000, 16000, 4096)},
			want:   Unallocated{CPUStrandedGPUMilli: 1190 + 1300, IdleGPUMilli: 2000, SliverGPUMilli: 190, OtherGPUMilli: 250},
		},
		"a CPU-only pod's failure does not count": {
			failed: []*placement.Demand{pod(0, 0, 1, 1), pod(1, 1000, 4000, 1024)},
			want:   Unallocated{CPUStrandedGPUMilli: 1190 + 1300, IdleGPUMilli: 2000, SliverGPUMilli: 190 + 250},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var f failedTally
			for _, d := range tc.failed {
				f.add(d)
			}
			if diff := cmp.Diff(tc.want, unallocatedOf(world, &f)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
