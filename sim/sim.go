// Package sim replays a trace workload against a cluster with a placement
// policy, as the FGD paper's simulator does: each pod arrives once, never
// leaves, and is placed where the policy scores highest or counted as
// failed. It is gpupack's benchmark and what-if engine.
//
// sim is a pure package: it must not import client-go, net/http or any CLI
// library.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// DefaultInflation is the paper's workload size: GPU demand of 1.3 times the
// cluster's GPU capacity.
const DefaultInflation = 1.3

// Inflate builds the experiment's workload from a pod list: every listed pod,
// then random copies of listed pods until the GPU demand reaches inflation
// times capacity (stopping at the first copy that would pass it), or random
// pods removed until it no longer exceeds it; then the whole workload is
// shuffled. The same seed gives the same workload.
func Inflate(pods []*cluster.Pod, capacity gpu.Milli, inflation float64, seed uint64) ([]*cluster.Pod, error) {
	if len(pods) == 0 {
		return nil, errors.New("the pod list is empty")
	}
	if math.IsNaN(inflation) || inflation <= 0 || inflation > 100 {
		return nil, fmt.Errorf("inflation %v: want a ratio of GPU demand to capacity in (0, 100]", inflation)
	}
	if capacity <= 0 {
		return nil, errors.New("the cluster has no GPUs to fill")
	}
	var demand gpu.Milli
	for _, p := range pods {
		demand += p.GPU.GPUMilli()
	}
	if demand == 0 {
		return nil, errors.New("the pod list asks for no GPU, so it cannot fill the cluster; use a pod list with GPU pods")
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	target := gpu.Milli(math.Round(inflation * float64(capacity)))
	out := append([]*cluster.Pod(nil), pods...)
	for copies := 0; demand < target; copies++ {
		src := pods[rng.IntN(len(pods))]
		if demand+src.GPU.GPUMilli() > target {
			break
		}
		cp := *src
		cp.Name = fmt.Sprintf("%s-copy-%d", src.Name, copies)
		out = append(out, &cp)
		demand += src.GPU.GPUMilli()
	}
	for demand > target && len(out) > 0 {
		i := rng.IntN(len(out))
		demand -= out[i].GPU.GPUMilli()
		out[i] = out[len(out)-1]
		out = out[:len(out)-1]
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}

// Config is one simulation run.
type Config struct {
	Policy    string
	Seed      uint64
	Inflation float64
	// Typical are the demands that define the workload distribution for
	// fragmentation-aware policies: the pod list before inflation.
	Typical []*cluster.Pod
	// Progress, when set, is called now and then with pods done and total.
	Progress func(done, total int)
}

// Point is one point of the allocation curve.
type Point struct {
	ArrivedRatio float64 `json:"arrived_ratio"` // arrived GPU demand / capacity
	AllocRatio   float64 `json:"alloc_ratio"`   // allocated GPU / capacity
}

// Result is what a run measured. JSON names are the CLI's output format.
type Result struct {
	Policy              string   `json:"policy"`
	Seed                uint64   `json:"seed"`
	Inflation           float64  `json:"inflation"`
	Nodes               int      `json:"nodes"`
	GPUs                int      `json:"gpus"`
	PodsArrived         int      `json:"pods_arrived"`
	PodsScheduled       int      `json:"pods_scheduled"`
	PodsFailed          int      `json:"pods_failed"`
	GPUPodsFailed       int      `json:"gpu_pods_failed"`
	GPUMilliCapacity    int64    `json:"gpu_milli_capacity"`
	GPUMilliArrived     int64    `json:"gpu_milli_arrived"`
	GPUMilliAllocated   int64    `json:"gpu_milli_allocated"`
	GPUAllocRatio       float64  `json:"gpu_alloc_ratio"`
	GPUAllocRatioAtFull *float64 `json:"gpu_alloc_ratio_at_full"` // nil when demand never reached capacity
	FragGPUMilli        float64  `json:"frag_gpu_milli"`
	// GPUAllocBound bounds the GPU allocation of any run that places the
	// pods of more than half a GPU that this run placed (gaps.go).
	GPUAllocBound float64 `json:"gpu_alloc_bound"`
	// GPUAllocShareBound bounds the GPU allocation of any run that places
	// the shares of a GPU that this run placed while it still had an idle
	// GPU, which a scheduler that places every pod that fits must place
	// (sharebound.go); nil when its LP failed, ShareBoundError says why.
	GPUAllocShareBound *float64 `json:"gpu_alloc_share_bound"`
	ShareBoundError    string   `json:"share_bound_error,omitempty"`
	// IdleGPUsUntil is the GPU demand arrived, over the capacity, when
	// the run's last idle GPU was taken; nil if a GPU stayed idle.
	IdleGPUsUntil *float64 `json:"idle_gpus_until"`
	// FirstFailedShare is the run's first free share (sim.freeShare)
	// that failed; nil when none did. The place-if-fits cap covers the
	// run only if it found no GPU with room.
	FirstFailedShare *FailedShare `json:"first_failed_share"`
	// Unallocated splits the capacity left free at the end by cause
	// (unallocated.go).
	Unallocated Unallocated `json:"unallocated"`
	WallSeconds float64     `json:"wall_seconds"`
	Curve       []Point     `json:"-"`
}

// FailedShare is a share that fitted no node.
type FailedShare struct {
	// Arrival is its place in the arrivals, from 1; ArrivedRatio the GPU
	// demand arrived before it over the capacity.
	Arrival      int       `json:"arrival"`
	ArrivedRatio float64   `json:"arrived_ratio"`
	Milli        gpu.Milli `json:"milli"`
	// GPURoomLeft says some GPU had room for its compute: CPU or memory
	// stopped it, which the place-if-fits cap assumes never happens.
	GPURoomLeft bool `json:"gpu_room_left"`
}

// Run places the workload's pods in order on the nodes with the policy. It
// stops, returning ctx's error, soon after ctx is done (a signal), instead
// of finishing a policy that may take minutes on a large trace.
func Run(ctx context.Context, nodes []*cluster.Node, workload []*cluster.Pod, c *gpu.Catalogue, cfg Config) (Result, error) {
	start := time.Now()
	res := Result{Policy: cfg.Policy, Seed: cfg.Seed, Inflation: cfg.Inflation, Nodes: len(nodes), PodsArrived: len(workload)}
	states, maxCPU, maxGPU := newStates(nodes)
	for _, n := range nodes {
		res.GPUs += len(n.GPUs)
	}
	capacity := gpu.Milli(res.GPUs) * gpu.WholeGPU
	res.GPUMilliCapacity = int64(capacity)
	if capacity == 0 {
		return res, errors.New("the cluster has no GPUs")
	}

	demands, err := demandsOf(workload, c)
	if err != nil {
		return res, err
	}
	typical, err := typicalWorkload(workload, c, cfg)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5851f42d4c957f2d))
	ties := Ties{Rank: NodeOrder(len(nodes), cfg.Seed)}
	policy, err := placement.New(cfg.Policy, placement.Options{
		Workload:        typical,
		Rand:            rng,
		MaxNodeCPU:      maxCPU,
		MaxNodeGPUMilli: maxGPU,
		GPUsByModel:     placement.CountGPUsByModel(nodes),
	})
	if err != nil {
		return res, err
	}
	observer, _ := policy.(placement.Observer)
	memo := newScoreMemo(len(states), policy)

	t := runTally{res: &res, capacity: capacity, shares: newShareTally(states)}
	t.record()
	for k, d := range demands {
		if k%64 == 0 {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("%s stopped after %d of %d pods: %w", cfg.Policy, k, len(demands), err)
			}
		}
		if cfg.Progress != nil && k%512 == 0 {
			cfg.Progress(k, len(demands))
		}
		idle := t.arrive(d)
		best, a := place(d, states, policy, ties, memo)
		if best < 0 {
			t.fail(k, d, states)
		} else {
			t.placed(d, a, idle, best, states[best])
			if observer != nil {
				observer.Placed(d, states[best])
			}
		}
		t.record()
	}
	if cfg.Progress != nil {
		cfg.Progress(len(demands), len(demands))
	}
	t.finish(states, &typical)
	res.WallSeconds = time.Since(start).Seconds()
	return res, nil
}

