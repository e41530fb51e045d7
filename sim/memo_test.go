package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// TestMemoKeepsThePlacements: placing the small trace's arrivals with the
// score memo picks the same node and GPUs for every pod as without it,
// under every policy the memo serves.
func TestMemoKeepsThePlacements(t *testing.T) {
	c := gpu.Default()
	nodes, pods := loadSmall(t)
	w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, 3)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := demandsOf(w, c)
	if err != nil {
		t.Fatal(err)
	}
	typical, err := demandsOf(pods, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range placement.Policies() {
		t.Run(name, func(t *testing.T) {
			type placed struct {
				Node int
				A    placement.Assignment
			}
			run := func(memoized bool) []placed {
				states, maxCPU, maxGPU := newStates(nodes)
				policy, err := placement.New(name, placement.Options{Workload: placement.NewWorkload(typical, placement.TypicalCoverage),
					Rand: rand.New(rand.NewPCG(1, 2)), MaxNodeCPU: maxCPU, MaxNodeGPUMilli: maxGPU})
				if err != nil {
					t.Fatal(err)
				}
				var memo *scoreMemo
				if memoized {
					memo = newScoreMemo(len(states), policy)
				}
				var out []placed
				for _, d := range ds {
					n, a := place(d, states, policy, Ties{Rank: NodeOrder(len(nodes), 3)}, memo)
					out = append(out, placed{n, a})
				}
				return out
			}
			if diff := cmp.Diff(run(false), run(true)); diff != "" {
				t.Errorf("placements without the memo (-) and with it (+):\n%s", diff)
			}
		})
	}
}
