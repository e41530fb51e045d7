package placement

import (
	"maps"
	"slices"
	"strconv"

	"github.com/gpupack/gpupack/cluster"
)

// CounterShortfall is, as data, the shared counter of a partitionable DRA
// GPU (DRAPartitionableDevices) that keeps a request's accepted devices
// from being allocated: the counter set and counter, what one such device
// needs of it and what is left after the devices already allocated (the
// whole GPU consumes every counter, so a partition held excludes it, and
// the whole GPU held excludes every partition).
type CounterShortfall struct {
	// GPU is the index of the partitionable GPU in the node's GPUs.
	GPU     int
	Set     string
	Counter string
	Needed  int64
	Left    int64
	// Blocked is how many accepted devices no claim holds but this
	// counter excludes.
	Blocked int
}

// counterLedger is what is left of a partitionable GPU's counter sets, by
// set and counter.
type counterLedger map[string]map[string]int64

// newLedger is what the devices held on the GPU leave of its counters: the
// whole device when a pod holds the GPU and no partition of it, and each
// partition taken.
func newLedger(g *cluster.GPU, st *GPUState) counterLedger {
	l := make(counterLedger, len(g.DRA.CounterSets))
	for _, cs := range g.DRA.CounterSets {
		l[cs.Name] = maps.Clone(cs.Counters)
	}
	if wholeHeld(st) {
		l.take(g.DRA.Consumes)
	}
	for j := range g.DRA.Partitions {
		if st.UsedSlices&(1<<j) != 0 {
			l.take(g.DRA.Partitions[j].Consumes)
		}
	}
	return l
}

// wholeHeld reports whether a pod holds a partitionable GPU's whole device:
// it has holders and no partition is taken.
func wholeHeld(st *GPUState) bool { return st.Holders > 0 && st.UsedSlices == 0 }

func (l counterLedger) take(uses []cluster.CounterUse) {
	for _, u := range uses {
		set := l[u.Set]
		for name, v := range u.Counters {
			if _, ok := set[name]; ok {
				set[name] -= v
			}
		}
	}
}

// fits reports whether a device that consumes uses can be allocated, as the
// kube-scheduler's allocator decides (structured/internal/stable,
// checkAvailableCounters, v0.37.2): no counter of the sets it consumes
// from may fall below zero.
func (l counterLedger) fits(uses []cluster.CounterUse) bool {
	for _, u := range uses {
		for name, left := range l[u.Set] {
			if left < u.Counters[name] {
				return false
			}
		}
	}
	return true
}

// shortOf calls add for each counter that keeps a device consuming uses
// from being allocated.
func (l counterLedger) shortOf(uses []cluster.CounterUse, add func(set, counter string, needed, left int64)) {
	for _, u := range uses {
		for name, left := range l[u.Set] {
			if need := u.Counters[name]; left < need {
				add(u.Set, name, need, left)
			}
		}
	}
}

// ledgers are the counter ledgers of a node's partitionable GPUs, by GPU
// index, made when a request first meets one.
type ledgers map[int]counterLedger

func (ls ledgers) of(s *NodeState, i int) counterLedger {
	l, ok := ls[i]
	if !ok {
		l = newLedger(&s.Node.GPUs[i], &s.GPUs[i])
		ls[i] = l
	}
	return l
}

func (l counterLedger) clone() counterLedger {
	c := make(counterLedger, len(l))
	for set, counters := range l {
		c[set] = maps.Clone(counters)
	}
	return c
}

// counterTally counts, per counter, the accepted devices it excludes, to
// name the counter that excludes the most.
type counterTally struct {
	best  *CounterShortfall
	count map[counterKey]*CounterShortfall
}

type counterKey struct {
	gpu          int
	set, counter string
}