// runTally is what Run counts as the pods arrive, into its Result: the
// GPU milli arrived and allocated, the allocation curve, the pods of more
// than half a GPU and the shares placed (for the bounds), and the pods
// that failed.
type runTally struct {
	res                *Result
	capacity           gpu.Milli
	arrived, allocated gpu.Milli
	gaps               gapTally
	shares             *shareTally
	failed             failedTally
	// nextPercent is the next percent of the capacity arrived at which
	// the curve takes a point.
	nextPercent int
}

// arrive counts a pod's arrival; idle says a GPU was idle when it came.
func (t *runTally) arrive(d *placement.Demand) (idle bool) {
	t.arrived += gpu.Milli(d.Devices) * d.PerGPUMilli
	t.gaps.arrived(d)
	return t.shares.arrive(d)
}

// fail counts the k-th pod (from 0), which fits no node; states are the
// nodes' states.
func (t *runTally) fail(k int, d *placement.Demand, states []*placement.NodeState) {
	t.res.PodsFailed++
	if d.Devices > 0 {
		t.res.GPUPodsFailed++
	}
	t.failed.add(d)
	if t.res.FirstFailedShare == nil && freeShare(d) {
		before := t.arrived - d.PerGPUMilli
		t.res.FirstFailedShare = &FailedShare{Arrival: k + 1, ArrivedRatio: float64(before) / float64(t.capacity),
			Milli: d.PerGPUMilli, GPURoomLeft: gpuRoomFor(d.PerGPUMilli, states)}
	}
}

