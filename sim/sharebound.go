package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// shareTally bounds what a run could have allocated, given the GPU shares
// (pods of less than a GPU) that it placed while it still had an idle GPU:
// the shares that a scheduler which places every pod that fits is least
// free to turn away, since while a GPU is idle a share fits on it unless
// the node's CPU, memory or GPU model rules it out. Each share leaves its
// GPU's rest to other shares only, so the shares' sizes decide how much of
// their GPUs stays free: two 470-milli pods leave 60 milli that no pod of
// the trace fits, an 810-milli pod leaves 190 that only the trace's few
// pods of 50-160 milli fit.
//
// The least free capacity over every packing of at least those shares (and
// at most every share of each size that arrived) is a bin-packing problem;
// its configuration LP (Gilmore and Gomory: a variable per way of filling
// one GPU with shares, a row per size; lp.go's simplex, its floor
// certified by the dual) gives a floor under it, so 1 - floor/capacity
// bounds the GPU allocation of any placement that places them. Like
// gapTally it ignores CPU, memory and GPU models, and a share of a
// multi-GPU pod counts as that many single shares: each relaxation only
// lowers the floor, so the bound stays a bound.
type shareTally struct {
	// arrived counts the arrived shares by size in milli; forced the
	// shares placed while an idle GPU remained.
	arrived, forced map[gpu.Milli]int64
	// idle is the run's idle GPUs now, idleOn the idle GPUs of each node.
	idle   int
	idleOn []int
}

// newShareTally starts a tally on the run's states, all GPUs idle.
func newShareTally(states []*placement.NodeState) *shareTally {
	t := &shareTally{arrived: map[gpu.Milli]int64{}, forced: map[gpu.Milli]int64{}, idleOn: make([]int, len(states))}
	for i, s := range states {
		t.idleOn[i] = idleGPUs(s)
		t.idle += t.idleOn[i]
	}
	return t
}

func idleGPUs(s *placement.NodeState) int {
	n := 0
	for _, g := range s.GPUs {
		if g.FreeMilli == gpu.WholeGPU {
			n++
		}
	}
	return n
}

// isShare says a demand is one or more shares of less than a GPU each.
func isShare(d *placement.Demand) bool {
	return d.Devices > 0 && d.PerGPUMilli > 0 && d.PerGPUMilli < gpu.WholeGPU
}

// arrive counts an arriving pod's shares; idle says whether the run had an
// idle GPU when it arrived (call it before placing the pod).
func (t *shareTally) arrive(d *placement.Demand) (idle bool) {
	if isShare(d) {
		t.arrived[d.PerGPUMilli] += int64(d.Devices)
	}
	return t.idle > 0
}

// placed counts a placed pod's shares as forced if the run had an idle GPU
// when it arrived, and updates the idle GPUs of the node it went to.
func (t *shareTally) placed(d *placement.Demand, idleAtArrival bool, node int, s *placement.NodeState) {
	if isShare(d) && idleAtArrival {
		t.forced[d.PerGPUMilli] += int64(d.Devices)
	}
	n := idleGPUs(s)
	t.idle += n - t.idleOn[node]
	t.idleOn[node] = n
}

// maxPatterns caps the ways of filling a GPU that the LP enumerates. The
// openb traces' 20 share sizes make about 7,000; a trace of many more
// sizes is read on a coarser grid (shareGrids) until it fits.
const maxPatterns = 20000

// shareGrids are the grids, in milli, on which the shares are read, finest
// first.
var shareGrids = []gpu.Milli{1, 10, 20, 50, 100, 250}

// floor is the least free capacity, in milli-GPUs, that any packing of at
// least the forced shares into gpus GPUs leaves on the GPUs that hold them,
// by the configuration LP, whole-GPU pods filling every other GPU. It is 0
// when no share is forced.
func (t *shareTally) floor(gpus int) (gpu.Milli, error) {
	if len(t.forced) == 0 {
		return 0, nil
	}
	return leastFree(t.arrived, t.forced, gpus, int64(gpus))
}

// leastFree is the least free capacity, in milli-GPUs, over every packing
// into gpus GPUs of at least the forced shares and at most the arrived
// ones (by size), beside at most whole GPUs of whole-GPU pods, by the
// configuration LP: a floor under every real packing's.
func leastFree(arrived, forced map[gpu.Milli]int64, gpus int, whole int64) (gpu.Milli, error) {
	for _, grid := range shareGrids {
		classes, fluid := classesOf(arrived, forced, grid)
		pats, ok := patterns(classes, maxPatterns)
		if !ok {
			continue
		}
		w, err := minWaste(classes, pats, gpus, whole)
		if err != nil {
			return 0, fmt.Errorf("the share bound's LP (%d sizes, %d ways to fill a GPU): %w", len(classes), len(pats), err)
		}
		// A real packing leaves whole milli free, at least the LP's
		// floor: its ceiling (less a hair for the floor's own rounding).
		return gpu.Milli(max(0, math.Ceil(w-float64(fluid)-1e-6))), nil
	}
	return 0, errors.New("the share bound: too many share sizes even on a 250-milli grid")
}

