package plan

import (
	"fmt"
	"sort"
	"sync"

	"github.com/gpupack/gpupack/gpu"
)

// MIGPacking is a set of MIG instances packed onto GPUs of one model.
type MIGPacking struct {
	// Layouts has one valid layout per GPU used.
	Layouts []gpu.Layout
	// Placed[i] is where instance i of the input went: the GPU (index in
	// Layouts) and the slice (index in that layout).
	Placed []SlicePlace
	// LowerBound is the largest of the lower bounds on the GPUs needed:
	// AreaBound, and for each profile its count over the most instances of
	// it one GPU holds, and the count of instances that take more than half
	// of a GPU's compute or memory (no two of those share a GPU).
	LowerBound int
	// AreaBound is max(sum of compute slices / slices per GPU, sum of memory
	// slots / slots per GPU), rounded up.
	AreaBound int
	// FirstFitDecreasing is the GPUs that first-fit-decreasing needs; the
	// solver never uses more.
	FirstFitDecreasing int
	// Optimal is true when the packing is proven to use the fewest GPUs:
	// it meets LowerBound, or the search exhausted every better packing.
	Optimal bool
}

// Gap is the GPUs used beyond the lower bound; 0 means optimal.
func (p MIGPacking) Gap() int { return len(p.Layouts) - p.LowerBound }

// SlicePlace says on which GPU and slice of a packing an instance sits.
type SlicePlace struct {
	GPU   int
	Slice int
}

// migSearchBudget bounds the branch-and-bound search, in nodes visited. The
// search stops at the lower bound, which random instances meet almost
// always, so the budget only matters where the bound is not tight.
const migSearchBudget = 200_000

// PackMIG packs one MIG instance per entry of profiles onto as few GPUs of
// the geometry as it can: first-fit-decreasing and a greedy choice of whole
// GPU layouts give a first packing, then a branch-and-bound search over the
// geometry's maximal layouts closes the gap to the lower bound or proves
// there is none. Unknown profiles are an error.
func PackMIG(g *gpu.MIGGeometry, profiles []string) (MIGPacking, error) {
	idx := make(map[string]int, len(g.Profiles))
	for i, p := range g.Profiles {
		idx[p.Name] = i
	}
	items := make([]int, len(profiles))
	demand := make(vec, len(g.Profiles))
	for i, name := range profiles {
		k, ok := idx[name]
		if !ok {
			return MIGPacking{}, fmt.Errorf("MIG profile %q does not exist on this model (valid: %v)", name, g.ProfileNames())
		}
		items[i] = k
		demand[k]++
	}
	t := tablesFor(g)
	out := MIGPacking{AreaBound: t.areaBound(demand), LowerBound: t.lowerBound(demand)}

	ffd := t.firstFitDecreasing(demand)
	out.FirstFitDecreasing = len(ffd)
	best := ffd
	if greedy := t.greedy(demand); len(greedy) < len(best) {
		best = greedy
	}
	out.Optimal = len(best) <= out.LowerBound
	if !out.Optimal {
		s := &search{t: t, best: best, bound: out.LowerBound, seen: map[string]int{}}
		s.walk(0, demand, nil)
		best = s.best
		out.Optimal = s.nodes < migSearchBudget || len(best) <= out.LowerBound
	}

	// Turn per-GPU counts into layouts and hand the instances out.
	next := make([][]SlicePlace, len(g.Profiles))
	for gi, counts := range best {
		var names []string
		for k, n := range counts {
			for range n {
				names = append(names, g.Profiles[k].Name)
			}
		}
		layout, err := g.Fit(names)
		if err != nil {
			return MIGPacking{}, fmt.Errorf("internal error: packed GPU %d does not fit: %v", gi, err)
		}
		out.Layouts = append(out.Layouts, layout)
		for si, sl := range layout {
			k := idx[sl.Profile]
			next[k] = append(next[k], SlicePlace{GPU: gi, Slice: si})
		}
	}
	out.Placed = make([]SlicePlace, len(items))
	for i, k := range items {
		out.Placed[i] = next[k][0]
		next[k] = next[k][1:]
	}
	return out, nil
}

// vec counts instances per profile, indexed like MIGGeometry.Profiles.
type vec []int

func (v vec) key() string {
	b := make([]byte, 0, 2*len(v))
	for _, n := range v {
		b = append(b, byte(n), byte(n>>8))
	}
	return string(b)
}

func (v vec) zero() bool {
	for _, n := range v {
		if n != 0 {
			return false
		}
	}
	return true
}

// tables are what the solver precomputes once per geometry.
type tables struct {
	g *gpu.MIGGeometry
	// patterns are the distinct per-profile counts of the maximal layouts,
	// none dominated by another, most GPU-filling first.
	patterns []vec
	// most[k] is the most instances of profile k that one GPU holds.
	most []int
	// big[k] is true for profiles taking more than half the compute or
	// more than half the memory slots.
	bigCompute, bigSlots []bool
	mu                   sync.Mutex
	fits                 map[string]bool
}

var tableCache sync.Map // *gpu.MIGGeometry -> *tables