// gpuRoomFor says some GPU has milli free.
func gpuRoomFor(milli gpu.Milli, states []*placement.NodeState) bool {
	for _, s := range states {
		for _, g := range s.GPUs {
			if g.FreeMilli >= milli {
				return true
			}
		}
	}
	return false
}

// placed counts a pod placed with a on the node best, whose state st is
// after it; idle is what arrive said.
func (t *runTally) placed(d *placement.Demand, a placement.Assignment, idle bool, best int, st *placement.NodeState) {
	for _, dev := range a.Devices {
		t.allocated += dev.Milli
	}
	t.res.PodsScheduled++
	t.gaps.placed(d)
	t.shares.placed(d, idle, best, st)
	if idle && t.shares.idle == 0 {
		r := float64(t.arrived) / float64(t.capacity)
		t.res.IdleGPUsUntil = &r
	}
}

// record adds a point to the curve for each percent of the capacity that
// has arrived, and notes the allocation when the demand first reaches the
// capacity.
func (t *runTally) record() {
	res, capacity := t.res, t.capacity
	for float64(t.arrived) >= float64(t.nextPercent)/100*float64(capacity) {
		res.Curve = append(res.Curve, Point{ArrivedRatio: float64(t.nextPercent) / 100, AllocRatio: float64(t.allocated) / float64(capacity)})
		t.nextPercent++
	}
	if res.GPUAllocRatioAtFull == nil && t.arrived >= capacity {
		r := float64(t.allocated) / float64(capacity)
		res.GPUAllocRatioAtFull = &r
	}
}

// finish sets the run's totals: GPU milli arrived and allocated, the
// bounds on the allocation, the capacity left unallocated by cause, and
// the fragmentation of the nodes' states for the typical workload.
func (t *runTally) finish(states []*placement.NodeState, typical *placement.Workload) {
	res, capacity := t.res, t.capacity
	res.GPUMilliArrived = int64(t.arrived)
	res.GPUMilliAllocated = int64(t.allocated)
	res.GPUAllocRatio = float64(t.allocated) / float64(capacity)
	res.GPUAllocBound = 1 - float64(t.gaps.floor())/float64(capacity)
	if floor, err := t.shares.floor(res.GPUs); err != nil {
		res.ShareBoundError = err.Error()
	} else {
		b := 1 - float64(floor)/float64(capacity)
		res.GPUAllocShareBound = &b
	}
	res.Unallocated = unallocatedOf(states, &t.failed)
	for _, s := range states {
		res.FragGPUMilli += placement.Fragmentation(s, typical)
	}
}

// Ties says how Place breaks exact ties between the best nodes.
type Ties struct {
	// Rank, when set, orders the nodes (one entry per state): the node of
	// lowest rank wins.
	Rank []int
	// Rand, used when Rank is nil, picks uniformly at random among the
	// tied nodes; nil means the lowest index wins.
	Rand *rand.Rand
}

