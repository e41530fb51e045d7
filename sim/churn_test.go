package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// sampleNodes keeps every k-th node: a smaller cluster of the same mix of
// models and sizes.
func sampleNodes(nodes []*cluster.Node, k int) []*cluster.Node {
	var out []*cluster.Node
	for i := 0; i < len(nodes); i += k {
		out = append(out, nodes[i])
	}
	return out
}

// churnRun is one policy's steady churn on the nodes.
func churnRun(t testing.TB, nodes []*cluster.Node, pods []*cluster.Pod, lifetimes []cluster.TraceLifetime, policy string, ch SteadyChurn) ReplayResult {
	t.Helper()
	r, err := churnReplay(nodes, pods, lifetimes, policy, ch)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// churnReplay is churnRun for a goroutine other than the test's.
func churnReplay(nodes []*cluster.Node, pods []*cluster.Pod, lifetimes []cluster.TraceLifetime, policy string, ch SteadyChurn) (ReplayResult, error) {
	w, l, err := ch.Workload(pods, lifetimes, capacityOf(nodes))
	if err != nil {
		return ReplayResult{}, err
	}
	return Replay(context.Background(), nodes, w, l, gpu.Default(), ReplayConfig{Policy: policy, Seed: ch.Seed, Speedup: 1, Typical: pods, MeasureFromSeconds: ch.WarmupSeconds})
}

// TestChurnSmall is the churn benchmark's small version: openb default's
// pods at offered load 0.9 on a twentieth of its nodes, warmed up for the
// longest run time of the trace. What must hold: the measured pods are
// those arriving after the warm-up, the demand that waited is part of the
// demand, the quantiles are in order, every shape's pods add up, the
// cluster is busy below its capacity, and a policy that scatters pods
// (random) keeps less of the cluster allocated than one that packs
// (gpupack): its queue of large pods grows.
func TestChurnSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("a churn of about 80,000 arrivals per policy")
	}
	nodes, pods, lifetimes := loadOpenbReplay(t)
	nodes = sampleNodes(nodes, 20)
	ch := SteadyChurn{Load: 0.9, WarmupSeconds: 3500 * 3600, WindowSeconds: 2000 * 3600, Seed: 1}
	alloc := map[string]float64{}
	for _, p := range []string{placement.DefaultPolicy, "random"} {
		r := churnRun(t, nodes, pods, lifetimes, p, ch)
		t.Logf("%s: %d GPUs, mean allocation %.1f%%, %d of %d GPU pods waited, p50/p95/p99 %.0f/%.0f/%.0f s, %.0f of %.0f demand GPU-h waited",
			p, r.GPUs, 100*r.MeanGPUAlloc, r.GPUPodsWaited, r.GPUPodsPlaced, r.WaitP50Seconds, r.WaitP95Seconds, r.WaitP99Seconds, r.WaitedDemandGPUHours, r.DemandGPUHours)
		if r.WindowSeconds > ch.WindowSeconds || r.WindowSeconds < 0.99*ch.WindowSeconds {
			t.Errorf("%s: measured %v s, want the window %v s", p, r.WindowSeconds, ch.WindowSeconds)
		}
		if r.WaitedDemandGPUHours > r.DemandGPUHours || r.DemandGPUHours <= 0 {
			t.Errorf("%s: %v of %v demand GPU-hours waited", p, r.WaitedDemandGPUHours, r.DemandGPUHours)
		}
		if r.WaitP50Seconds > r.WaitP95Seconds || r.WaitP95Seconds > r.WaitP99Seconds || r.WaitP99Seconds > r.WaitMaxSeconds {
			t.Errorf("%s: quantiles out of order: %+v", p, r)
		}
		n, w := 0, 0
		for _, s := range r.ByShape {
			n, w = n+s.Pods, w+s.Waited
		}
		if n != r.GPUPodsPlaced || w != r.GPUPodsWaited {
			t.Errorf("%s: shapes count %d pods, %d waited; the run %d, %d", p, n, w, r.GPUPodsPlaced, r.GPUPodsWaited)
		}
		if r.MeanGPUAlloc <= 0.5 || r.MeanGPUAlloc >= 1 {
			t.Errorf("%s: mean allocation %v at load 0.9, want busy but below capacity", p, r.MeanGPUAlloc)
		}
		alloc[p] = r.MeanGPUAlloc
	}
	if alloc["random"] >= alloc[placement.DefaultPolicy] {
		t.Errorf("random's mean allocation %.4f, gpupack's %.4f: want random's scatter to hold less", alloc["random"], alloc[placement.DefaultPolicy])
	}
}

