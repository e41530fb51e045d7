package placement

import (
	"math"
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

// maxFragMemo bounds a fragMemo: a fill-only trace run touches a few
// thousand states, but churn (the replay, a scheduler running for weeks)
// visits ever new ones, so the memo starts afresh once it holds this many
// (about 13 MB) rather than grow without bound. It is a pure cache: scores
// do not depend on it.
const maxFragMemo = 1 << 17

// fragMemo caches nodeFrag by state; nodes of one shape share entries.
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
	if len(m.memo) >= maxFragMemo {
		clear(m.memo)
	}
	m.memo[k] = v
	return v
}

// fragDelta is how much the node's fragmentation grows when the demand is
// placed on it, with the GPU that makes it grow least for a one-device
// demand (ties to the lowest index), or the default GPUs otherwise.
func (m *fragMemo) fragDelta(d *Demand, s *NodeState) (float64, int) {
	best, bestGPU := 0.0, -2
	m.eachPlacement(d, s, func(g int, delta float64) {
		if bestGPU == -2 || delta < best {
			best, bestGPU = delta, g
		}
	})
	return best, max(bestGPU, -1)
}

// eachPlacement calls f with how much the node's fragmentation grows when
// the demand is placed: once per distinct host GPU, in
// index order, for a one-device demand (a host with the same free compute
// as an earlier one gives the same result and is skipped), or once with GPU
// -1 (the default choice) otherwise.
func (m *fragMemo) eachPlacement(d *Demand, s *NodeState, f func(g int, delta float64)) {
	var buf [maxStackGPUs]gpu.Milli
	frees := buf[:len(s.GPUs)]
	for i := range s.GPUs {
		frees[i] = s.GPUs[i].FreeMilli
	}
	before := m.frag(s, s.FreeCPU, frees)
	cpuAfter := s.FreeCPU - d.CPU
	if d.Devices == 0 {
		f(-1, m.frag(s, cpuAfter, frees)-before)
		return
	}
	var hostBuf [maxStackGPUs]int
	hosts := Hosts(d, s, hostBuf[:0])
	if d.Devices > 1 {
		for _, h := range hosts[:d.Devices] {
			frees[h] -= shareOn(d, &s.Node.GPUs[h], &s.GPUs[h], h).Milli
		}
		f(-1, m.frag(s, cpuAfter, frees)-before)
		return
	}
	for _, h := range hosts {
		if seenFree(s, hosts, h) {
			continue
		}
		take := shareOn(d, &s.Node.GPUs[h], &s.GPUs[h], h).Milli
		frees[h] -= take
		f(h, m.frag(s, cpuAfter, frees)-before)
		frees[h] += take
	}
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

// fgd is Fragmentation Gradient Descent as the paper's public simulator
// implements it (hkust-adsl/kubernetes-scheduler-simulator,
// pkg/simulator/plugin/fgd_score.go, calculateGpuShareFragExtendScore):
//
//   - the node score is the integer int64(100 * sigmoid((F_before -
//     F_after) / 1000)), fragmentation in milli-GPU, so placements whose
//     fragmentation changes differ by less than about 40 milli-GPU tie;
//   - for a one-device share of a GPU, each host GPU is scored so, in index
//     order, and the first with the highest score is used (the plugin's
//     "fragScore > score" keeps the first);
//   - whole GPUs and CPU-only pods are scored by the default assignment.
//
// Ties between nodes are the host's to break; the simulator breaks them by
// a fixed node order drawn once per seed, as the public simulator does
// (sim.Ties).
type fgd struct{ fragMemo }

func newFGD(o Options) *fgd {
	w := o.Workload
	return &fgd{fragMemo{w: &w, memo: map[fragKey]float64{}}}
}

func (*fgd) Name() string { return "fgd" }
func (p *fgd) Score(d *Demand, s *NodeState) (float64, int) {
	best, bestGPU := int64(0), -2
	p.eachPlacement(d, s, func(g int, delta float64) {
		if score := fgdScore(delta); bestGPU == -2 || score > best {
			best, bestGPU = score, g
		}
	})
	return float64(best), max(bestGPU, -1)
}

// fgdScore is the public simulator's node score, 0..100, for a growth of
// the node's fragmentation by delta milli-GPU.
func fgdScore(delta float64) int64 {
	return int64(100 / (1 + math.Exp(delta/1000)))
}
