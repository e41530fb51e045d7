package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// randomTrace is a small cluster and a pod list with lifetimes drawn with
// seed: 8 nodes of 1-8 GPUs; whole, fractional and CPU-only pods arriving
// over 10,000 s and running 10-2,000 s, lightly loading the cluster.
func randomTrace(t *testing.T, seed uint64) ([]*cluster.Node, []*cluster.Pod, []cluster.TraceLifetime) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var nb strings.Builder
	nb.WriteString("sn,cpu_milli,memory_mib,gpu,model\n")
	for i := range 8 {
		fmt.Fprintf(&nb, "n%d,%d,262144,%d,V100M16\n", i, 32000+rng.IntN(4)*16000, []int{1, 2, 4, 8}[rng.IntN(4)])
	}
	var pb strings.Builder
	pb.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n")
	for i := range 100 {
		gpus, milli := []int{0, 1, 1, 1, 2, 4}[rng.IntN(6)], 1000
		if gpus == 0 {
			milli = 0
		} else if gpus == 1 && rng.IntN(2) == 0 {
			milli = 100 * (1 + rng.IntN(9))
		}
		created := rng.IntN(10000)
		fmt.Fprintf(&pb, "p%d,%d,1024,%d,%d,%d,%d,%d\n", i, 1000*(1+rng.IntN(8)), gpus, milli, created, created+10+rng.IntN(1990), created)
	}
	c := gpu.Default()
	nodes, err := cluster.LoadTraceNodes(strings.NewReader(nb.String()), "nodes.csv", c)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.LoadTracePods(strings.NewReader(pb.String()), "pods.csv", c)
	if err != nil {
		t.Fatal(err)
	}
	lifetimes, err := cluster.LoadTraceLifetimes(strings.NewReader(pb.String()), "pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods, lifetimes
}

func TestAddReplayLoadCopies(t *testing.T) {
	nodes, pods, lifetimes := randomTrace(t, 1)
	capacity := capacityOf(nodes)
	const speedup, load = 2, 1.5
	p1, l1, info, err := AddReplayLoad(pods, lifetimes, capacity, speedup, load, 1)
	if err != nil {
		t.Fatal(err)
	}
	p2, l2, _, err := AddReplayLoad(pods, lifetimes, capacity, speedup, load, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p1, p2); diff != "" {
		t.Errorf("same seed, different copies:\n%s", diff)
	}
	if diff := cmp.Diff(l1, l2); diff != "" {
		t.Errorf("same seed, different copy times:\n%s", diff)
	}
	p3, l3, _, err := AddReplayLoad(pods, lifetimes, capacity, speedup, load, 2)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(p1, p3) && cmp.Equal(l1, l3) {
		t.Error("seeds 1 and 2 made the same copies")
	}

	if info.Copies == 0 || len(p1) != len(pods)+info.Copies || len(l1) != len(p1) {
		t.Fatalf("%d copies, %d pods, %d lifetimes from %d listed", info.Copies, len(p1), len(l1), len(pods))
	}
	if info.TraceLoad >= load || info.Load < load || math.Abs(info.Load-OfferedLoad(p1, l1, capacity, speedup)) > 1e-9 {
		t.Errorf("trace load %v, loaded %v (offered %v): want trace < %v <= loaded = offered", info.TraceLoad, info.Load, OfferedLoad(p1, l1, capacity, speedup), load)
	}
	if diff := cmp.Diff(pods, p1[:len(pods)]); diff != "" {
		t.Errorf("listed pods changed:\n%s", diff)
	}
	if diff := cmp.Diff(lifetimes, l1[:len(pods)]); diff != "" {
		t.Errorf("listed times changed:\n%s", diff)
	}
	byName := map[string]int{}
	lo, hi := lifetimes[0].CreatedSeconds, lifetimes[0].CreatedSeconds
	for i, p := range pods {
		byName[p.Name] = i
		lo, hi = min(lo, lifetimes[i].CreatedSeconds), max(hi, lifetimes[i].CreatedSeconds)
	}
	sources := map[int]bool{}
	for k, cp := range p1[len(pods):] {
		name, n, ok := strings.Cut(cp.Name, "-copy-")
		src, known := byName[name]
		if !ok || !known || n != fmt.Sprint(k) {
			t.Fatalf("copy %d is named %q; want <listed pod>-copy-%d", k, cp.Name, k)
		}
		sources[src] = true
		want := *pods[src]
		want.Name = cp.Name
		if diff := cmp.Diff(&want, cp); diff != "" {
			t.Errorf("copy %s differs from its source beyond the name:\n%s", cp.Name, diff)
		}
		l := l1[len(pods)+k]
		if l.RunSeconds() != lifetimes[src].RunSeconds() || l.CreatedSeconds < lo || l.CreatedSeconds > hi {
			t.Errorf("copy %s runs %d s from %d; want its source's %d s, arriving within [%d, %d]", cp.Name, l.RunSeconds(), l.CreatedSeconds, lifetimes[src].RunSeconds(), lo, hi)
		}
	}
	if len(sources) < min(info.Copies, len(pods))/2 {
		t.Errorf("%d copies of only %d of %d listed pods; want random sources", info.Copies, len(sources), len(pods))
	}
}

