package sim

import (
	"context"
	"fmt"
	"os"
	"strings"
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
	w, l, err := ch.Workload(pods, lifetimes, capacityOf(nodes))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Replay(context.Background(), nodes, w, l, gpu.Default(), ReplayConfig{Policy: policy, Seed: ch.Seed, Speedup: 1, Typical: pods, MeasureFromSeconds: ch.WarmupSeconds})
	if err != nil {
		t.Fatal(err)
	}
	return r
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
// as a steady churn at offered loads 0.80, 0.90 and 0.95 on a twentieth of
// its nodes, every policy of GPUPACK_CHURN (comma-separated), seeds 1 and 2,
// warmed up for the trace's longest run time (3,483 h) and measured over
// the next 4,000 h of arrivals.
// It skips unless GPUPACK_CHURN is set.
func TestChurnTable(t *testing.T) {
	policies := os.Getenv("GPUPACK_CHURN")
	if policies == "" {
		t.Skip("set GPUPACK_CHURN=policy,policy,... to run")
	}
	nodes, pods, lifetimes := loadOpenbReplay(t)
	nodes = sampleNodes(nodes, 20)
	var b strings.Builder
	for _, load := range []float64{0.80, 0.90, 0.95} {
		for seed := uint64(1); seed <= 2; seed++ {
			ch := SteadyChurn{Load: load, WarmupSeconds: 3500 * 3600, WindowSeconds: 4000 * 3600, Seed: seed}
			for _, p := range strings.Split(policies, ",") {
				r := churnRun(t, nodes, pods, lifetimes, p, ch)
				fmt.Fprintf(&b, "load %.2f seed %d %-13s GPUs %d alloc %.2f%% waited %.2f%% of %d | p50/p95/p99 h %.2f/%.2f/%.2f | demand GPU-h waited %.0f of %.0f (%.1f%%) |",
					load, seed, p, r.GPUs, 100*r.MeanGPUAlloc, 100*float64(r.GPUPodsWaited)/float64(r.GPUPodsPlaced), r.GPUPodsPlaced,
					r.WaitP50Seconds/3600, r.WaitP95Seconds/3600, r.WaitP99Seconds/3600, r.WaitedDemandGPUHours, r.DemandGPUHours, 100*r.WaitedDemandGPUHours/r.DemandGPUHours)
				for _, s := range r.ByShape {
					fmt.Fprintf(&b, " %s: %d/%d %.2f/%.2f/%.2f", s.Shape, s.Waited, s.Pods, s.WaitP50Seconds/3600, s.WaitP95Seconds/3600, s.WaitP99Seconds/3600)
				}
				fmt.Fprintf(&b, " (%.0f s)\n", r.WallSeconds)
			}
		}
	}
	t.Log("\n" + b.String())
}
