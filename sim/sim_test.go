package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/internal/testkit/golden"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

func loadSmall(t testing.TB) ([]*cluster.Node, []*cluster.Pod) {
	t.Helper()
	c := gpu.Default()
	nf, err := os.Open("testdata/nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	nodes, err := cluster.LoadTraceNodes(nf, "testdata/nodes.csv", c)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open("testdata/pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	pods, err := cluster.LoadTracePods(pf, "testdata/pods.csv", c)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

func capacityOf(nodes []*cluster.Node) gpu.Milli {
	var c gpu.Milli
	for _, n := range nodes {
		c += gpu.Milli(len(n.GPUs)) * gpu.WholeGPU
	}
	return c
}

// TestGolden runs every policy on a small trace and compares the results
// (less wall time) with testdata/golden.jsonl; -update rewrites it.
func TestGolden(t *testing.T) {
	nodes, pods := loadSmall(t)
	w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, 7)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, p := range placement.Policies() {
		r, err := Run(context.Background(), nodes, w, gpu.Default(), Config{Policy: p, Seed: 7, Inflation: DefaultInflation, Typical: pods})
		if err != nil {
			t.Fatal(err)
		}
		r.WallSeconds = 0
		if err := json.NewEncoder(&buf).Encode(r); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, r)
	}
	golden.Check(t, "testdata/golden.jsonl", buf.Bytes())
}

func checkInvariants(t *testing.T, r Result) {
	t.Helper()
	if r.PodsScheduled+r.PodsFailed != r.PodsArrived {
		t.Errorf("%s: scheduled %d + failed %d != arrived %d", r.Policy, r.PodsScheduled, r.PodsFailed, r.PodsArrived)
	}
	if r.GPUMilliAllocated > r.GPUMilliCapacity || r.GPUMilliAllocated > r.GPUMilliArrived {
		t.Errorf("%s: allocated %d exceeds capacity %d or arrived %d", r.Policy, r.GPUMilliAllocated, r.GPUMilliCapacity, r.GPUMilliArrived)
	}
	u := r.Unallocated
	if sum := u.CPUStrandedGPUMilli + u.IdleGPUMilli + u.SliverGPUMilli + u.OtherGPUMilli; sum != r.GPUMilliCapacity-r.GPUMilliAllocated {
		t.Errorf("%s: unallocated parts %+v add up to %d, want capacity - allocated = %d", r.Policy, u, sum, r.GPUMilliCapacity-r.GPUMilliAllocated)
	}
	for i := 1; i < len(r.Curve); i++ {
		if r.Curve[i].AllocRatio < r.Curve[i-1].AllocRatio {
			t.Errorf("%s: allocation curve decreases at %v", r.Policy, r.Curve[i].ArrivedRatio)
		}
	}
}

func TestDeterministic(t *testing.T) {
	nodes, pods := loadSmall(t)
	run := func(seed uint64) Result {
		w, err := Inflate(pods, capacityOf(nodes), 1.3, seed)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), nodes, w, gpu.Default(), Config{Policy: "random", Seed: seed, Inflation: 1.3, Typical: pods})
		if err != nil {
			t.Fatal(err)
		}
		r.WallSeconds = 0
		return r
	}
	a, b := run(3), run(3)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different results:\n%s", diff)
	}
	if c := run(4); cmp.Equal(a.GPUMilliAllocated, c.GPUMilliAllocated) && cmp.Equal(a.PodsArrived, c.PodsArrived) && a.FragGPUMilli == c.FragGPUMilli {
		t.Errorf("seeds 3 and 4 gave identical results; the seed is not used")
	}
}