func TestAddReplayLoadErrors(t *testing.T) {
	nodes, pods, lifetimes := randomTrace(t, 1)
	capacity := capacityOf(nodes)
	cases := map[string]struct {
		speedup, load float64
		capacity      gpu.Milli
		want          string
	}{
		"load zero":       {1, 0, capacity, "load 0: want"},
		"load NaN":        {1, math.NaN(), capacity, "load NaN"},
		"speedup zero":    {0, 1.3, capacity, "speedup 0"},
		"no capacity":     {1, 1.3, 0, "no GPUs"},
		"already loaded":  {1, 0.01, capacity, "alone offers"},
		"too many copies": {1e-3, 100, capacity, "raise the speedup"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := AddReplayLoad(pods, lifetimes, tc.capacity, tc.speedup, tc.load, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// TestReplayLoadedInvariants replays small random traces as listed and
// loaded past capacity, with every policy, and checks against the pods'
// own start times what any replay must hold: no node ever holds more GPU
// or CPU than it has; every pod ran or fit no empty node (none is left
// queued); no pod starts before it arrives; pods of one shape start in
// arrival order (FIFO); the refused GPU-hours are the sum of GPUs asked for
// x time waited; and with load above 1 pods wait, more than as listed.
func TestReplayLoadedInvariants(t *testing.T) {
	c := gpu.Default()
	for seed := uint64(1); seed <= 3; seed++ {
		nodes, pods, lifetimes := randomTrace(t, seed)
		loadedPods, loadedLife, _, err := AddReplayLoad(pods, lifetimes, capacityOf(nodes), 1, 1.4, seed)
		if err != nil {
			t.Fatal(err)
		}
		for _, policy := range placement.Policies() {
			waited := map[string]int{}
			for name, trace := range map[string]struct {
				pods      []*cluster.Pod
				lifetimes []cluster.TraceLifetime
			}{"listed": {pods, lifetimes}, "loaded": {loadedPods, loadedLife}} {
				cfg := ReplayConfig{Policy: policy, Seed: seed, Speedup: 1, Typical: pods}
				r, err := newReplay(nodes, trace.pods, trace.lifetimes, c, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.run(context.Background(), nil); err != nil {
					t.Fatalf("seed %d, %s, %s: %v", seed, policy, name, err)
				}
				var res ReplayResult
				r.report(&res)
				waited[name] = res.GPUPodsWaited
				checkReplay(t, fmt.Sprintf("seed %d, %s, %s", seed, policy, name), nodes, r, res)
			}
			if waited["loaded"] == 0 || waited["loaded"] <= waited["listed"] {
				t.Errorf("seed %d, %s: %d GPU pods waited as listed, %d loaded to 1.4x; want some, and more loaded", seed, policy, waited["listed"], waited["loaded"])
			}
		}
	}
}

func checkReplay(t *testing.T, what string, nodes []*cluster.Node, r *replay, res ReplayResult) {
	t.Helper()
	type event struct {
		at   float64
		pod  int
		sign int
	}
	var events []event
	var demand, waited float64
	lastStart := map[int]float64{} // per shape, in arrival order
	for _, p := range r.order {
		d := r.demands[p]
		start := r.started[p]
		if math.IsNaN(start) {
			if slices.ContainsFunc(r.empty, func(s *placement.NodeState) bool { return placement.Fits(d, s) }) {
				t.Errorf("%s: pod %s fits an empty node but never ran", what, d.Pod.Name)
			}
			continue
		}
		if start < r.arrive[p] {
			t.Errorf("%s: pod %s starts at %v before it arrives at %v", what, d.Pod.Name, start, r.arrive[p])
		}
		if prev, ok := lastStart[r.shape[p]]; ok && start < prev {
			t.Errorf("%s: pod %s starts at %v, before an earlier pod of its shape (%v)", what, d.Pod.Name, start, prev)
		}
		lastStart[r.shape[p]] = start
		if d.Devices > 0 {
			asked := float64(gpuMilliOf(d)) / 1000 * r.runFor[p] / 3600
			demand += asked
			if start > r.arrive[p] {
				waited += asked
			}
		}
		events = append(events, event{start, p, 1}, event{start + r.runFor[p], p, -1})
	}
	if math.Abs(demand-res.DemandGPUHours) > 1e-9*max(1, demand) || math.Abs(waited-res.WaitedDemandGPUHours) > 1e-9*max(1, waited) || waited > demand {
		t.Errorf("%s: %v of %v demand GPU-hours waited; the pods say %v of %v", what, res.WaitedDemandGPUHours, res.DemandGPUHours, waited, demand)
	}
	if res.PodsPlaced+res.PodsUnplaceable != len(r.demands) || r.queued != 0 {
		t.Errorf("%s: %d placed + %d unplaceable of %d pods, %d still queued", what, res.PodsPlaced, res.PodsUnplaceable, len(r.demands), r.queued)
	}
	// Departures before arrivals at the same time, as the replay does.
	slices.SortStableFunc(events, func(a, b event) int {
		if a.at != b.at {
			return cmpFloat(a.at, b.at)
		}
		return a.sign - b.sign
	})
	gpuUsed := make([]gpu.Milli, len(nodes))
	cpuUsed := make([]gpu.CPUMilli, len(nodes))
	var total gpu.Milli
	for _, e := range events {
		d, n := r.demands[e.pod], r.nodeOf[e.pod]
		gpuUsed[n] += gpu.Milli(e.sign) * gpuMilliOf(d)
		cpuUsed[n] += gpu.CPUMilli(e.sign) * d.CPU
		total += gpu.Milli(e.sign) * gpuMilliOf(d)
		if gpuUsed[n] > gpu.Milli(len(nodes[n].GPUs))*gpu.WholeGPU || cpuUsed[n] > nodes[n].CPU {
			t.Fatalf("%s: at %v node %s holds %d milli-GPU and %d milli-CPU of %d GPUs and %d milli-CPU", what, e.at, nodes[n].Name, gpuUsed[n], cpuUsed[n], len(nodes[n].GPUs), nodes[n].CPU)
		}
		if total > r.capacity {
			t.Fatalf("%s: at %v the cluster holds %d of %d milli-GPU", what, e.at, total, r.capacity)
		}
	}
	if res.PeakGPUAlloc > 1 {
		t.Errorf("%s: peak allocation %v", what, res.PeakGPUAlloc)
	}
	for _, p := range res.Curve {
		if p.AllocRatio > 1 || p.AllocRatio < 0 {
			t.Errorf("%s: allocation %v at %v s", what, p.AllocRatio, p.Seconds)
		}
	}
}

func cmpFloat(a, b float64) int {
	if a < b {
		return -1
	}
	return 1
}

// BenchmarkReplay is the churn replay of openb default on the trace's own
// clock, and loaded to 1.3x capacity at speedup 200 (the README's run, one
// seed); run the loaded one with -benchtime 1x.
func BenchmarkReplay(b *testing.B) {
	nodes, pods, lifetimes := loadOpenbReplay(b)
	loadedPods, loadedLife, _, err := AddReplayLoad(pods, lifetimes, capacityOf(nodes), 200, 1.3, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		pods      []*cluster.Pod
		lifetimes []cluster.TraceLifetime
		speedup   float64
	}{{"trace", pods, lifetimes, 1}, {"load1.3", loadedPods, loadedLife, 200}} {
		for _, p := range []string{placement.DefaultPolicy, "fgd", "bestfit"} {
			b.Run(tc.name+"/"+p, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Replay(context.Background(), nodes, tc.pods, tc.lifetimes, gpu.Default(), ReplayConfig{Policy: p, Seed: 1, Speedup: tc.speedup, Typical: pods}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
