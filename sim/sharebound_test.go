package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

func tallyOf(arrived, forced map[gpu.Milli]int64) *shareTally {
	return &shareTally{arrived: arrived, forced: forced}
}

// TestShareFloor: hand-solved packings.
func TestShareFloor(t *testing.T) {
	for name, c := range map[string]struct {
		arrived, forced map[gpu.Milli]int64
		gpus            int
		want            gpu.Milli
	}{
		// Two 160s go beside two of the three 810s: 2 x 30 + 190.
		"810s and small fill": {map[gpu.Milli]int64{810: 3, 160: 2}, map[gpu.Milli]int64{810: 3}, 100, 250},
		// Four 470s pair up: two GPUs of 60 free.
		"470 pairs": {map[gpu.Milli]int64{470: 4}, map[gpu.Milli]int64{470: 4}, 100, 120},
		// 470+470 (60), or 470+320+160 (50) beside 470 alone...: the
		// best is 470+470, 470+320+160: 60 + 50.
		"pairs and triples": {map[gpu.Milli]int64{470: 3, 320: 1, 160: 1}, map[gpu.Milli]int64{470: 3, 320: 1, 160: 1}, 100, 110},
		// Shares that arrived but need not be placed fill the gaps.
		"optional fill": {map[gpu.Milli]int64{500: 4}, map[gpu.Milli]int64{500: 1}, 100, 0},
		// Exact fits leave nothing.
		"exact":       {map[gpu.Milli]int64{250: 8}, map[gpu.Milli]int64{250: 8}, 100, 0},
		"none forced": {map[gpu.Milli]int64{810: 5}, map[gpu.Milli]int64{}, 100, 0},
		// The LP may split a GPU's way of filling: three 600s and three
		// 400s on three GPUs leave nothing.
		"600 and 400": {map[gpu.Milli]int64{600: 3, 400: 3}, map[gpu.Milli]int64{600: 3, 400: 3}, 3, 0},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tallyOf(c.arrived, c.forced).floor(c.gpus)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("floor %d milli, want %d", got, c.want)
			}
		})
	}
}

// bestWaste is the least free capacity over every packing of all the
// forced shares and any of the optional ones into GPUs, on the GPUs
// that hold forced shares, by exhaustive search (small cases only).
func bestWaste(forced, optional []gpu.Milli) gpu.Milli {
	best := gpu.Milli(-1)
	var bins []gpu.Milli // free milli of each GPU used
	var place func(i int)
	place = func(i int) {
		if i == len(forced) {
			// Fill with the optional shares as well as can be: any
			// subset, each into any GPU.
			w := fillOptional(bins, optional, 0)
			if best < 0 || w < best {
				best = w
			}
			return
		}
		for b := range bins {
			if bins[b] >= forced[i] {
				bins[b] -= forced[i]
				place(i + 1)
				bins[b] += forced[i]
			}
		}
		bins = append(bins, gpu.WholeGPU-forced[i])
		place(i + 1)
		bins = bins[:len(bins)-1]
	}
	place(0)
	return best
}

func fillOptional(bins []gpu.Milli, optional []gpu.Milli, i int) gpu.Milli {
	if i == len(optional) {
		var w gpu.Milli
		for _, b := range bins {
			w += b
		}
		return w
	}
	best := fillOptional(bins, optional, i+1) // left out
	for b := range bins {
		if bins[b] >= optional[i] {
			bins[b] -= optional[i]
			best = min(best, fillOptional(bins, optional, i+1))
			bins[b] += optional[i]
		}
	}
	return best
}

// TestShareFloorBelowBestPacking: on random small cases, the LP's floor
// never exceeds the best real packing (it is a bound), on the exact grid
// and on every coarser one, and it is at least the large-pod floor of the
// same forced shares (the LP knows what that counting argument knows).
func TestShareFloorBelowBestPacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	sizes := []gpu.Milli{50, 110, 160, 230, 320, 370, 470, 480, 550, 650, 810}
	tight, above := 0, 0
	for trial := range 300 {
		arrived, forced := map[gpu.Milli]int64{}, map[gpu.Milli]int64{}
		var fs, os []gpu.Milli
		for range 2 + rng.IntN(6) {
			s := sizes[rng.IntN(len(sizes))]
			arrived[s]++
			if rng.IntN(3) > 0 {
				forced[s]++
				fs = append(fs, s)
			} else {
				os = append(os, s)
			}
		}
		slices.Sort(fs)
		slices.Reverse(fs)
		want := bestWaste(fs, os)
		for _, grid := range shareGrids {
			classes, fluid := classesOf(arrived, forced, grid)
			pats, ok := patterns(classes, maxPatterns)
			if !ok {
				t.Fatalf("trial %d grid %d: too many patterns", trial, grid)
			}
			w, err := minWaste(classes, pats, 100, 100)
			if err != nil {
				t.Fatalf("trial %d grid %d: %v", trial, grid, err)
			}
			got := gpu.Milli(max(0, math.Ceil(w-float64(fluid)-1e-6)))
			if got > want {
				t.Errorf("trial %d grid %d: forced %v, optional %v: LP floor %d above the best packing's %d", trial, grid, fs, os, got, want)
			}
			if grid == 1 && got == want {
				tight++
			}
		}
		var g gapTally
		for _, s := range fs {
			g.placed(&placement.Demand{Devices: 1, PerGPUMilli: s})
		}
		for s, n := range arrived {
			for range n {
				g.arrived(&placement.Demand{Devices: 1, PerGPUMilli: s})
			}
		}
		got, _ := tallyOf(arrived, forced).floor(100)
		if got > g.floor() {
			above++
		}
		if got < g.floor() {
			t.Errorf("trial %d: forced %v, optional %v: LP floor %d below the large-pod floor %d", trial, fs, os, got, g.floor())
		}
	}
	// An LP that lost a constraint would fall to the large-pod floor or
	// to 0: it must know more than the counting argument, and be exact
	// where one GPU's rounding does not decide (98 and 216 of 300 today;
	// it is a relaxation, not a packing).
	t.Logf("the exact-grid LP met the best packing in %d of 300 cases, and was above the large-pod floor in %d", tight, above)
	if tight < 60 || above < 150 {
		t.Errorf("the LP met the best packing in %d cases (want 60 or more) and beat the large-pod floor in %d (want 150 or more)", tight, above)
	}
}