func TestInflate(t *testing.T) {
	nodes, pods := loadSmall(t)
	capacity := capacityOf(nodes)
	var listed gpu.Milli
	for _, p := range pods {
		listed += p.GPU.GPUMilli()
	}
	for _, ratio := range []float64{0.3, 1.3, 3} {
		w, err := Inflate(pods, capacity, ratio, 1)
		if err != nil {
			t.Fatal(err)
		}
		var demand gpu.Milli
		names := map[string]bool{}
		for _, p := range w {
			demand += p.GPU.GPUMilli()
			if names[p.Name] {
				t.Fatalf("pod %s appears twice", p.Name)
			}
			names[p.Name] = true
		}
		target := gpu.Milli(ratio * float64(capacity))
		if demand > target {
			t.Errorf("ratio %v: demand %d exceeds target %d", ratio, demand, target)
		}
		if float64(listed) < float64(target) && float64(demand) < float64(target)-8000 {
			t.Errorf("ratio %v: demand %d stops short of target %d by more than one 8-GPU pod", ratio, demand, target)
		}
	}
	bad := map[string]func() error{
		"no pods":  func() error { _, err := Inflate(nil, capacity, 1.3, 1); return err },
		"no gpus":  func() error { _, err := Inflate(pods, 0, 1.3, 1); return err },
		"nan":      func() error { _, err := Inflate(pods, capacity, nan(), 1); return err },
		"negative": func() error { _, err := Inflate(pods, capacity, -1, 1); return err },
		"cpu only": func() error {
			_, err := Inflate([]*cluster.Pod{{Name: "c", CPU: 1000}}, capacity, 1.3, 1)
			return err
		},
	}
	for name, f := range bad {
		if err := f(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func nan() float64 { var z float64; return z / z }

// TestHindsightPack: the hindsight packing of the small trace is a
// feasible placement of its GPU pods. It is no ceiling:
// TestHindsightPackIsBeaten shows a policy passing it.
func TestHindsightPack(t *testing.T) {
	nodes, pods := loadSmall(t)
	w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, 7)
	if err != nil {
		t.Fatal(err)
	}
	h, err := HindsightPack(context.Background(), nodes, w, gpu.Default(), 7)
	if err != nil {
		t.Fatal(err)
	}
	gpuPods := 0
	for _, p := range w {
		if p.WantsGPU() {
			gpuPods++
		}
	}
	if h.Policy != HindsightName || h.GPUPodsPlaced+h.GPUPodsFailed != gpuPods || h.GPUMilliAllocated > h.GPUMilliCapacity {
		t.Errorf("%s placed %d + failed %d of %d GPU pods, allocated %d of %d", h.Policy, h.GPUPodsPlaced, h.GPUPodsFailed, gpuPods,
			h.GPUMilliAllocated, h.GPUMilliCapacity)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := HindsightPack(ctx, nodes, w, gpu.Default(), 7); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled hindsight packing returned %v, want context.Canceled", err)
	}
	if _, err := WorkloadBounds(ctx, nodes, w, gpu.Default(), 7); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled bounds returned %v, want context.Canceled", err)
	}
}

// TestHindsightPackIsBeaten is why the hindsight packing is called a lower
// estimate of the offline optimum, not a ceiling: on openb gpushare100,
// seed 3, gpupack's online policy allocates more than it, and stays under
// the place-if-fits cap.
func TestHindsightPackIsBeaten(t *testing.T) {
	if testing.Short() {
		t.Skip("the full gpushare100 trace")
	}
	c := gpu.Default()
	nodes, pods, w := inflatedOpenb(t, c, "gpushare100", 3)
	b, err := WorkloadBounds(context.Background(), nodes, w, c, 3)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), nodes, w, c, Config{Seed: 3, Inflation: DefaultInflation, Typical: pods, Policy: "gpupack"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Hindsight == nil || b.PlaceIfFitsCap == nil {
		t.Fatalf("bounds %+v: want both", b)
	}
	t.Logf("gpushare100 seed 3: gpupack %.2f%%, hindsight packing %.2f%%, place-if-fits cap %.2f%%", 100*r.GPUAllocRatio, 100*b.Hindsight.GPUAllocRatio, 100*b.PlaceIfFitsCap.Ratio)
	if r.GPUAllocRatio <= b.Hindsight.GPUAllocRatio {
		t.Errorf("gpupack allocates %.4f, the hindsight packing %.4f: want the online policy ahead, as the name's caveat says", r.GPUAllocRatio, b.Hindsight.GPUAllocRatio)
	}
	if r.GPUAllocRatio > b.PlaceIfFitsCap.Ratio {
		t.Errorf("gpupack allocates %.4f, above the place-if-fits cap %.4f", r.GPUAllocRatio, b.PlaceIfFitsCap.Ratio)
	}
}

// TestFGDIsFaithful holds fgd to the published figures on openb default
// at inflation 1.3: the paper's median of 95.40% GPU allocation, and the
// 95.39% mean over seeds 1-10 of a side-by-side rebuild of its public
// simulator's rules. The mean over seeds 1-5 must lie within 0.3 points of
// 95.4%.
func TestFGDIsFaithful(t *testing.T) {
	if testing.Short() {
		t.Skip("5 full trace runs; skipped in -short mode")
	}
	c := gpu.Default()
	nodes, pods := loadOpenb(t, c, openb.DefaultPods)
	sum := 0.0
	for seed := uint64(1); seed <= 5; seed++ {
		w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, seed)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), nodes, w, c, Config{Policy: "fgd", Seed: seed, Inflation: DefaultInflation, Typical: pods})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: fgd allocates %.2f%%", seed, 100*r.GPUAllocRatio)
		sum += r.GPUAllocRatio
	}
	if mean := 100 * sum / 5; math.Abs(mean-95.4) > 0.3 {
		t.Errorf("fgd's mean GPU allocation over seeds 1-5 is %.2f%%, more than 0.3 points from the published 95.4%%", mean)
	}
}

