package sim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/gpu"
)

func TestLPFloor(t *testing.T) {
	// Beale's example, on which the simplex by largest reduced cost
	// alone cycles: min -3/4 x4 + 20 x5 - 1/2 x6 + 6 x7, optimum -5/4.
	beale := [][]float64{
		{1, 0, 0, 0.25, -8, -1, 9},
		{0, 1, 0, 0.5, -12, -0.5, 3},
		{0, 0, 1, 0, 0, 1, 0},
	}
	got, err := lpFloor(beale, []float64{0, 0, 1}, []float64{0, 0, 0, -0.75, 20, -0.5, 6}, 10, 1000)
	if err != nil || math.Abs(got+1.25) > 1e-9 {
		t.Errorf("Beale: %v (%v), want -1.25", got, err)
	}
	// min x1 + 2 x2 with x1 + x2 - s = 3 (at least 3), x1 + t = 1 (x1 at
	// most 1): x1 = 1, x2 = 2, cost 5.
	got, err = lpFloor([][]float64{{1, 1, -1, 0}, {1, 0, 0, 1}}, []float64{3, 1}, []float64{1, 2, 0, 0}, 10, 1000)
	if err != nil || math.Abs(got-5) > 1e-9 {
		t.Errorf("small: %v (%v), want 5", got, err)
	}
	// x1 + x2 = 1 and x1 + x2 = 2 cannot both hold.
	if _, err := lpFloor([][]float64{{1, 1}, {1, 1}}, []float64{1, 2}, []float64{1, 1}, 10, 1000); !errors.Is(err, errInfeasible) {
		t.Errorf("infeasible: %v, want errInfeasible", err)
	}
	// A redundant row (the same constraint twice) is not infeasible.
	got, err = lpFloor([][]float64{{1, 1}, {1, 1}}, []float64{2, 2}, []float64{1, 3}, 10, 1000)
	if err != nil || math.Abs(got-2) > 1e-9 {
		t.Errorf("redundant row: %v (%v), want 2", got, err)
	}
	// Out of pivots: an error, not a loop.
	if _, err := lpFloor(beale, []float64{0, 0, 1}, []float64{0, 0, 0, -0.75, 20, -0.5, 6}, 10, 1); err == nil || !strings.Contains(err.Error(), "pivots") {
		t.Errorf("one pivot: %v, want an error that says it ran out of pivots", err)
	}
	for name, bad := range map[string][]float64{"negative": {-1, 1}, "NaN": {math.NaN(), 1}} {
		if _, err := lpFloor([][]float64{{1, 0}, {0, 1}}, bad, []float64{1, 1}, 10, 1000); err == nil {
			t.Errorf("%s right-hand side: no error", name)
		}
	}
}

// TestShareFloorSeedEight is the LP that gonum's simplex never finished
// (openb default, seed 8, the shares of the first 6,983 arrivals): it must
// end, with the bound it then has.
func TestShareFloorSeedEight(t *testing.T) {
	if testing.Short() {
		t.Skip("full trace")
	}
	c := gpu.Default()
	nodes, _, w := inflatedOpenb(t, c, "default", 8)
	q, err := newShareSequence(nodes, w, c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.bound(6983)
	if err != nil || b < 0.96 || b > 0.98 {
		t.Errorf("bound %v (%v), want one near 97%%", b, err)
	}
}
