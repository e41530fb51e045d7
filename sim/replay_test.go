package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
)

// tinyTrace is one node with one GPU and pods whose waits are known:
// A holds the GPU from 0 to 10; B (whole GPU, arrives 2) and C (half a GPU,
// arrives 3, never scheduled in the trace) queue behind it; D asks for no
// GPU; E asks for two GPUs, more than any node has; F comes last.
const tinyTrace = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n" +
	"A,1000,1024,1,1000,0,10,0\n" +
	"B,1000,1024,1,1000,2,7,2\n" +
	"C,1000,1024,1,500,3,4,\n" +
	"D,1000,1024,0,0,4,6,4\n" +
	"E,1000,1024,2,1000,5,9,5\n" +
	"F,1000,1024,1,1000,20,21,20\n"

func loadTiny(t *testing.T) ([]*cluster.Node, []*cluster.Pod, []cluster.TraceLifetime) {
	t.Helper()
	c := gpu.Default()
	nodes, err := cluster.LoadTraceNodes(strings.NewReader("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,1,P100\n"), "nodes.csv", c)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.LoadTracePods(strings.NewReader(tinyTrace), "pods.csv", c)
	if err != nil {
		t.Fatal(err)
	}
	lifetimes, err := cluster.LoadTraceLifetimes(strings.NewReader(tinyTrace), "pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods, lifetimes
}

func TestReplayKnownWaits(t *testing.T) {
	nodes, pods, lifetimes := loadTiny(t)
	cases := map[string]struct {
		speedup float64
		want    ReplayResult
	}{
		// B waits 0..10 for A, C waits 3..15 for B (FIFO: B first, and the
		// GPU is full until B leaves), F arrives at 20 to an idle node.
		// Allocation over 0..20: 1 GPU for 15 s, half for 1 s. Offered
		// within the window (E's two GPUs included): A 10, B 5, C 0.5, E 8.
		"trace clock": {speedup: 1, want: ReplayResult{
			PodsPlaced: 5, PodsUnplaceable: 1, GPUPodsPlaced: 4, GPUPodsWaited: 2,
			WindowSeconds: 20, OfferedLoad: 23.5 / 20, MakespanSeconds: 21, MeanGPUAlloc: 15.5 / 20, PeakGPUAlloc: 1,
			WaitP50Seconds: 0, WaitP95Seconds: 12, WaitP99Seconds: 12, WaitMaxSeconds: 12,
			DemandGPUHours: (10 + 5 + 0.5 + 1) / 3600.0, WaitedDemandGPUHours: (5 + 0.5) / 3600.0,
			ByShape: []ShapeWaits{
				{Shape: "<1", Pods: 1, Waited: 1, WaitP50Seconds: 12, WaitP95Seconds: 12, WaitP99Seconds: 12},
				{Shape: "1", Pods: 3, Waited: 1, WaitP50Seconds: 0, WaitP95Seconds: 8, WaitP99Seconds: 8},
			},
		}},
		// Arrivals at half their times: A 0, B 1, C 1.5, F 10. A leaves at
		// 10 as F arrives: the departure comes first and B, queued earlier,
		// takes the GPU, so F queues behind C: C waits 1.5..15, F 10..16.
		"twice as fast": {speedup: 2, want: ReplayResult{
			PodsPlaced: 5, PodsUnplaceable: 1, GPUPodsPlaced: 4, GPUPodsWaited: 3,
			WindowSeconds: 10, OfferedLoad: 23.5 / 10, MakespanSeconds: 17, MeanGPUAlloc: 1, PeakGPUAlloc: 1,
			WaitP50Seconds: 6, WaitP95Seconds: 13.5, WaitP99Seconds: 13.5, WaitMaxSeconds: 13.5,
			DemandGPUHours: (10 + 5 + 0.5 + 1) / 3600.0, WaitedDemandGPUHours: (5 + 0.5 + 1) / 3600.0,
			ByShape: []ShapeWaits{
				{Shape: "<1", Pods: 1, Waited: 1, WaitP50Seconds: 13.5, WaitP95Seconds: 13.5, WaitP99Seconds: 13.5},
				{Shape: "1", Pods: 3, Waited: 2, WaitP50Seconds: 6, WaitP95Seconds: 9, WaitP99Seconds: 9},
			},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, policy := range []string{"gpupack", "fgd", "bestfit"} {
				got, err := Replay(context.Background(), nodes, pods, lifetimes, gpu.Default(), ReplayConfig{Policy: policy, Seed: 1, Speedup: tc.speedup})
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want
				want.Policy, want.Seed, want.Speedup, want.Nodes, want.GPUs, want.Pods = policy, 1, tc.speedup, 1, 1, len(pods)
				if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(ReplayResult{}, "WallSeconds", "Curve"), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", policy, diff)
				}
				if len(got.Curve) != ReplaySamples || got.Curve[0].Seconds != 0 || got.Curve[ReplaySamples-1].Seconds != want.WindowSeconds {
					t.Errorf("%s: curve of %d points from %v to %v; want %d from 0 to %v", policy, len(got.Curve), got.Curve[0].Seconds, got.Curve[len(got.Curve)-1].Seconds, ReplaySamples, want.WindowSeconds)
				}
			}
		})
	}
}

