package diagnose

import (
	"fmt"
	"slices"
	"sort"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// Relayout is a MIG layout of one GPU that offers a slice of the profile a
// pod asks for. Moves are the pods whose running slices it does not keep in
// place (same profile, same start): empty when the re-layout only changes
// idle slices, else the pods to evict first. Keeps are the running slices
// it keeps in place, with their pods.
type Relayout struct {
	Node  string   `json:"node"`
	GPU   int      `json:"gpu"`
	From  string   `json:"from"`
	To    string   `json:"to"`
	Keeps []string `json:"keeps,omitempty"`
	Moves []string `json:"moves,omitempty"`
}

// relayout finds the layout of the MIG GPU g (state st, holders by slice
// index) that adds a slice of the profile and keeps every running slice in
// place if one does; otherwise the one that keeps the most of them in place
// and re-places the rest. Among those it keeps the most idle slices of the
// current layout. It returns the layout too. False when no layout holds
// the running slices and the new one together.
func relayout(g *cluster.GPU, st placement.GPUState, profile string, holders map[int]string) (Relayout, gpu.Layout, bool) {
	geo := g.Model.MIG
	if geo == nil || g.Sharing != cluster.MIG {
		return Relayout{}, nil, false
	}
	if _, ok := geo.Profile(profile); !ok {
		return Relayout{}, nil, false
	}
	var used, idle []int
	for j := range g.Layout {
		if st.UsedSlices&(1<<j) != 0 {
			used = append(used, j)
		} else {
			idle = append(idle, j)
		}
	}
	// Subsets of the running slices to keep in place, the largest first.
	subsets := make([]uint32, 0, 1<<len(used))
	for m := uint32(0); m < 1<<len(used); m++ {
		subsets = append(subsets, m)
	}
	sort.SliceStable(subsets, func(a, b int) bool { return popcount(subsets[a]) > popcount(subsets[b]) })
	bestKept := -1
	var best gpu.Layout
	var bestMoved, bestKeptSlices []int
	for _, m := range subsets {
		kept := popcount(m)
		if kept < bestKept {
			break
		}
		var fixed gpu.Layout
		var toPlace []string
		var moved, keptSlices []int
		for i, j := range used {
			if m&(1<<i) != 0 {
				fixed = append(fixed, g.Layout[j])
				keptSlices = append(keptSlices, j)
			} else {
				toPlace = append(toPlace, g.Layout[j].Profile)
				moved = append(moved, j)
			}
		}
		toPlace = append(toPlace, profile)
		for _, l := range placements(geo, fixed, toPlace) {
			l = keepIdle(geo, l, g.Layout, idle)
			if best == nil || kept > bestKept || sameSlices(l, g.Layout) > sameSlices(best, g.Layout) {
				best, bestKept, bestMoved, bestKeptSlices = l, kept, moved, keptSlices
			}
		}
	}
	if best == nil {
		return Relayout{}, nil, false
	}
	sort.Slice(best, func(a, b int) bool { return best[a].Start < best[b].Start })
	if geo.Validate(best) != nil {
		return Relayout{}, nil, false
	}
	r := Relayout{GPU: g.Index, From: g.Layout.String(), To: best.String()}
	for _, j := range bestKeptSlices {
		sl := g.Layout[j]
		r.Keeps = append(r.Keeps, fmt.Sprintf("%s@%d (%s)", sl.Profile, sl.Start, holders[j]))
	}
	for _, j := range bestMoved {
		if pod, ok := holders[j]; ok {
			r.Moves = append(r.Moves, pod)
		}
	}
	slices.Sort(r.Moves)
	return r, best, true
}

// placements lists every way to add instances of the profiles to the fixed
// slices (at most a few dozen on a 7-slice GPU).
func placements(geo *gpu.MIGGeometry, fixed gpu.Layout, profiles []string) []gpu.Layout {
	var mask uint32
	compute := 0
	for _, s := range fixed {
		p, _ := geo.Profile(s.Profile)
		mask |= slots(s.Start, p.Slots)
		compute += p.Compute
	}
	var out []gpu.Layout
	cur := slices.Clone(fixed)
	var walk func(i int, mask uint32, compute int)
	walk = func(i int, mask uint32, compute int) {
		if i == len(profiles) {
			out = append(out, slices.Clone(cur))
			return
		}
		p, _ := geo.Profile(profiles[i])
		if compute+p.Compute > geo.ComputeSlices {
			return
		}
		for _, start := range p.Starts {
			m := slots(start, p.Slots)
			if mask&m != 0 {
				continue
			}
			cur = append(cur, gpu.Slice{Profile: p.Name, Start: start})
			walk(i+1, mask|m, compute+p.Compute)
			cur = cur[:len(cur)-1]
		}
	}
	walk(0, mask, compute)
	return out
}

// keepIdle adds back, in layout order, the idle slices of the current
// layout that still fit beside the new one.
func keepIdle(geo *gpu.MIGGeometry, l, current gpu.Layout, idle []int) gpu.Layout {
	var mask uint32
	compute := 0
	for _, s := range l {
		p, _ := geo.Profile(s.Profile)
		mask |= slots(s.Start, p.Slots)
		compute += p.Compute
	}
	for _, j := range idle {
		s := current[j]
		p, _ := geo.Profile(s.Profile)
		m := slots(s.Start, p.Slots)
		if mask&m == 0 && compute+p.Compute <= geo.ComputeSlices {
			l = append(l, s)
			mask |= m
			compute += p.Compute
		}
	}
	return l
}

// sameSlices counts the slices of l that the current layout has in place.
func sameSlices(l, current gpu.Layout) int {
	n := 0
	for _, s := range l {
		if slices.Contains(current, s) {
			n++
		}
	}
	return n
}

func slots(start, n int) uint32 { return ((1 << n) - 1) << start }

func popcount(m uint32) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// relayouts lists the re-layouts of the MIG GPUs on the nodes that offer
// the pod's profile, at most MaxListed, with their layouts.
func (e *engine) relayouts(idx []int, p *cluster.Pod) ([]Relayout, []gpu.Layout) {
	var out []Relayout
	var layouts []gpu.Layout
	for _, i := range idx {
		node := e.s.Nodes[i]
		for gi := range node.GPUs {
			if len(out) == MaxListed {
				return out, layouts
			}
			holders := map[int]string{}
			for _, q := range e.holders[i] {
				for _, d := range q.Devices {
					if d.GPU == gi && d.Slice >= 0 {
						holders[d.Slice] = q.Key()
					}
				}
			}
			if r, l, ok := relayout(&node.GPUs[gi], e.states[i].GPUs[gi], p.GPU.Profile, holders); ok {
				r.Node, r.GPU = node.Name, gi
				out = append(out, r)
				layouts = append(layouts, l)
			}
		}
	}
	return out, layouts
}

// migLayout: the pod asks for a MIG profile that no GPU's layout offers
// free, and a re-layout would: the node's configuration, so placement.
func (e *engine) migLayout(f *Finding, p *cluster.Pod, ks []int) {
	f.Cause = Placement
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	f.Evidence.GPUs, f.Evidence.GPUModels = usableGPUs(p, e.nodeList(idx))
	relayouts, layouts := e.relayouts(idx, p)
	f.Evidence.Relayouts = relayouts
	nodes := map[string]*cluster.Node{}
	for _, i := range idx {
		nodes[e.s.Nodes[i].Name] = e.s.Nodes[i]
	}
	var inPlace, moving []string
	var inPlaceRemedies, movingRemedies []Remedy
	for k, r := range relayouts {
		change := fmt.Sprintf("%s/gpu%d: %s -> %s", r.Node, r.GPU, r.From, r.To)
		remedy := relayoutRemedy(nodes[r.Node], r, layouts[k], p.GPU.Profile)
		if len(r.Moves) == 0 {
			inPlace = append(inPlace, change)
			inPlaceRemedies = append(inPlaceRemedies, remedy)
		} else {
			moving = append(moving, fmt.Sprintf("%s (evict %s first)", change, JoinNames(r.Moves, len(r.Moves))))
			movingRemedies = append(movingRemedies, remedy)
		}
	}
	if len(inPlace) > 0 {
		f.addFix(fmt.Sprintf("re-lay out MIG so that a %s slice exists, keeping every running slice in place (same profile, same start), so no pod needs another slice: %s", p.GPU.Profile, JoinNames(inPlace, len(inPlace))), inPlaceRemedies...)
	}
	if len(moving) > 0 && len(inPlace) == 0 {
		f.addFix(fmt.Sprintf("re-lay out MIG so that a %s slice exists; no layout keeps every running slice in place, so the pods whose slices move must be evicted: %s", p.GPU.Profile, JoinNames(moving, len(moving))), movingRemedies...)
	}
}

// hasRelayout reports whether a MIG GPU of the nodes can be re-laid out to
// offer the pod's profile.
func (e *engine) hasRelayout(idx []int, p *cluster.Pod) bool {
	rs, _ := e.relayouts(idx, p)
	return len(rs) > 0
}
