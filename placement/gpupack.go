package placement

// gpupackPolicy is gpupack's default policy. It keeps FGD's idea, place
// where the node's expected stranded GPU grows least, and changes two
// things that the openb traces show FGD gets wrong:
//
//  1. Which tasks the expectation is over. FGD weights each task type by
//     how often it occurs. gpupack weights it by occurrences per GPU it
//     asks for (floored at minTaskGPU), so a 0.1-GPU task type counts ten
//     times as much per task as a whole-GPU type. Once the cluster is
//     nearly full, the GPU that is still allocatable is what small tasks
//     can squeeze into the holes; the per-GPU weighting values holes by
//     how many tasks can still use them rather than by how often a task
//     needs a whole GPU, which FGD over-protects.
//  2. What breaks ties. Many placements change fragmentation by the same
//     amount (CPU-only pods on nodes with room, whole GPUs on idle nodes),
//     and FGD then picks at random, spreading pods over idle nodes. gpupack
//     adds a best-fit term, worth at most 2*tieBreak milli-GPU of
//     fragmentation, that prefers the node left with the least free CPU
//     and GPU, so such ties pack.
//
// The README's table compares it with fgd on four traces and ten seeds.
type gpupackPolicy struct {
	fragMemo
	o Options
}

const (
	// tieBreak is the weight of the best-fit term, in milli-GPU of
	// fragmentation per unit of normalised leftover (CPU and GPU, each 0..1).
	tieBreak = 20
	// minTaskGPU floors a task type's GPU demand in the per-GPU weighting;
	// CPU-only tasks take it. 0.05 GPU is the trace's smallest fraction.
	minTaskGPU = 0.05
)

func newGpupack(o Options) *gpupackPolicy {
	w := perGPUWeighted(o.Workload)
	return &gpupackPolicy{fragMemo: fragMemo{w: &w, memo: map[fragKey]float64{}}, o: o}
}

// perGPUWeighted reweights a workload's task types by frequency per GPU
// demanded, renormalised to add up to 1.
func perGPUWeighted(w Workload) Workload {
	out := Workload{Types: append([]TaskType(nil), w.Types...)}
	total := 0.0
	for i := range out.Types {
		t := &out.Types[i]
		demand := float64(t.Devices) * t.PerGPUMilli.Ratio()
		t.Freq /= max(demand, minTaskGPU)
		total += t.Freq
	}
	for i := range out.Types {
		out.Types[i].Freq /= total
	}
	return out
}

func (*gpupackPolicy) Name() string { return DefaultPolicy }
func (p *gpupackPolicy) Score(d *Demand, s *NodeState) (float64, int) {
	delta, g := p.fragDelta(d, s)
	cpuLeft := float64(s.FreeCPU-d.CPU) / float64(p.o.MaxNodeCPU)
	gpuLeft := float64(s.GPUMilliFree()-demandMilli(d)) / float64(p.o.MaxNodeGPUMilli)
	return -delta - tieBreak*(cpuLeft+gpuLeft), g
}