func TestReplayCurve(t *testing.T) {
	nodes, pods, lifetimes := loadTiny(t)
	got, err := Replay(context.Background(), nodes, pods, lifetimes, gpu.Default(), ReplayConfig{Policy: "bestfit", Seed: 1, Speedup: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Samples every 20/199 s: at 5 s A runs and B and C (1.5 GPUs) wait;
	// at 15.5 s only C runs; at 20 s F has just arrived and runs.
	at := func(s float64) ReplayPoint { return got.Curve[int(s/20*(ReplaySamples-1))] }
	for _, tc := range []struct {
		seconds       float64
		alloc, queued float64
	}{{5, 1, 1.5}, {15.5, 0.5, 0}, {20, 1, 0}} {
		p := at(tc.seconds)
		if p.AllocRatio != tc.alloc || p.QueuedRatio != tc.queued {
			t.Errorf("at %.2f s: alloc %v queued %v; want %v and %v", p.Seconds, p.AllocRatio, p.QueuedRatio, tc.alloc, tc.queued)
		}
	}
}

func TestReplayErrors(t *testing.T) {
	nodes, pods, lifetimes := loadTiny(t)
	cases := map[string]struct {
		lifetimes []cluster.TraceLifetime
		speedup   float64
		policy    string
		want      string
	}{
		"speedup zero":    {lifetimes, 0, "bestfit", "speedup 0"},
		"lifetimes short": {lifetimes[:2], 1, "bestfit", "6 pods but 2 lifetimes"},
		"unknown policy":  {lifetimes, 1, "nope", "nope"},
		"no time":         {[]cluster.TraceLifetime{{}, {}, {}, {}, {}, {}}, 1, "bestfit", "every pod arrives at the same time"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Replay(context.Background(), nodes, pods, tc.lifetimes, gpu.Default(), ReplayConfig{Policy: tc.policy, Speedup: tc.speedup})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

func loadOpenbReplay(t testing.TB) ([]*cluster.Node, []*cluster.Pod, []cluster.TraceLifetime) {
	t.Helper()
	c := gpu.Default()
	nf, src, _ := openb.Open(openb.Nodes)
	nodes, err := cluster.LoadTraceNodes(nf, src, c)
	if err != nil {
		t.Fatal(err)
	}
	pf, src, _ := openb.Open(openb.DefaultPods)
	pods, err := cluster.LoadTracePods(pf, src, c)
	if err != nil {
		t.Fatal(err)
	}
	lf, src, _ := openb.Open(openb.DefaultPods)
	lifetimes, err := cluster.LoadTraceLifetimes(lf, src)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods, lifetimes
}

// TestReplayOpenb replays openb default on the trace's own clock and checks
// what must hold of any replay: it is deterministic, every pod that fits an
// empty node is placed, allocation stays within capacity and the wait
// quantiles are in order.
func TestReplayOpenb(t *testing.T) {
	nodes, pods, lifetimes := loadOpenbReplay(t)
	cfg := ReplayConfig{Policy: "bestfit", Seed: 1, Speedup: 1}
	a, err := Replay(context.Background(), nodes, pods, lifetimes, gpu.Default(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Replay(context.Background(), nodes, pods, lifetimes, gpu.Default(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.WallSeconds, b.WallSeconds = 0, 0
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same replay twice, different results:\n%s", diff)
	}
	if a.PodsPlaced+a.PodsUnplaceable != a.Pods || a.PodsPlaced == 0 {
		t.Errorf("placed %d + unplaceable %d != %d pods", a.PodsPlaced, a.PodsUnplaceable, a.Pods)
	}
	if a.PeakGPUAlloc > 1 || a.MeanGPUAlloc > a.PeakGPUAlloc || a.MeanGPUAlloc <= 0 {
		t.Errorf("mean allocation %v, peak %v: want 0 < mean <= peak <= 1", a.MeanGPUAlloc, a.PeakGPUAlloc)
	}
	if a.WaitMaxSeconds < a.WaitP99Seconds || a.WaitP99Seconds < a.WaitP95Seconds || a.WaitP95Seconds < a.WaitP50Seconds || a.WaitedDemandGPUHours > a.DemandGPUHours {
		t.Errorf("waits p50 %v p95 %v p99 %v max %v, %v of %v demand GPU-hours waited: want quantiles in order, within the demand",
			a.WaitP50Seconds, a.WaitP95Seconds, a.WaitP99Seconds, a.WaitMaxSeconds, a.WaitedDemandGPUHours, a.DemandGPUHours)
	}
}