func (t *counterTally) add(gpuIndex int, set, counter string, needed, left int64) {
	if t.count == nil {
		t.count = map[counterKey]*CounterShortfall{}
	}
	key := counterKey{gpuIndex, set, counter}
	c, ok := t.count[key]
	if !ok {
		c = &CounterShortfall{GPU: gpuIndex, Set: set, Counter: counter, Needed: needed, Left: left}
		t.count[key] = c
	}
	c.Blocked++
	if b := t.best; b == nil || c.Blocked > b.Blocked || (c.Blocked == b.Blocked && less(c, b)) {
		t.best = c
	}
}

func less(a, b *CounterShortfall) bool {
	if a.GPU != b.GPU {
		return a.GPU < b.GPU
	}
	if a.Set != b.Set {
		return a.Set < b.Set
	}
	return a.Counter < b.Counter
}

// partitionAt is the share of partition j of a partitionable GPU when it
// can be allocated there now.
func partitionAt(g *cluster.GPU, st *GPUState, index, j int) (DeviceShare, bool) {
	if j >= len(g.DRA.Partitions) || st.UsedSlices&(1<<j) != 0 || !newLedger(g, st).fits(g.DRA.Partitions[j].Consumes) {
		return DeviceShare{}, false
	}
	p := &g.DRA.Partitions[j]
	return DeviceShare{GPU: index, Slice: j, Milli: p.Milli, Memory: p.Memory}, true
}

// MakeablePartitions lists the partitions of the node's GPU i that could be
// allocated now: not held, and its counters cover them. Nil for a GPU that
// is not partitionable.
func MakeablePartitions(s *NodeState, i int) []int {
	g := &s.Node.GPUs[i]
	if g.DRA == nil || !g.DRA.Partitionable() {
		return nil
	}
	l := newLedger(g, &s.GPUs[i])
	var out []int
	for j := range g.DRA.Partitions {
		if s.GPUs[i].UsedSlices&(1<<j) == 0 && l.fits(g.DRA.Partitions[j].Consumes) {
			out = append(out, j)
		}
	}
	return out
}

// CounterLedger is what is left of a pool's shared counter sets, for a
// caller that holds the devices as DRA objects (the scheduler plugin):
// the same rule Fit applies.
type CounterLedger struct{ left counterLedger }

// NewCounterLedger starts a ledger with the sets' counters.
func NewCounterLedger(sets []cluster.CounterSet) *CounterLedger {
	l := make(counterLedger, len(sets))
	for _, cs := range sets {
		l[cs.Name] = maps.Clone(cs.Counters)
	}
	return &CounterLedger{left: l}
}

// Take consumes what an allocated device consumes.
func (c *CounterLedger) Take(uses []cluster.CounterUse) { c.left.take(uses) }

// Fits reports whether a device consuming uses can be allocated now.
func (c *CounterLedger) Fits(uses []cluster.CounterUse) bool { return c.left.fits(uses) }

// appendPartitionsKey appends to a state's key what Fit reads of a
// partitionable GPU: its counter sets, what its whole device consumes, and
// each partition's name, classes and consumption.
func appendPartitionsKey(b []byte, d *cluster.DRADevice) []byte {
	counters := func(b []byte, set string, c map[string]int64) []byte {
		b = strconv.AppendQuote(append(b, '{'), set)
		for _, name := range slices.Sorted(maps.Keys(c)) {
			b = strconv.AppendInt(strconv.AppendQuote(append(b, ','), name), c[name], 10)
		}
		return append(b, '}')
	}
	for _, cs := range d.CounterSets {
		b = counters(b, cs.Name, cs.Counters)
	}
	uses := func(b []byte, us []cluster.CounterUse) []byte {
		for _, u := range us {
			b = counters(b, u.Set, u.Counters)
		}
		return b
	}
	b = uses(append(b, '<'), d.Consumes)
	for _, p := range d.Partitions {
		b = strconv.AppendQuote(append(b, '|'), p.Device)
		for _, class := range p.Classes {
			b = strconv.AppendQuote(append(b, ';'), class)
		}
		b = uses(b, p.Consumes)
	}
	return b
}
