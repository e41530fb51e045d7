package sim

import "github.com/gpupack/gpupack/placement"

// scoreMemo keeps each node's Fits and Score answer for each demand key
// (placement.DemandKey) until the node changes, so that placing a pod
// recomputes only the nodes changed since the last pod of its shape. A run
// of openb default has about 150 shapes over 1,213 nodes; most nodes are
// unchanged between two pods of a frequent shape.
type scoreMemo struct {
	shapes  map[placement.DemandKey]int
	entries [][]memoEntry // by shape, then node
	// version counts each node's changes, from 1; an entry of another
	// version is stale.
	version []uint32
}

type memoEntry struct {
	version uint32
	fits    bool
	gpu     int32
	score   float64
}

// newScoreMemo returns a memo for n nodes, or nil when the policy's score
// cannot be kept: it draws at random, or keeps state of its own across
// placements (placement.Observer).
func newScoreMemo(n int, policy placement.Policy) *scoreMemo {
	if _, observes := policy.(placement.Observer); observes || !placement.Memoizable(policy) {
		return nil
	}
	m := &scoreMemo{shapes: map[placement.DemandKey]int{}, version: make([]uint32, n)}
	for i := range m.version {
		m.version[i] = 1
	}
	return m
}

// of returns the demand's entries by node, or nil when its answers depend
// on more than its key and the node's state (node selector, affinity,
// tolerations, rules over other pods) or the memo is nil.
func (m *scoreMemo) of(d *placement.Demand) []memoEntry {
	if m == nil {
		return nil
	}
	p := d.Pod
	if len(p.NodeSelector) > 0 || len(p.RequiredAffinity) > 0 || len(p.Tolerations) > 0 || p.HasPodRules() {
		return nil
	}
	k := d.Key()
	id, ok := m.shapes[k]
	if !ok {
		id = len(m.entries)
		m.shapes[k] = id
		m.entries = append(m.entries, make([]memoEntry, len(m.version)))
	}
	return m.entries[id]
}

// changed marks node i changed.
func (m *scoreMemo) changed(i int) {
	if m != nil {
		m.version[i]++
	}
}