// TestChurnTable is the benchmarks doc's churn table: openb default's pods
// as a steady churn at the offered loads of GPUPACK_CHURN_LOADS (default
// 0.80,0.90,0.95) on a twentieth of its nodes, every policy of
// GPUPACK_CHURN (comma-separated), the seeds of GPUPACK_CHURN_SEEDS
// (default 1-2), warmed up for the trace's longest run time (3,483 h) and
// measured over the next 4,000 h of arrivals. It prints each run, then per
// load and policy the mean over the seeds and the range of each figure:
// the waits of a heavy-tailed workload move more by seed than by policy.
// It skips unless GPUPACK_CHURN is set.
func TestChurnTable(t *testing.T) {
	policies := os.Getenv("GPUPACK_CHURN")
	if policies == "" {
		t.Skip("set GPUPACK_CHURN=policy,policy,... to run")
	}
	groups, err := seedGroups(cmp.Or(os.Getenv("GPUPACK_CHURN_SEEDS"), "1-2"))
	if err != nil {
		t.Fatal(err)
	}
	var loads []float64
	for _, v := range strings.Split(cmp.Or(os.Getenv("GPUPACK_CHURN_LOADS"), "0.80,0.90,0.95"), ",") {
		l, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("GPUPACK_CHURN_LOADS=%q: want loads such as 0.80,0.90,0.95", v)
		}
		loads = append(loads, l)
	}
	nodes, pods, lifetimes := loadOpenbReplay(t)
	nodes = sampleNodes(nodes, 20)
	type key struct {
		load   float64
		policy string
		seed   uint64
	}
	var mu sync.Mutex
	got := map[key]ReplayResult{}
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, load := range loads {
		for _, g := range groups {
			for seed := g[0]; seed <= g[1]; seed++ {
				for _, p := range strings.Split(policies, ",") {
					wg.Go(func() {
						sem <- struct{}{}
						defer func() { <-sem }()
						ch := SteadyChurn{Load: load, WarmupSeconds: 3500 * 3600, WindowSeconds: 4000 * 3600, Seed: seed}
						r, err := churnReplay(nodes, pods, lifetimes, p, ch)
						if err != nil {
							t.Errorf("load %v seed %d %s: %v", load, seed, p, err)
							return
						}
						mu.Lock()
						got[key{load, p, seed}] = r
						mu.Unlock()
					})
				}
			}
		}
	}
	wg.Wait()
	var b strings.Builder
	for _, load := range loads {
		for _, p := range strings.Split(policies, ",") {
			var runs []ReplayResult
			for _, g := range groups {
				for seed := g[0]; seed <= g[1]; seed++ {
					r := got[key{load, p, seed}]
					runs = append(runs, r)
					fmt.Fprintf(&b, "load %.2f seed %d %-13s GPUs %d alloc %.2f%% waited %.2f%% of %d | p50/p95/p99 h %.2f/%.2f/%.2f | demand GPU-h waited %.0f of %.0f (%.1f%%) |",
						load, seed, p, r.GPUs, 100*r.MeanGPUAlloc, 100*float64(r.GPUPodsWaited)/float64(r.GPUPodsPlaced), r.GPUPodsPlaced,
						r.WaitP50Seconds/3600, r.WaitP95Seconds/3600, r.WaitP99Seconds/3600, r.WaitedDemandGPUHours, r.DemandGPUHours, 100*r.WaitedDemandGPUHours/r.DemandGPUHours)
					for _, s := range r.ByShape {
						fmt.Fprintf(&b, " %s: %d/%d %.2f/%.2f/%.2f", s.Shape, s.Waited, s.Pods, s.WaitP50Seconds/3600, s.WaitP95Seconds/3600, s.WaitP99Seconds/3600)
					}
					fmt.Fprintf(&b, " (%.0f s)\n", r.WallSeconds)
				}
			}
			fmt.Fprintf(&b, "load %.2f %-13s over %d seeds, mean [min, max]: alloc %s%% | p95 %s h | p99 %s h | shares p95 %s h | 1-GPU p95 %s h | 8-GPU p50 %s h\n",
				load, p, len(runs),
				seedSpread(runs, 100, func(r ReplayResult) float64 { return r.MeanGPUAlloc }),
				seedSpread(runs, 1.0/3600, func(r ReplayResult) float64 { return r.WaitP95Seconds }),
				seedSpread(runs, 1.0/3600, func(r ReplayResult) float64 { return r.WaitP99Seconds }),
				seedSpread(runs, 1.0/3600, shapeWait("<1", func(s ShapeWaits) float64 { return s.WaitP95Seconds })),
				seedSpread(runs, 1.0/3600, shapeWait("1", func(s ShapeWaits) float64 { return s.WaitP95Seconds })),
				seedSpread(runs, 1.0/3600, shapeWait("8", func(s ShapeWaits) float64 { return s.WaitP50Seconds })))
		}
	}
	t.Log("\n" + b.String())
}

// seedSpread formats the mean, least and greatest of f over the runs, each
// times scale: "12.3 [10.1, 14.0]".
func seedSpread(runs []ReplayResult, scale float64, f func(ReplayResult) float64) string {
	var sum float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		v := scale * f(r)
		sum += v
		lo, hi = min(lo, v), max(hi, v)
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f]", sum/float64(len(runs)), lo, hi)
}

// shapeWait reads one figure of the waits of the shape's pods; NaN when
// the run measured none.
func shapeWait(shape string, f func(ShapeWaits) float64) func(ReplayResult) float64 {
	return func(r ReplayResult) float64 {
		for _, s := range r.ByShape {
			if s.Shape == shape {
				return f(s)
			}
		}
		return math.NaN()
	}
}