// TestShareFloorCoarsens: a trace of a share of every size from 1 to 999
// milli has too many ways to fill a GPU for the exact grid; the floor is
// read on a coarser one and stays within the truth.
func TestShareFloorCoarsens(t *testing.T) {
	arrived, forced := map[gpu.Milli]int64{}, map[gpu.Milli]int64{}
	for s := gpu.Milli(1); s < gpu.WholeGPU; s++ {
		arrived[s] = 1
	}
	forced[810], forced[809], forced[808] = 1, 1, 1
	if _, ok := patterns(classesOfGrid(arrived, forced, 1), maxPatterns); ok {
		t.Fatal("the exact grid fit the pattern cap; the test no longer coarsens")
	}
	got, err := tallyOf(arrived, forced).floor(100)
	if err != nil {
		t.Fatal(err)
	}
	// Every forced share's gap can be filled exactly by an optional share
	// (190, 191, 192 arrived): the truth is 0, and a floor is never
	// above it.
	if got != 0 {
		t.Errorf("floor %d, want 0", got)
	}
}

func classesOfGrid(arrived, forced map[gpu.Milli]int64, grid gpu.Milli) []shareClass {
	c, _ := classesOf(arrived, forced, grid)
	return c
}

// TestRefusalPoint: two GPUs and two 810-milli shares. Placing the first
// leaves 190 of 2,000 milli free (bound 90.5%), both 380 (81%): a target
// of 95% is out of reach once the first is placed, 85% once both are, and
// 80% never.
func TestRefusalPoint(t *testing.T) {
	c := gpu.Default()
	l4 := c.MustLookup("L4")
	n := &cluster.Node{Name: "n", CPU: 32000, Memory: 131072}
	for i := range 2 {
		n.GPUs = append(n.GPUs, cluster.GPU{Index: i, Model: l4, Memory: l4.Usable})
	}
	share := func(name string, m gpu.Milli) *cluster.Pod {
		return &cluster.Pod{Namespace: "ml", Name: name, CPU: 1000, GPU: cluster.Request{Kind: cluster.Fraction, Milli: m}}
	}
	pods := []*cluster.Pod{share("a", 810), {Namespace: "ml", Name: "cpu", CPU: 1000}, share("b", 810)}
	for _, c2 := range []struct {
		target   float64
		arrivals int
		ratio    float64
	}{{0.95, 1, 0.405}, {0.85, 3, 0.81}, {0.80, 0, 0}} {
		got, err := RefusalPoint([]*cluster.Node{n}, pods, c, c2.target)
		if err != nil {
			t.Fatal(err)
		}
		if c2.arrivals == 0 {
			if got != nil {
				t.Errorf("target %.2f: %+v, want no refusal forced", c2.target, got)
			}
			continue
		}
		if got == nil || got.Arrivals != c2.arrivals || math.Abs(got.ArrivedRatio-c2.ratio) > 1e-9 || got.Bound >= c2.target {
			t.Errorf("target %.2f: %+v, want a refusal among the first %d arrivals (%.3f of capacity arrived), bound below target", c2.target, got, c2.arrivals, c2.ratio)
		}
	}
	// One GPU, three 500-milli shares: two fill it; the third cannot be
	// placed beside them at all (the LP is infeasible), which forces a
	// refusal whatever the target.
	one := &cluster.Node{Name: "one", CPU: 32000, Memory: 131072, GPUs: n.GPUs[:1]}
	got, err := RefusalPoint([]*cluster.Node{one}, []*cluster.Pod{share("a", 500), share("b", 500), share("c", 500)}, c, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Arrivals != 3 || got.Bound != 0 {
		t.Errorf("three halves on one GPU: %+v, want a refusal among all 3 arrivals, bound 0", got)
	}
	// Two GPUs, three 600-milli shares before demand reaches capacity: no
	// placement places them all, so there is no bound on those that do,
	// and PrefixShareBound says so rather than bounding them at 0.
	three := []*cluster.Pod{share("a", 600), share("b", 600), share("c", 600)}
	if b, err := PrefixShareBound([]*cluster.Node{n}, three, c, 1); err == nil || !strings.Contains(err.Error(), "the 3 shares") {
		t.Errorf("three 600-milli shares on two GPUs: bound %v, error %v; want no bound, with an error naming the 3 shares", b, err)
	}
}

// TestNinetySevenNeedsARefusal is placement-policy.md's table: on openb
// default, seeds 1-5 (and 6-10, held out), placing every share (pod of
// less than a GPU) among the first 81-86% of the GPU demand already bounds
// the allocation below 97%, so reaching it takes leaving one of those
// unplaced, turned away or fitting nowhere (bounds.md: a place-if-fits
// policy can get there without a refusal; PlaceIfFitsCap bounds those).
func TestNinetySevenNeedsARefusal(t *testing.T) {
	if testing.Short() {
		t.Skip("full trace runs")
	}
	c := gpu.Default()
	nodes, pods := loadOpenb(t, c, "default")
	var mean85, heldOut85 float64
	ratios := []float64{0.75, 0.80, 0.85, 0.90, 0.95, 1}
	table := make([]float64, len(ratios))
	for seed := uint64(1); seed <= 10; seed++ {
		w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, seed)
		if err != nil {
			t.Fatal(err)
		}
		r, err := RefusalPoint(nodes, w, c, 0.97)
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			t.Errorf("seed %d: no refusal forced below 97%%", seed)
			continue
		}
		t.Logf("seed %d: placing every share among the first %d of %d arrivals (%.1f%% of the capacity asked for) bounds the allocation at %.3f%%",
			seed, r.Arrivals, len(w), 100*r.ArrivedRatio, 100*r.Bound)
		run, err := Run(context.Background(), nodes, w, c, Config{Policy: placement.DefaultPolicy, Seed: seed, Inflation: DefaultInflation, Typical: pods})
		if err != nil {
			t.Fatal(err)
		}
		if run.IdleGPUsUntil == nil || *run.IdleGPUsUntil <= r.ArrivedRatio {
			t.Errorf("seed %d: gpupack's last idle GPU went at %v of the capacity arrived, want after the refusal point %.4f (placement-policy.md)", seed, run.IdleGPUsUntil, r.ArrivedRatio)
		} else {
			t.Logf("seed %d: gpupack's last idle GPU went when %.1f%% of the capacity had arrived", seed, 100**run.IdleGPUsUntil)
		}
		if r.ArrivedRatio > 0.86 {
			t.Errorf("seed %d: the refusal is forced only after %.1f%% of the capacity arrived, want at most 86%% (placement-policy.md)", seed, 100*r.ArrivedRatio)
		}
		if b, err := PrefixShareBound(nodes, w, c, r.ArrivedRatio); err != nil || b != r.Bound {
			t.Errorf("seed %d: PrefixShareBound at %.4f = %.5f (%v), want RefusalPoint's %.5f", seed, r.ArrivedRatio, b, err, r.Bound)
		}
		at85, err := PrefixShareBound(nodes, w, c, 0.85)
		if err != nil {
			t.Fatal(err)
		}
		if seed <= 5 {
			mean85 += at85 / 5
			// placement-policy.md's table: the bound with every share placed
			// until each part of the capacity has been asked for.
			for i, ratio := range ratios {
				b, err := PrefixShareBound(nodes, w, c, ratio)
				if err != nil {
					t.Fatal(err)
				}
				table[i] += b / 5
			}
		} else {
			heldOut85 += at85 / 5
		}
	}
	for i, ratio := range ratios {
		t.Logf("seeds 1-5, every share placed until %.0f%% of the capacity is asked for: mean bound %.2f%%", 100*ratio, 100*table[i])
	}
	t.Logf("held-out seeds 6-10: mean bound with the shares of the first 85%% of demand placed: %.3f%%", 100*heldOut85)
	// The target is a mean: a policy could pass 97% on some seeds and not
	// others. With every share placed until 85% of the capacity is asked
	// for, the seeds' bounds average below it (96.94% today).
	t.Logf("mean bound with the shares of the first 85%% of demand placed: %.3f%%", 100*mean85)
	if mean85 >= 0.97 {
		t.Errorf("mean bound at 85%% of demand %.4f, want below 0.97 (placement-policy.md)", mean85)
	}
}

// BenchmarkShareBound is the LP alone on openb default, seed 1: the share
// bound at capacity (every share placed until GPU demand reaches it, the
// offline packing's line) and the refusal point for 97% (a search of about 14
// LPs).
func BenchmarkShareBound(b *testing.B) {
	c := gpu.Default()
	nodes, _, w := inflatedOpenb(b, c, "default", 1)
	b.Run("at-capacity", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := PrefixShareBound(nodes, w, c, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refusal-point", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := RefusalPoint(nodes, w, c, 0.97); err != nil {
				b.Fatal(err)
			}
		}
	})
}
