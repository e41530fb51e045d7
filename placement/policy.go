package placement

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// Policy scores the nodes a demand fits; the caller places the demand on a
// node with the highest score. Score is only called for nodes where Fits
// holds, must not change the state, and returns the host GPU to use for a
// one-device demand, or -1 for the default choice.
type Policy interface {
	Name() string
	Score(d *Demand, s *NodeState) (score float64, gpu int)
}

// Observer is implemented by policies that keep state across placements;
// the caller reports each placement after Assign.
type Observer interface {
	Placed(d *Demand, s *NodeState)
}

// Options configure policies for one cluster and workload.
type Options struct {
	// Workload is the task distribution that fragmentation is measured
	// against (fgd and gpupack).
	Workload Workload
	// Rand drives the random policy and tie-breaks.
	Rand *rand.Rand
	// MaxNodeCPU and MaxNodeGPUMilli are the largest node's capacities,
	// the normalisers of bestfit, dotprod and gpuclustering.
	MaxNodeCPU      gpu.CPUMilli
	MaxNodeGPUMilli gpu.Milli
	// GPUsByModel counts the cluster's GPUs by catalogue model index
	// (gpu.Model.Index; CountGPUsByModel): gpupack weighs with it how much
	// of each model the pods that name models need. Nil leaves that out.
	GPUsByModel map[int]int
}

// CountGPUsByModel counts the nodes' GPUs by catalogue model index, for
// Options.GPUsByModel.
func CountGPUsByModel(nodes []*cluster.Node) map[int]int {
	out := map[int]int{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if g.Model != nil {
				out[g.Model.Index]++
			}
		}
	}
	return out
}

// Policies lists the policy names New accepts.
func Policies() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultPolicy is the name of gpupack's own policy.
const DefaultPolicy = "gpupack"

var registry = map[string]func(Options) Policy{
	"random":        func(o Options) Policy { return &randomPolicy{rng: o.Rand} },
	"firstfit":      func(Options) Policy { return firstFit{} },
	"bestfit":       func(o Options) Policy { return bestFit{o} },
	"dotprod":       func(o Options) Policy { return dotProd{o} },
	"gpupacking":    func(Options) Policy { return gpuPacking{} },
	"gpuclustering": func(o Options) Policy { return gpuClustering{opts: o} },
	"fgd":           func(o Options) Policy { return newFGD(o) },
	DefaultPolicy:   func(o Options) Policy { return newGpupack(o) },
}

// New returns the named policy.
func New(name string, o Options) (Policy, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (want one of %s)", name, strings.Join(Policies(), ", "))
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(1, 2))
	}
	if o.MaxNodeCPU <= 0 {
		o.MaxNodeCPU = 1
	}
	if o.MaxNodeGPUMilli <= 0 {
		o.MaxNodeGPUMilli = gpu.WholeGPU
	}
	return f(o), nil
}

// Memoizable says a policy's Score depends only on the demand's DemandKey
// and the node's state, so that a caller may keep a node's answer until
// the node changes: every policy but random, which draws anew each call.
func Memoizable(p Policy) bool {
	_, random := p.(*randomPolicy)
	return !random
}

// randomPolicy places on a uniformly random feasible node and GPU.
type randomPolicy struct{ rng *rand.Rand }

func (randomPolicy) Name() string { return "random" }
func (p *randomPolicy) Score(d *Demand, s *NodeState) (float64, int) {
	g := -1
	if d.Devices == 1 {
		var buf [maxStackGPUs]int
		h := Hosts(d, s, buf[:0])
		g = h[p.rng.IntN(len(h))]
	}
	return p.rng.Float64(), g
}

// firstFit takes the first node in snapshot order.
type firstFit struct{}

func (firstFit) Name() string { return "firstfit" }
func (firstFit) Score(_ *Demand, s *NodeState) (float64, int) {
	return -float64(s.Index), -1
}

// bestFit prefers the node left with the least CPU and GPU, equally weighted.
type bestFit struct{ o Options }

func (bestFit) Name() string { return "bestfit" }
func (p bestFit) Score(d *Demand, s *NodeState) (float64, int) {
	cpuLeft := float64(s.FreeCPU-d.CPU) / float64(p.o.MaxNodeCPU)
	gpuLeft := float64(s.GPUMilliFree()-demandMilli(d)) / float64(p.o.MaxNodeGPUMilli)
	return -(0.5*cpuLeft + 0.5*gpuLeft), -1
}

// dotProd prefers the node whose free (CPU, GPU) vector has the smallest dot
// product with the demand's.
type dotProd struct{ o Options }

func (dotProd) Name() string { return "dotprod" }
func (p dotProd) Score(d *Demand, s *NodeState) (float64, int) {
	mc, mg := float64(p.o.MaxNodeCPU), float64(p.o.MaxNodeGPUMilli)
	dot := float64(s.FreeCPU)/mc*float64(d.CPU)/mc + float64(s.GPUMilliFree())/mg*float64(demandMilli(d))/mg
	return -dot, -1
}

// gpuPacking prefers, in order: GPUs already partly used, then nodes already
// partly used, then idle nodes with the fewest GPUs.
type gpuPacking struct{}

func (gpuPacking) Name() string { return "gpupacking" }
func (gpuPacking) Score(d *Demand, s *NodeState) (float64, int) {
	if d.Devices == 0 {
		return 0, -1
	}
	idle := 0
	for i := range s.GPUs {
		if s.GPUs[i].Idle() {
			idle++
		}
	}
	if idle == len(s.GPUs) {
		return float64(max(33-idle, idle)), -1
	}
	a, _ := Fit(d, s)
	idleUsed := 0
	var freeAfter gpu.Milli
	for _, dev := range a.Devices {
		if s.GPUs[dev.GPU].Idle() {
			idleUsed++
		}
		freeAfter += s.GPUs[dev.GPU].FreeMilli - dev.Milli
	}
	if idleUsed > 0 {
		return float64(max(50-idleUsed, 33)), -1
	}
	return max(100-float64(freeAfter)/100, 50), -1
}

// gpuClustering prefers nodes that already run tasks of the same shape
// (a share of one GPU, 1 GPU, 2 GPUs...), then fuller nodes. It reads the
// shapes from the node's state (NodeState.Shapes), so a pod that leaves
// stops counting.
type gpuClustering struct {
	opts Options
}

func (gpuClustering) Name() string { return "gpuclustering" }
func (p gpuClustering) Score(d *Demand, s *NodeState) (float64, int) {
	shape := ShapeOf(d)
	if shape < 0 {
		return 0, -1
	}
	base := 25 * float64(p.opts.MaxNodeGPUMilli-s.GPUMilliFree()) / float64(p.opts.MaxNodeGPUMilli)
	shapes := 0
	for _, n := range s.Shapes {
		if n > 0 {
			shapes++
		}
	}
	switch {
	case shapes == 0:
		return base + 25, -1
	case s.Shapes[shape] > 0 && shapes == 1:
		return base + 75, -1
	case s.Shapes[shape] > 0:
		return base + 50, -1
	}
	return base, -1
}

// demandMilli is the GPU compute a demand takes in milli-GPU.
func demandMilli(d *Demand) gpu.Milli {
	return gpu.Milli(d.Devices) * d.PerGPUMilli
}