func tablesFor(g *gpu.MIGGeometry) *tables {
	if t, ok := tableCache.Load(g); ok {
		return t.(*tables)
	}
	t := &tables{g: g, most: make([]int, len(g.Profiles)), fits: map[string]bool{}}
	seen := map[string]bool{}
	var all []vec
	for _, l := range g.MaximalLayouts() {
		v := make(vec, len(g.Profiles))
		for _, s := range l {
			for k, p := range g.Profiles {
				if p.Name == s.Profile {
					v[k]++
				}
			}
		}
		if !seen[v.key()] {
			seen[v.key()] = true
			all = append(all, v)
		}
	}
	for i, v := range all {
		dominated := false
		for j, w := range all {
			if i != j && dominates(w, v) && (!dominates(v, w) || j < i) {
				dominated = true
				break
			}
		}
		if !dominated {
			t.patterns = append(t.patterns, v)
		}
		for k, n := range v {
			t.most[k] = max(t.most[k], n)
		}
	}
	weight := func(v vec) float64 {
		w := 0.0
		for k, n := range v {
			w += float64(n) * t.weight(k)
		}
		return w
	}
	sort.SliceStable(t.patterns, func(i, j int) bool { return weight(t.patterns[i]) > weight(t.patterns[j]) })
	for _, p := range g.Profiles {
		t.bigCompute = append(t.bigCompute, 2*p.Compute > g.ComputeSlices)
		t.bigSlots = append(t.bigSlots, 2*p.Slots > g.MemorySlots)
	}
	actual, _ := tableCache.LoadOrStore(g, t)
	return actual.(*tables)
}

func dominates(w, v vec) bool {
	for k := range v {
		if w[k] < v[k] {
			return false
		}
	}
	return true
}

// weight is how much of a GPU one instance of profile k takes, counting
// compute and memory alike.
func (t *tables) weight(k int) float64 {
	p := t.g.Profiles[k]
	return float64(p.Compute)/float64(t.g.ComputeSlices) + float64(p.Slots)/float64(t.g.MemorySlots)
}

func (t *tables) areaBound(d vec) int {
	compute, slots := 0, 0
	for k, n := range d {
		compute += n * t.g.Profiles[k].Compute
		slots += n * t.g.Profiles[k].Slots
	}
	return max(ceilDiv(compute, t.g.ComputeSlices), ceilDiv(slots, t.g.MemorySlots))
}

func (t *tables) lowerBound(d vec) int {
	lb := t.areaBound(d)
	bigC, bigS := 0, 0
	for k, n := range d {
		if n == 0 {
			continue
		}
		lb = max(lb, ceilDiv(n, t.most[k]))
		if t.bigCompute[k] {
			bigC += n
		}
		if t.bigSlots[k] {
			bigS += n
		}
	}
	return max(lb, bigC, bigS)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// canHold reports whether one GPU holds the counts together (exact, memoised).
func (t *tables) canHold(v vec) bool {
	k := v.key()
	t.mu.Lock()
	ok, done := t.fits[k]
	t.mu.Unlock()
	if done {
		return ok
	}
	ok = false
	for _, p := range t.patterns {
		if dominates(p, v) {
			ok = true
			break
		}
	}
	t.mu.Lock()
	t.fits[k] = ok
	t.mu.Unlock()
	return ok
}

// firstFitDecreasing places instances largest first (memory slots, then
// compute) on the first GPU that still holds them.
func (t *tables) firstFitDecreasing(d vec) []vec {
	order := make([]int, len(d))
	for k := range order {
		order[k] = k
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := t.g.Profiles[order[i]], t.g.Profiles[order[j]]
		if a.Slots != b.Slots {
			return a.Slots > b.Slots
		}
		return a.Compute > b.Compute
	})
	var gpus []vec
	for _, k := range order {
		for range d[k] {
			placed := false
			for _, g := range gpus {
				g[k]++
				if t.canHold(g) {
					placed = true
					break
				}
				g[k]--
			}
			if !placed {
				g := make(vec, len(d))
				g[k] = 1
				gpus = append(gpus, g)
			}
		}
	}
	return gpus
}

// greedy fills one GPU at a time with the maximal layout that packs the
// most weight of what remains.
func (t *tables) greedy(d vec) []vec {
	rem := append(vec(nil), d...)
	var gpus []vec
	for !rem.zero() {
		var best vec
		bestW := -1.0
		for _, p := range t.patterns {
			take := truncate(p, rem)
			w := 0.0
			for k, n := range take {
				w += float64(n) * t.weight(k)
			}
			if w > bestW+1e-12 {
				best, bestW = take, w
			}
		}
		for k, n := range best {
			rem[k] -= n
		}
		gpus = append(gpus, best)
	}
	return gpus
}

func truncate(p, rem vec) vec {
	out := make(vec, len(p))
	for k := range p {
		out[k] = min(p[k], rem[k])
	}
	return out
}

// search is a branch and bound over multisets of maximal layouts: a set of
// GPUs covers the demand if the sum of their layouts' counts does, since
// any subset of a layout's instances is itself a valid layout. Patterns
// are taken in non-decreasing index order, so each multiset is seen once.
type search struct {
	t     *tables
	best  []vec
	bound int
	nodes int
	seen  map[string]int // remaining demand and first pattern -> fewest GPUs used reaching it
}

func (s *search) walk(from int, rem vec, used []vec) {
	if len(s.best) <= s.bound || s.nodes >= migSearchBudget {
		return
	}
	s.nodes++
	if rem.zero() {
		s.best = append([]vec(nil), used...)
		return
	}
	if len(used)+s.t.lowerBound(rem) >= len(s.best) {
		return
	}
	k := rem.key() + string(rune(from))
	if n, ok := s.seen[k]; ok && n <= len(used) {
		return
	}
	s.seen[k] = len(used)
	for i := from; i < len(s.t.patterns); i++ {
		take := truncate(s.t.patterns[i], rem)
		if take.zero() {
			continue
		}
		next := make(vec, len(rem))
		for j := range rem {
			next[j] = rem[j] - take[j]
		}
		s.walk(i, next, append(used, take))
	}
}
