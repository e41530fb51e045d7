package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
)

// partitionable makes the node's GPUs partitionable DRA GPUs of pool n:
// counter set s-<i> with cores 4 and slot-0..3 of 1 each; the whole
// device gpu-<i> (class gpu) consumes them all, and the partitions (class
// part) half-<i>-0 and half-<i>-2 take 2 cores and two slots,
// quarter-<i>-<k> one core and slot k.
func (b *nodeBuilder) partitionable() *nodeBuilder {
	for i := range b.n.GPUs {
		set := fmt.Sprintf("s-%d", i)
		counters := func(cores int64, start, slots int) []cluster.CounterUse {
			c := map[string]int64{"cores": cores}
			for k := start; k < start+slots; k++ {
				c[fmt.Sprintf("slot-%d", k)] = 1
			}
			return []cluster.CounterUse{{Set: set, Counters: c}}
		}
		g := &b.n.GPUs[i]
		g.DRA = &cluster.DRADevice{Driver: "gpu.nvidia.com", Pool: b.n.Name, Device: fmt.Sprintf("gpu-%d", i), Classes: []string{"gpu"},
			CounterSets: []cluster.CounterSet{{Name: set, Counters: counters(4, 0, 4)[0].Counters}}, Consumes: counters(4, 0, 4)}
		for _, start := range []int{0, 2} {
			g.DRA.Partitions = append(g.DRA.Partitions, cluster.Partition{Device: fmt.Sprintf("half-%d-%d", i, start), Milli: 500, Classes: []string{"part"}, Consumes: counters(2, start, 2)})
		}
		for k := range 4 {
			g.DRA.Partitions = append(g.DRA.Partitions, cluster.Partition{Device: fmt.Sprintf("quarter-%d-%d", i, k), Milli: 250, Classes: []string{"part"}, Consumes: counters(1, k, 1)})
		}
	}
	return b
}

// TestFitCounters works shared counters by hand on one partitionable GPU:
// partitions fit while the counters left cover them, within one pod's
// requests too, and the reason names the counter that excludes the most
// accepted devices (ties by name).
func TestFitCounters(t *testing.T) {
	n := makeNode("n").gpus("H100-80GB", 1, cluster.Exclusive, 0).partitionable().obj()
	halves := exact("r", "part", 1, "half-0-0", "half-0-2")
	quarter := func(k int) *cluster.Pod {
		return makePod(fmt.Sprintf("q%d", k)).claim("q", exact("r", "part", 1, fmt.Sprintf("quarter-0-%d", k))).obj()
	}
	whole := exact("w", "gpu", 1, "gpu-0")
	counter := func(name string, needed, left int64, blocked int) *CounterShortfall {
		return &CounterShortfall{GPU: 0, Set: "s-0", Counter: name, Needed: needed, Left: left, Blocked: blocked}
	}
	cases := map[string]struct {
		pod   *cluster.Pod
		state *NodeState
		// want is the code and the counter; devices the partitions taken
		// when the pod fits.
		code    Code
		counter *CounterShortfall
		devices []int
	}{
		"two halves":           {pod: makePod("p").claim("c", halves, exact("r2", "part", 1, "half-0-0", "half-0-2")).obj(), state: NewNodeState(n), devices: []int{0, 1}},
		"three halves":         {pod: makePod("p").claim("c", exact("r", "part", 3, "half-0-0", "half-0-2")).obj(), state: NewNodeState(n), code: ClaimUnallocatable},
		"beside a quarter":     {pod: makePod("p").claim("c", halves).obj(), state: place(t, n, quarter(1)), devices: []int{1}},
		"between two quarters": {pod: makePod("p").claim("c", halves).obj(), state: place(t, n, quarter(1), quarter(2)), code: ClaimCounterExhausted, counter: counter("slot-1", 1, 0, 1)},
		"whole beside one":     {pod: makePod("p").claim("c", whole).obj(), state: place(t, n, quarter(3)), code: ClaimCounterExhausted, counter: counter("cores", 4, 3, 1)},
		"whole after its own quarter": {pod: makePod("p").claim("c", exact("r", "part", 1, "quarter-0-0"), whole).obj(), state: NewNodeState(n),
			code: ClaimCounterExhausted, counter: counter("cores", 4, 3, 1)},
		"a quarter under a whole": {pod: quarter(0), state: place(t, n, makePod("w").claim("w", whole).obj()), code: ClaimCounterExhausted, counter: counter("cores", 1, 0, 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, rs := Fit(demand(t, tc.pod), tc.state)
			if tc.code == "" {
				var got []int
				for _, d := range a.Devices {
					got = append(got, d.Slice)
				}
				if len(rs) > 0 || !cmp.Equal(got, tc.devices) {
					t.Errorf("took partitions %v, reasons %v; want %v", got, rs, tc.devices)
				}
				return
			}
			if len(rs) != 1 || rs[0].Code != tc.code {
				t.Fatalf("reasons %v, want one %s", rs, tc.code)
			}
			if diff := cmp.Diff(tc.counter, rs[0].Claim.Counter); diff != "" {
				t.Errorf("counter (-want +got):\n%s", diff)
			}
		})
	}
	// A recorded partition is taken only while its counters cover it.
	full := place(t, n, quarter(1))
	d := demand(t, makePod("r").mig("quarter").obj())
	if _, ok := AssignmentAt(d, full, []cluster.Device{{GPU: 0, Slice: 0}}); ok {
		t.Errorf("half-0-0 was taken over the held quarter-0-1")
	}
	if a, ok := AssignmentAt(d, full, []cluster.Device{{GPU: 0, Slice: 1}}); !ok || a.Devices[0].Milli != 500 {
		t.Errorf("half-0-2 beside quarter-0-1: %+v, %v; want it with 500 milli", a, ok)
	}
}

// TestStateKeyCounters: two states that differ only in a partition's
// consumption get different keys, since Fit reads it.
func TestStateKeyCounters(t *testing.T) {
	a := makeNode("n").gpus("H100-80GB", 1, cluster.Exclusive, 0).partitionable().obj()
	b := makeNode("n").gpus("H100-80GB", 1, cluster.Exclusive, 0).partitionable().obj()
	b.GPUs[0].DRA.Partitions[0].Consumes[0].Counters["cores"] = 3
	if ka, kb := string(NewNodeState(a).AppendKey(nil)), string(NewNodeState(b).AppendKey(nil)); ka == kb {
		t.Errorf("equal keys %q for different counters", ka)
	}
}

// BenchmarkFitsPartitions is Fits on a pod with one claim over 8
// partitionable GPUs, each with a quarter held, so that every GPU's
// counters are read.
func BenchmarkFitsPartitions(b *testing.B) {
	n := makeNode("n").gpus("H100-80GB", 8, cluster.Exclusive, 0).partitionable().obj()
	var held []*cluster.Pod
	var accepts []string
	for i := range 8 {
		held = append(held, makePod(fmt.Sprintf("q%d", i)).claim("q", exact("r", "part", 1, fmt.Sprintf("quarter-%d-1", i))).obj())
		accepts = append(accepts, fmt.Sprintf("half-%d-0", i))
	}
	s := place(b, n, held...)
	d := demand(b, makePod("p").claim("c", exact("r", "part", 1, accepts...)).obj())
	b.ReportAllocs()
	for b.Loop() {
		Fits(d, s)
	}
}