// shareClass is the shares whose size rounds down to lo on the LP's grid:
// a way to fill a GPU is feasible when its classes' lo sum to at most a
// GPU (which admits every real packing, and more), and it leaves free at
// least a GPU less its classes' hi (the largest real size in each), so
// the LP's least free capacity never exceeds a real packing's.
type shareClass struct {
	lo, hi          gpu.Milli
	arrived, forced int64
}

// classesOf groups the shares on the grid. Shares smaller than the grid
// are left out and returned as fluid, their arrived milli summed: they
// could fill any free capacity, so the floor without them, less fluid,
// is still a floor (the forced ones among them only relax it).
func classesOf(arrived, forced map[gpu.Milli]int64, grid gpu.Milli) ([]shareClass, int64) {
	byLo := map[gpu.Milli]*shareClass{}
	var fluid int64
	for size, n := range arrived {
		lo := size / grid * grid
		if lo == 0 {
			fluid += int64(size) * n
			continue
		}
		c := byLo[lo]
		if c == nil {
			c = &shareClass{lo: lo}
			byLo[lo] = c
		}
		c.hi = max(c.hi, size)
		c.arrived += n
		c.forced += forced[size]
	}
	out := make([]shareClass, 0, len(byLo))
	for _, c := range byLo {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b shareClass) int { return int(a.lo) - int(b.lo) })
	return out, fluid
}

// patterns lists every non-empty way of filling one GPU with the classes
// (counts per class, their lo summing to at most a GPU), or says no once
// there are more than limit.
func patterns(classes []shareClass, limit int) ([][]int32, bool) {
	var out [][]int32
	cur := make([]int32, len(classes))
	var walk func(i int, room gpu.Milli) bool
	walk = func(i int, room gpu.Milli) bool {
		for j := i; j < len(classes); j++ {
			if classes[j].lo > room {
				continue
			}
			if len(out) == limit {
				return false
			}
			cur[j]++
			out = append(out, slices.Clone(cur))
			ok := walk(j, room-classes[j].lo)
			cur[j]--
			if !ok {
				return false
			}
		}
		return true
	}
	if !walk(0, gpu.WholeGPU) {
		return nil, false
	}
	return out, true
}

// minWaste solves the configuration LP: x_p >= 0 GPUs filled the way p
// and x_w GPUs held by whole-GPU pods, maximising the allocation
// sum_p x_p min(1000, hi(p)) + 1000 x_w, such that each class has at
// least its forced shares and at most its arrived ones, x_w is at most
// whole and every GPU is used once at most. It returns the free capacity
// that leaves, 1000 gpus less lpFloor's certified floor under the
// negated allocation: a floor under every real packing's free capacity.
// With whole at gpus (whole-GPU pods enough to fill every GPU) it is the
// free capacity on the GPUs that hold shares. In standard form (min c'x,
// Ax = b, x >= 0) each inequality gets a slack column.
func minWaste(classes []shareClass, pats [][]int32, gpus int, whole int64) (float64, error) {
	m, n := len(classes), len(pats)
	rows, cols := 2*m+2, n+2*m+3
	a := make([][]float64, rows)
	for i := range a {
		a[i] = make([]float64, cols)
	}
	b := make([]float64, rows)
	c := make([]float64, cols)
	for j, p := range pats {
		var hi gpu.Milli
		for k, cnt := range p {
			if cnt == 0 {
				continue
			}
			hi += gpu.Milli(cnt) * classes[k].hi
			a[k][j] = float64(cnt)
			a[m+k][j] = float64(cnt)
		}
		a[2*m][j] = 1
		c[j] = -float64(min(gpu.WholeGPU, hi))
	}
	// Every variable is at most ub: a way of filling at most the GPUs, a
	// slack or surplus at most a class's arrivals or the GPUs.
	ub := float64(gpus)
	for k, cl := range classes {
		a[k][n+k] = -1 // at least the forced: sum - surplus = forced
		b[k] = float64(cl.forced)
		a[m+k][n+m+k] = 1 // at most the arrived: sum + slack = arrived
		b[m+k] = float64(cl.arrived)
		ub = max(ub, float64(cl.arrived))
	}
	w := n + 2*m // the GPUs of whole-GPU pods: at most whole
	a[2*m][w], a[2*m+1][w] = 1, 1
	c[w] = -float64(gpu.WholeGPU)
	a[2*m][w+1] = 1 // at most the cluster's GPUs
	b[2*m] = float64(gpus)
	a[2*m+1][w+2] = 1
	b[2*m+1] = float64(min(whole, int64(gpus)))
	floor, err := lpFloor(a, b, c, ub, maxPivots)
	return float64(gpus)*float64(gpu.WholeGPU) + floor, err
}

// maxPivots bounds the simplex's work: the openb LPs take a few hundred
// pivots.
const maxPivots = 20000

