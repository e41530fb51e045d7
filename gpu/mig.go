package gpu

import (
	"fmt"
	"sort"
	"strings"
)

// Profile is one MIG profile of a GPU model, such as "3g.40gb".
//
// A MIG-capable GPU is cut into MemorySlots memory slots and ComputeSlices
// compute slices (8 and 7 on A100, H100 and H200). A profile instance takes
// Slots consecutive memory slots from one of its Starts and Compute slices.
type Profile struct {
	Name    string
	Compute int   // compute slices taken
	Slots   int   // consecutive memory slots taken
	Memory  MiB   // framebuffer of one instance
	Starts  []int // memory slots at which an instance may begin
}

// MIGGeometry describes how a MIG-capable model may be partitioned.
type MIGGeometry struct {
	MemorySlots   int
	ComputeSlices int
	Profiles      []Profile
}

// Profile returns the named profile, or false when this model has none.
func (g *MIGGeometry) Profile(name string) (Profile, bool) {
	for _, p := range g.Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// ProfileNames lists the model's profiles, smallest first.
func (g *MIGGeometry) ProfileNames() []string {
	names := make([]string, len(g.Profiles))
	for i, p := range g.Profiles {
		names[i] = p.Name
	}
	return names
}

// Slice is one MIG instance placed on a GPU.
type Slice struct {
	Profile string
	Start   int // first memory slot
}

// Layout is a set of MIG instances on one GPU, ordered by start slot.
type Layout []Slice

// String prints a layout as "1g.10gb@0,3g.40gb@4".
func (l Layout) String() string {
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = fmt.Sprintf("%s@%d", s.Profile, s.Start)
	}
	return strings.Join(parts, ",")
}

// Counts returns how many instances of each profile the layout holds.
func (l Layout) Counts() map[string]int {
	counts := make(map[string]int, len(l))
	for _, s := range l {
		counts[s.Profile]++
	}
	return counts
}

// Validate checks that every slice of the layout is a profile of this
// geometry at one of its valid starts, that no two slices share a memory
// slot, and that the compute slices add up to at most ComputeSlices.
func (g *MIGGeometry) Validate(l Layout) error {
	var used uint32
	compute := 0
	for _, s := range l {
		p, ok := g.Profile(s.Profile)
		if !ok {
			return fmt.Errorf("MIG profile %q does not exist on this model (valid: %s)", s.Profile, strings.Join(g.ProfileNames(), ", "))
		}
		if !contains(p.Starts, s.Start) {
			return fmt.Errorf("MIG profile %s cannot start at memory slot %d (valid starts: %v)", p.Name, s.Start, p.Starts)
		}
		mask := slotMask(s.Start, p.Slots)
		if used&mask != 0 {
			return fmt.Errorf("MIG slice %s@%d overlaps another slice", p.Name, s.Start)
		}
		used |= mask
		compute += p.Compute
	}
	if compute > g.ComputeSlices {
		return fmt.Errorf("MIG layout %s needs %d compute slices, the GPU has %d", l, compute, g.ComputeSlices)
	}
	return nil
}

// Fit says whether instances of the given profiles fit together on one GPU,
// and if so returns one placement of them. The search is exact: when Fit
// reports false, no placement exists.
func (g *MIGGeometry) Fit(profiles []string) (Layout, error) {
	ps := make([]Profile, len(profiles))
	compute := 0
	slots := 0
	for i, name := range profiles {
		p, ok := g.Profile(name)
		if !ok {
			return nil, fmt.Errorf("MIG profile %q does not exist on this model (valid: %s)", name, strings.Join(g.ProfileNames(), ", "))
		}
		ps[i] = p
		compute += p.Compute
		slots += p.Slots
	}
	if compute > g.ComputeSlices {
		return nil, fmt.Errorf("profiles %s need %d compute slices, the GPU has %d", strings.Join(profiles, ", "), compute, g.ComputeSlices)
	}
	if slots > g.MemorySlots {
		return nil, fmt.Errorf("profiles %s need %d memory slots, the GPU has %d", strings.Join(profiles, ", "), slots, g.MemorySlots)
	}
	// Place the largest first: it has the fewest valid starts.
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Slots > ps[j].Slots })
	layout := make(Layout, len(ps))
	if !placeAll(ps, 0, 0, layout) {
		return nil, fmt.Errorf("profiles %s fit the GPU's totals but no placement of them exists", strings.Join(profiles, ", "))
	}
	sort.Slice(layout, func(i, j int) bool { return layout[i].Start < layout[j].Start })
	return layout, nil
}

func placeAll(ps []Profile, i int, used uint32, layout Layout) bool {
	if i == len(ps) {
		return true
	}
	for _, start := range ps[i].Starts {
		mask := slotMask(start, ps[i].Slots)
		if used&mask != 0 {
			continue
		}
		layout[i] = Slice{Profile: ps[i].Name, Start: start}
		if placeAll(ps, i+1, used|mask, layout) {
			return true
		}
	}
	return false
}

// MaximalLayouts enumerates every valid layout to which no further instance
// can be added, each ordered by start slot. Layouts that differ only in where
// the same profiles sit are listed separately, since placement matters when
// slices are created one at a time.
func (g *MIGGeometry) MaximalLayouts() []Layout {
	type placement struct {
		p     Profile
		start int
		mask  uint32
	}
	var all []placement
	for _, p := range g.Profiles {
		for _, s := range p.Starts {
			all = append(all, placement{p, s, slotMask(s, p.Slots)})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].start < all[j].start })

	var out []Layout
	var cur Layout
	canAdd := func(used uint32, compute int) bool {
		for _, pl := range all {
			if used&pl.mask == 0 && compute+pl.p.Compute <= g.ComputeSlices {
				return true
			}
		}
		return false
	}
	// Choose placements in increasing index order so each set is seen once.
	var walk func(from int, used uint32, compute int)
	walk = func(from int, used uint32, compute int) {
		if !canAdd(used, compute) {
			out = append(out, append(Layout(nil), cur...))
			return
		}
		for i := from; i < len(all); i++ {
			pl := all[i]
			if used&pl.mask != 0 || compute+pl.p.Compute > g.ComputeSlices {
				continue
			}
			cur = append(cur, Slice{Profile: pl.p.Name, Start: pl.start})
			walk(i+1, used|pl.mask, compute+pl.p.Compute)
			cur = cur[:len(cur)-1]
		}
	}
	walk(0, 0, 0)
	return out
}

func slotMask(start, n int) uint32 { return ((1 << n) - 1) << start }

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