// inflatedOpenb loads an openb trace and inflates it as the paper does
// (DefaultInflation) with the seed: the nodes, the listed pods (the
// typical workload) and the arrivals.
func inflatedOpenb(t testing.TB, c *gpu.Catalogue, trace string, seed uint64) (nodes []*cluster.Node, pods, arrivals []*cluster.Pod) {
	t.Helper()
	nodes, pods = loadOpenb(t, c, trace)
	arrivals, err := Inflate(pods, capacityOf(nodes), DefaultInflation, seed)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods, arrivals
}

func loadOpenb(t testing.TB, c *gpu.Catalogue, trace string) ([]*cluster.Node, []*cluster.Pod) {
	t.Helper()
	nf, src, err := openb.Open(openb.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadTraceNodes(nf, src, c)
	if err != nil {
		t.Fatal(err)
	}
	pf, src, err := openb.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.LoadTracePods(pf, src, c)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

// TestGpupackLeads is the suite's small version of the benchmarks doc's
// table (TestCompare runs all of it): on the four traces, seeds 1 and 2,
// gpupack's policy allocates more GPU than the faithful fgd, the best of
// the other policies at the end, on every run, at the end and when the
// demand reaches capacity; on gpuspec33 also more than firstfit, the best
// of the others at that moment, whose node order fills the common model's
// nodes first.
func TestGpupackLeads(t *testing.T) {
	if testing.Short() {
		t.Skip("18 full trace runs; skipped in -short mode")
	}
	c := gpu.Default()
	for _, trace := range []string{"default", "gpushare100", "multigpu50", "gpuspec33"} {
		nodes, pods := loadOpenb(t, c, trace)
		others := []string{"fgd"}
		if trace == "gpuspec33" {
			others = append(others, "firstfit")
		}
		for seed := uint64(1); seed <= 2; seed++ {
			w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, seed)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][2]float64{}
			for _, p := range append([]string{placement.DefaultPolicy}, others...) {
				r, err := Run(context.Background(), nodes, w, c, Config{Policy: p, Seed: seed, Inflation: DefaultInflation, Typical: pods})
				if err != nil {
					t.Fatal(err)
				}
				got[p] = [2]float64{r.GPUAllocRatio, *r.GPUAllocRatioAtFull}
			}
			g := got[placement.DefaultPolicy]
			for _, p := range others {
				o := got[p]
				t.Logf("%s seed %d: %s %.2f%% / %.2f%% at 100%% arrived, gpupack %.2f%% / %.2f%%", trace, seed, p, 100*o[0], 100*o[1], 100*g[0], 100*g[1])
				if g[0] <= o[0] || g[1] <= o[1] {
					t.Errorf("%s seed %d: gpupack allocates %.4f at the end and %.4f at 100%% arrived, %s %.4f and %.4f: want gpupack ahead at both", trace, seed, g[0], g[1], p, o[0], o[1])
				}
			}
		}
	}
}

func BenchmarkRunDefaultTrace(b *testing.B) {
	c := gpu.Default()
	nf, src, _ := openb.Open(openb.Nodes)
	nodes, _ := cluster.LoadTraceNodes(nf, src, c)
	pf, src, _ := openb.Open(openb.DefaultPods)
	pods, _ := cluster.LoadTracePods(pf, src, c)
	w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{placement.DefaultPolicy, "fgd", "bestfit"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Run(context.Background(), nodes, w, c, Config{Policy: p, Seed: 1, Inflation: DefaultInflation, Typical: pods}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBounds is WorkloadBounds on openb default, seed 1, and its two
// parts alone.
func BenchmarkBounds(b *testing.B) {
	c := gpu.Default()
	nodes, pods := loadOpenb(b, c, openb.DefaultPods)
	w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, 1)
	if err != nil {
		b.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"all":       func() error { _, err := WorkloadBounds(context.Background(), nodes, w, c, 1); return err },
		"cap":       func() error { _, err := CapPlaceIfFits(nodes, w, c); return err },
		"hindsight": func() error { _, err := HindsightPack(context.Background(), nodes, w, c, 1); return err },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRunStopsOnCancel: a run stops soon after its context is done (a
// signal), with the context's error, instead of finishing the policy.
func TestRunStopsOnCancel(t *testing.T) {
	nodes, pods := loadSmall(t)
	w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) <= 128 {
		t.Fatalf("workload of %d pods is too small to stop in the middle", len(w))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last int
	_, err = Run(ctx, nodes, w, gpu.Default(), Config{Policy: "fgd", Seed: 7, Inflation: DefaultInflation, Typical: pods,
		Progress: func(done, total int) {
			last = done
			cancel()
		}})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "fgd stopped after 64 of") {
		t.Fatalf("err = %v, want fgd stopped after 64 pods with context.Canceled", err)
	}
	if last != 0 {
		t.Errorf("progress reached %d pods after the cancel", last)
	}
}