// NodeOrder is the simulator's tie order for n nodes and a seed: a random
// permutation drawn once per run. The paper's public simulator keeps the
// lexicographically smallest node name among nodes of equal score, and its
// node names carry a random prefix drawn per seed, so its ties go to a
// fixed random order of the nodes; this is that order.
func NodeOrder(n int, seed uint64) []int {
	return rand.New(rand.NewPCG(seed, 0xda3e39cb94b95bdb)).Perm(n)
}

// Place puts one demand on the node where the policy scores highest among
// those it fits (placement.Fits), breaking ties as ties says, and assigns
// it there. It returns the node's index in states and the assignment, or
// -1 when the demand fits no node. The planner replays its plans with it,
// so a plan is proven by the same step the simulator takes. It prefilters
// the demand over states first, so that the pods placed before it count
// in its topology spread and pod (anti-)affinity.
func Place(d *placement.Demand, states []*placement.NodeState, policy placement.Policy, ties Ties) (int, placement.Assignment) {
	return place(d, states, policy, ties, nil)
}

// place is Place reading and keeping the nodes' answers in memo (nil for
// none).
func place(d *placement.Demand, states []*placement.NodeState, policy placement.Policy, ties Ties, memo *scoreMemo) (int, placement.Assignment) {
	d.PreFilter(states, nil)
	kept := memo.of(d)
	best, bestGPU, tied := -1, -1, 0
	bestScore := math.Inf(-1)
	for i, s := range states {
		var e memoEntry
		if kept != nil && kept[i].version == memo.version[i] {
			e = kept[i]
		} else {
			e.fits = placement.Fits(d, s)
			if e.fits {
				score, g := policy.Score(d, s)
				e.score, e.gpu = score, int32(g)
			}
			if kept != nil {
				e.version = memo.version[i]
				kept[i] = e
			}
		}
		if !e.fits {
			continue
		}
		score, g := e.score, int(e.gpu)
		switch {
		case best < 0 || score > bestScore+1e-9:
			best, bestGPU, bestScore, tied = i, g, score, 1
		case score >= bestScore-1e-9:
			tied++
			if ties.prefer(i, best, tied) {
				best, bestGPU = i, g
			}
		}
	}
	if best < 0 {
		return -1, placement.Assignment{}
	}
	s := states[best]
	var a placement.Assignment
	if bestGPU >= 0 {
		a = placement.AssignmentOn(d, s, []int{bestGPU})
	} else {
		a, _ = placement.Fit(d, s)
	}
	s.Assign(d, a)
	memo.changed(best)
	return best, a
}

// prefer says whether node i, the tied-th node of the best score, replaces
// the best so far.
func (t Ties) prefer(i, best, tied int) bool {
	switch {
	case t.Rank != nil:
		return t.Rank[i] < t.Rank[best]
	case t.Rand != nil:
		return t.Rand.IntN(tied) == 0
	}
	return false
}

// newStates returns the empty state of each node, indexed in order, and
// the largest node's CPU and GPU capacity.
func newStates(nodes []*cluster.Node) ([]*placement.NodeState, gpu.CPUMilli, gpu.Milli) {
	states := make([]*placement.NodeState, len(nodes))
	var maxCPU gpu.CPUMilli
	var maxGPU gpu.Milli
	for i, n := range nodes {
		states[i] = placement.NewNodeState(n)
		states[i].Index = i
		maxCPU = max(maxCPU, n.CPU)
		maxGPU = max(maxGPU, states[i].GPUMilliCapacity())
	}
	return states, maxCPU, maxGPU
}

// typicalWorkload is the task distribution of cfg.Typical, or of the
// workload when that is empty.
func typicalWorkload(workload []*cluster.Pod, c *gpu.Catalogue, cfg Config) (placement.Workload, error) {
	typical := workload
	if len(cfg.Typical) > 0 {
		typical = cfg.Typical
	}
	ds, err := demandsOf(typical, c)
	if err != nil {
		return placement.Workload{}, err
	}
	return placement.NewWorkload(ds, placement.TypicalCoverage), nil
}

// demandsOf prepares each pod's demand, sharing one Demand between pods of
// identical shape would save little; the workload is at most tens of
// thousands of pods.
func demandsOf(pods []*cluster.Pod, c *gpu.Catalogue) ([]*placement.Demand, error) {
	out := make([]*placement.Demand, len(pods))
	for i, p := range pods {
		d, err := placement.NewDemand(p, c)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}
