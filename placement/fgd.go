package placement

import (
	"slices"

	"github.com/gpupack/gpupack/gpu"
)

// Fragmentation is FGD's measure of a node (Weng et al., ATC'23): the
// expected amount of the node's free GPU compute, in milli-GPU, that a task
// drawn from the workload could not use. A task that cannot run on the node
// at all (wrong model, too little CPU, too few GPUs with room) strands all of
// the node's free GPU; a task that can run strands the free compute of each
// GPU too small for it. CPU-only tasks strand all free GPU, as in FGD.
func Fragmentation(s *NodeState, w *Workload) float64 {
	var frees [maxStackGPUs]gpu.Milli
	f := frees[:0]
	for i := range s.GPUs {
		f = append(f, s.GPUs[i].FreeMilli)
	}
	return nodeFrag(w, s, s.FreeCPU, f)
}

// nodeFrag computes the fragmentation of a node of s's models with the
// given free CPU and per-GPU free compute.
func nodeFrag(w *Workload, s *NodeState, cpuLeft gpu.CPUMilli, frees []gpu.Milli) float64 {
	var idle gpu.Milli
	for _, f := range frees {
		idle += f
	}
	if idle == 0 {
		return 0
	}
	total := 0.0
	for i := range w.Types {
		t := &w.Types[i]
		total += t.Freq * float64(typeFrag(t, s, cpuLeft, frees, idle))
	}
	return total
}

func typeFrag(t *TaskType, s *NodeState, cpuLeft gpu.CPUMilli, frees []gpu.Milli, idle gpu.Milli) gpu.Milli {
	if t.Devices == 0 || cpuLeft < t.CPU || len(s.Node.GPUs) == 0 || !t.models.has(s.Node.GPUs[0].Model) {
		return idle
	}
	hosts := 0
	var small gpu.Milli
	for _, f := range frees {
		if f >= t.PerGPUMilli {
			hosts++
		} else {
			small += f
		}
	}
	if hosts < t.Devices {
		return idle
	}
	return small
}

// fragKey identifies a node state for FGD's purposes: fragmentation depends
// only on the GPU model, the free CPU and the multiset of per-GPU free
// compute.
type fragKey struct {
	model int
	cpu   gpu.CPUMilli
	n     int
	frees [maxStackGPUs]int16
}

// fragMemo caches nodeFrag by state; nodes of one shape share entries, so
// a whole trace run touches a few thousand states.
type fragMemo struct {
	w    *Workload
	memo map[fragKey]float64
}

func (m *fragMemo) frag(s *NodeState, cpuLeft gpu.CPUMilli, frees []gpu.Milli) float64 {
	if len(frees) > maxStackGPUs || len(s.Node.GPUs) == 0 {
		return nodeFrag(m.w, s, cpuLeft, frees)
	}
	k := fragKey{model: s.Node.GPUs[0].Model.Index, cpu: cpuLeft, n: len(frees)}
	for i, f := range frees {
		k.frees[i] = int16(f)
	}
	slices.Sort(k.frees[:len(frees)])
	if v, ok := m.memo[k]; ok {
		return v
	}
	v := nodeFrag(m.w, s, cpuLeft, frees)
	m.memo[k] = v
	return v
}

// fragDelta is how much the node's fragmentation grows when the demand is
// placed on it, with the GPU that makes it grow least for a one-device
// demand (ties to the lowest index), or the default GPUs otherwise.
func (m *fragMemo) fragDelta(d *Demand, s *NodeState) (float64, int) {
	var buf [maxStackGPUs]gpu.Milli
	frees := buf[:len(s.GPUs)]
	for i := range s.GPUs {
		frees[i] = s.GPUs[i].FreeMilli
	}
	before := m.frag(s, s.FreeCPU, frees)
	cpuAfter := s.FreeCPU - d.CPU
	if d.Devices == 0 {
		return m.frag(s, cpuAfter, frees) - before, -1
	}
	var hostBuf [maxStackGPUs]int
	hosts := Hosts(d, s, hostBuf[:0])
	if d.Devices > 1 {
		for _, h := range hosts[:d.Devices] {
			frees[h] -= s.GPUs[h].FreeMilli
		}
		return m.frag(s, cpuAfter, frees) - before, -1
	}
	best, bestGPU := 0.0, -1
	for _, h := range hosts {
		if seenFree(s, hosts, h) {
			continue // an earlier host with the same free compute gives the same result
		}
		take := shareOn(d, &s.Node.GPUs[h], &s.GPUs[h], h).Milli
		frees[h] -= take
		after := m.frag(s, cpuAfter, frees)
		frees[h] += take
		if bestGPU < 0 || after < best {
			best, bestGPU = after, h
		}
	}
	return best - before, bestGPU
}

func seenFree(s *NodeState, hosts []int, h int) bool {
	for _, o := range hosts {
		if o == h {
			return false
		}
		if s.GPUs[o].FreeMilli == s.GPUs[h].FreeMilli {
			return true
		}
	}
	return false
}

// fgd is Fragmentation Gradient Descent: place where the node's
// fragmentation grows least.
type fgd struct{ fragMemo }

func newFGD(o Options) *fgd {
	w := o.Workload
	return &fgd{fragMemo{w: &w, memo: map[fragKey]float64{}}}
}

func (*fgd) Name() string { return "fgd" }
func (p *fgd) Score(d *Demand, s *NodeState) (float64, int) {
	delta, g := p.fragDelta(d, s)
	return -delta, g
}
