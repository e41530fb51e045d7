package sim

import (
	"errors"
	"fmt"
	"math"
)

// errInfeasible says an LP has no solution.
var errInfeasible = errors.New("the LP is infeasible")

// lpTol is the simplex's tolerance: coefficients and reduced costs
// within it of zero count as zero. The LPs here have small integer data.
const lpTol = 1e-9

// blandAfter is how many degenerate pivots in a row (the objective does
// not move) the simplex takes by the largest reduced cost before it turns
// to Bland's rule (the lowest index), which cannot cycle, until the
// objective moves again.
const blandAfter = 50

// lpFloor solves min c·x subject to A x = b, x >= 0, with b >= 0, by the
// two-phase simplex on a dense tableau, and returns a lower bound on its
// optimum certified by the final basis's dual: y·b plus, for every column
// whose reduced cost c_j - y·A_j is negative by rounding, that cost times
// ub, a bound on every x_j. The floor is therefore a floor whatever the
// rounding along the way. It fails with errInfeasible when no x exists,
// and with an error, never a loop, when maxPivots pivots do not reach the
// optimum.
func lpFloor(a [][]float64, b, c []float64, ub float64, maxPivots int) (float64, error) {
	m, n := len(a), len(c)
	if len(b) != m {
		return 0, fmt.Errorf("LP: %d rows, %d right-hand sides", m, len(b))
	}
	// The tableau: the columns of A, an artificial column per row (its
	// identity, whose columns then hold the basis's inverse), the
	// right-hand side.
	w := n + m + 1
	rhs := n + m
	t := make([][]float64, m)
	basis := make([]int, m)
	for i := range m {
		if len(a[i]) != n {
			return 0, fmt.Errorf("LP: row %d has %d columns, want %d", i, len(a[i]), n)
		}
		if b[i] < 0 || math.IsNaN(b[i]) {
			return 0, fmt.Errorf("LP: right-hand side %d is %v, want >= 0", i, b[i])
		}
		t[i] = make([]float64, w)
		copy(t[i], a[i])
		t[i][n+i] = 1
		t[i][rhs] = b[i]
		basis[i] = n + i
	}
	s := &simplex{t: t, basis: basis, r: make([]float64, w), cols: n + m, maxPivots: maxPivots}

	// Phase 1: minimise the artificials' sum.
	cost := make([]float64, n+m)
	for i := range m {
		cost[n+i] = 1
	}
	s.price(cost)
	if err := s.run(); err != nil {
		return 0, err
	}
	if -s.r[rhs] > 1e-6*max(1, sumAbs(b)) {
		return 0, errInfeasible
	}
	// Drive the artificials still basic (at zero) out where a real column
	// can take their row; a row where none can is redundant and stays.
	for i, j := range basis {
		if j < n {
			continue
		}
		for k := range n {
			if math.Abs(t[i][k]) > lpTol {
				s.pivot(i, k)
				break
			}
		}
	}

	// Phase 2: the real costs; artificials may no longer enter.
	s.cols = n
	copy(cost, c)
	for i := range m {
		cost[n+i] = 0
	}
	s.price(cost)
	if err := s.run(); err != nil {
		return 0, err
	}

	// The dual of the final basis: y_i = sum_k cost(basis_k) (B^-1)_{k,i},
	// B^-1 sitting in the artificial columns.
	y := make([]float64, m)
	for i := range m {
		for k, j := range basis {
			y[i] += cost[j] * t[k][n+i]
		}
	}
	floor := 0.0
	for i := range m {
		floor += y[i] * b[i]
	}
	for j := range n {
		r := c[j]
		for i := range m {
			r -= y[i] * a[i][j]
		}
		if r < 0 {
			floor += r * ub
		}
	}
	return floor, nil
}

// simplex is a dense tableau, its basis and its reduced-cost row (the
// last entry minus the objective).
type simplex struct {
	t         [][]float64
	basis     []int
	r         []float64
	cols      int // columns that may enter
	pivots    int
	maxPivots int
}

// price sets the reduced costs for cost.
func (s *simplex) price(cost []float64) {
	clear(s.r)
	copy(s.r, cost)
	for i, j := range s.basis {
		if cb := cost[j]; cb != 0 {
			for k, v := range s.t[i] {
				s.r[k] -= cb * v
			}
		}
	}
}

// run pivots until no column that may enter has a negative reduced cost.
func (s *simplex) run() error {
	rhs := len(s.r) - 1
	degenerate := 0
	for {
		q := -1
		for j := range s.cols {
			if s.r[j] < -lpTol && (q < 0 || (degenerate < blandAfter && s.r[j] < s.r[q])) {
				q = j
				if degenerate >= blandAfter {
					break // Bland: the lowest index
				}
			}
		}
		if q < 0 {
			return nil
		}
		p := -1
		var best float64
		for i, row := range s.t {
			if row[q] > lpTol {
				ratio := row[rhs] / row[q]
				if p < 0 || ratio < best-lpTol || (ratio <= best+lpTol && s.basis[i] < s.basis[p]) {
					p, best = i, ratio
				}
			}
		}
		if p < 0 {
			return errors.New("LP: unbounded")
		}
		if s.pivots == s.maxPivots {
			return fmt.Errorf("LP: no optimum after %d pivots", s.maxPivots)
		}
		if best > lpTol {
			degenerate = 0
		} else {
			degenerate++
		}
		s.pivot(p, q)
	}
}

// pivot makes column q basic in row p.
func (s *simplex) pivot(p, q int) {
	s.pivots++
	row := s.t[p]
	inv := 1 / row[q]
	for k := range row {
		row[k] *= inv
	}
	row[q] = 1
	for i, other := range s.t {
		if i == p {
			continue
		}
		if f := other[q]; f != 0 {
			for k, v := range row {
				other[k] -= f * v
			}
			other[q] = 0
		}
	}
	if f := s.r[q]; f != 0 {
		for k, v := range row {
			s.r[k] -= f * v
		}
		s.r[q] = 0
	}
	s.basis[p] = q
}

func sumAbs(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += math.Abs(x)
	}
	return s
}