// ShareRefusal is where a target allocation forces a policy to leave a
// share unplaced: placing every share among the first Arrivals pods of
// the sequence (placed or not, in order) bounds any placement's GPU
// allocation below the target, so a policy that reaches it must leave one
// of those shares unplaced, turned away or fitting nowhere (a policy
// that places each pod that fits can get there without turning one away:
// PlaceIfFitsCap bounds those). ArrivedRatio is the GPU demand of those
// arrivals over the capacity.
type ShareRefusal struct {
	Arrivals     int     `json:"arrivals"`
	ArrivedRatio float64 `json:"arrived_ratio"`
	// Bound is the share bound with those shares placed, below the target.
	Bound float64 `json:"bound"`
}

// shareSequence is a workload's arrivals read for the share bound.
type shareSequence struct {
	ds       []*placement.Demand
	gpus     int
	capacity float64
	// all counts every share of the workload by size: any of them may
	// be placed beside the forced ones.
	all map[gpu.Milli]int64
}

func newShareSequence(nodes []*cluster.Node, workload []*cluster.Pod, c *gpu.Catalogue) (*shareSequence, error) {
	ds, err := demandsOf(workload, c)
	if err != nil {
		return nil, err
	}
	q := &shareSequence{ds: ds, all: map[gpu.Milli]int64{}}
	for _, n := range nodes {
		q.gpus += len(n.GPUs)
	}
	if q.gpus == 0 {
		return nil, errors.New("the cluster has no GPUs")
	}
	q.capacity = float64(q.gpus) * float64(gpu.WholeGPU)
	for _, d := range ds {
		if isShare(d) {
			q.all[d.PerGPUMilli] += int64(d.Devices)
		}
	}
	return q, nil
}

// bound is the share bound with every share among the first k arrivals
// placed; errInfeasible when they do not all fit on the cluster's GPUs at
// all, as on a trace of more large shares than GPUs.
func (q *shareSequence) bound(k int) (float64, error) {
	forced := map[gpu.Milli]int64{}
	for _, d := range q.ds[:k] {
		if isShare(d) {
			forced[d.PerGPUMilli] += int64(d.Devices)
		}
	}
	f, err := (&shareTally{arrived: q.all, forced: forced}).floor(q.gpus)
	if err != nil {
		return 0, err
	}
	return 1 - float64(f)/q.capacity, nil
}

// refusalBound is bound for RefusalPoint: shares that cannot all be placed
// force a refusal whatever the target, as a bound of 0 says.
func (q *shareSequence) refusalBound(k int) (float64, error) {
	b, err := q.bound(k)
	if errors.Is(err, errInfeasible) {
		return 0, nil
	}
	return b, err
}

// arrivedRatio is the GPU demand of the first k arrivals over the capacity.
func (q *shareSequence) arrivedRatio(k int) float64 {
	var arrived float64
	for _, d := range q.ds[:k] {
		arrived += float64(d.Devices) * float64(d.PerGPUMilli)
	}
	return arrived / q.capacity
}

// PrefixShareBound bounds the GPU allocation of any placement of the
// workload on the nodes that places every share among the arrivals before
// their GPU demand passed ratio of the capacity (the LP of shareTally,
// every share of the workload allowed beside them). It fails, with no
// bound, when those shares cannot all be placed on the cluster's GPUs
// however they are packed: no placement places them, so none is bounded.
func PrefixShareBound(nodes []*cluster.Node, workload []*cluster.Pod, c *gpu.Catalogue, ratio float64) (float64, error) {
	q, err := newShareSequence(nodes, workload, c)
	if err != nil {
		return 0, err
	}
	k := 0
	for arrived := 0.0; k < len(q.ds); k++ {
		d := q.ds[k]
		arrived += float64(d.Devices) * float64(d.PerGPUMilli)
		if arrived > ratio*q.capacity {
			break
		}
	}
	b, err := q.bound(k)
	if errors.Is(err, errInfeasible) {
		shares := 0
		for _, d := range q.ds[:k] {
			if isShare(d) {
				shares += d.Devices
			}
		}
		return 0, fmt.Errorf("the %d shares (pods of less than a GPU) arriving before GPU demand reaches %.0f%% of capacity do not fit on the cluster's %d GPUs however they are packed, so every placement turns some away and none is bounded", shares, 100*ratio, q.gpus)
	}
	return b, err
}

// RefusalPoint finds the fewest leading arrivals of the workload whose
// shares, all placed, bound the GPU allocation on the nodes below target
// (the LP of shareTally, every share of the workload allowed beside
// them). It returns nil when even placing every share of the workload
// leaves the bound at or above target: no refusal is forced.
func RefusalPoint(nodes []*cluster.Node, workload []*cluster.Pod, c *gpu.Catalogue, target float64) (*ShareRefusal, error) {
	q, err := newShareSequence(nodes, workload, c)
	if err != nil {
		return nil, err
	}
	// The bound falls as k grows (more shares forced): search for the
	// first k below target.
	b, err := q.refusalBound(len(q.ds))
	if err != nil || b >= target {
		return nil, err
	}
	lo, hi, bHi := 0, len(q.ds), b
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		b, err := q.refusalBound(mid)
		if err != nil {
			return nil, err
		}
		if b < target {
			hi, bHi = mid, b
		} else {
			lo = mid
		}
	}
	return &ShareRefusal{Arrivals: hi, ArrivedRatio: q.arrivedRatio(hi), Bound: bHi}, nil
}
