package sim

import (
	"errors"
	"math"
	"math/rand/v2"
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

// TestLPFloorAgainstVertices: on random small LPs with bounded feasible
// sets, lpFloor's floor matches the optimum found by trying every basis
// (every choice of m columns, solved, kept if non-negative), and it says
// infeasible exactly when no basis is feasible.
func TestLPFloorAgainstVertices(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	solved, infeasible := 0, 0
	for trial := range 400 {
		m := 1 + rng.IntN(3)
		n := m + 1 + rng.IntN(4)
		a := make([][]float64, m+1)
		b := make([]float64, m+1)
		for i := range m {
			a[i] = make([]float64, n+1)
			for j := range n {
				a[i][j] = float64(rng.IntN(7) - 2)
			}
			b[i] = float64(rng.IntN(6))
		}
		// A last row sum x_j + s = 10 bounds every variable by 10.
		a[m] = make([]float64, n+1)
		for j := range n + 1 {
			a[m][j] = 1
		}
		b[m] = 10
		c := make([]float64, n+1)
		for j := range n {
			c[j] = float64(rng.IntN(11) - 5)
		}
		want, ok := vertexOptimum(a, b, c)
		got, err := lpFloor(a, b, c, 10, 10000)
		switch {
		case !ok:
			infeasible++
			if !errors.Is(err, errInfeasible) {
				t.Errorf("trial %d: no feasible basis, lpFloor %v (%v)", trial, got, err)
			}
		case err != nil:
			t.Errorf("trial %d: optimum %v, lpFloor failed: %v", trial, want, err)
		default:
			solved++
			if math.Abs(got-want) > 1e-6 || got > want+1e-9 {
				t.Errorf("trial %d: lpFloor %v, optimum %v (a %v, b %v, c %v)", trial, got, want, a, b, c)
			}
		}
	}
	if solved < 100 || infeasible < 20 {
		t.Errorf("%d solved, %d infeasible of 400: want both kinds in number", solved, infeasible)
	}
}

// vertexOptimum is min c·x over Ax = b, x >= 0 by trying every basis.
func vertexOptimum(a [][]float64, b, c []float64) (float64, bool) {
	m, n := len(a), len(c)
	best, found := math.Inf(1), false
	cols := make([]int, m)
	var choose func(k, from int)
	choose = func(k, from int) {
		if k == m {
			x, ok := solveSquare(a, b, cols)
			if !ok {
				return
			}
			v := 0.0
			for i, j := range cols {
				if x[i] < -1e-9 {
					return
				}
				v += c[j] * x[i]
			}
			best, found = min(best, v), true
			return
		}
		for j := from; j < n; j++ {
			cols[k] = j
			choose(k+1, j+1)
		}
	}
	choose(0, 0)
	return best, found
}

// solveSquare solves the columns cols of a against b by Gaussian
// elimination with partial pivoting; false if they are singular.
func solveSquare(a [][]float64, b []float64, cols []int) ([]float64, bool) {
	m := len(cols)
	t := make([][]float64, m)
	for i := range m {
		t[i] = make([]float64, m+1)
		for k, j := range cols {
			t[i][k] = a[i][j]
		}
		t[i][m] = b[i]
	}
	for k := range m {
		p := k
		for i := k + 1; i < m; i++ {
			if math.Abs(t[i][k]) > math.Abs(t[p][k]) {
				p = i
			}
		}
		if math.Abs(t[p][k]) < 1e-9 {
			return nil, false
		}
		t[k], t[p] = t[p], t[k]
		for i := range m {
			if i != k {
				f := t[i][k] / t[k][k]
				for j := k; j <= m; j++ {
					t[i][j] -= f * t[k][j]
				}
			}
		}
	}
	x := make([]float64, m)
	for i := range m {
		x[i] = t[i][m] / t[i][i]
	}
	return x, true
}
