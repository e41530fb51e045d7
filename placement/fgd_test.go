package placement

import (
	"math"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// stateWithFree builds a two-GPU fractional node whose GPUs have the given
// free compute.
func stateWithFree(t *testing.T, frees ...gpu.Milli) *NodeState {
	t.Helper()
	n := makeNode("n").gpus("T4", len(frees), cluster.Fractional, 0).obj()
	s := NewNodeState(n)
	for i, f := range frees {
		if f < gpu.WholeGPU {
			d := demand(t, makePod("x").milli(gpu.WholeGPU-f).obj())
			s.Assign(d, AssignmentOn(d, s, []int{i}))
		}
	}
	return s
}

func workloadOf(t *testing.T, pods ...*cluster.Pod) Workload {
	var ds []*Demand
	for _, p := range pods {
		ds = append(ds, demand(t, p))
	}
	return NewWorkload(ds, 1)
}

// Hand-computed: half the tasks want 500 milli, half a whole GPU.
func TestFragmentationHandComputed(t *testing.T) {
	w := workloadOf(t, makePod("half").milli(500).obj(), makePod("whole").whole(1).obj())
	cases := map[string]struct {
		frees []gpu.Milli
		want  float64
	}{
		// 500-tasks fit both GPUs (nothing stranded); whole tasks fit GPU 0
		// and strand GPU 1's 600: 0.5*0 + 0.5*600.
		"one idle, one 600 free": {[]gpu.Milli{1000, 600}, 300},
		// Neither task fits: all 600 free is stranded for both.
		"two 300 free": {[]gpu.Milli{300, 300}, 600},
		// Everything fits: nothing stranded.
		"both idle": {[]gpu.Milli{1000, 1000}, 0},
		// 500-tasks strand GPU 1's 200, whole tasks strand it too: 0.5*200 + 0.5*200.
		"one idle, one 200 free": {[]gpu.Milli{1000, 200}, 200},
		"full":                   {[]gpu.Milli{0, 0}, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Fragmentation(stateWithFree(t, tc.frees...), &w)
			if math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Fragmentation = %v, want %v", got, tc.want)
			}
		})
	}
}

// A CPU-only task strands all free GPU, and a task that lacks CPU does too.
func TestFragmentationCPU(t *testing.T) {
	w := workloadOf(t, makePod("cpu").obj(), makePod("big").whole(1).cpu(100000).obj())
	got := Fragmentation(stateWithFree(t, 1000, 400), &w)
	if want := 1400.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("Fragmentation = %v, want %v", got, want)
	}
}

// FGD places a 400-milli pod on the GPU that grows fragmentation least:
// on GPU 1 (frees 1000,200 -> F 200, delta -100, score
// int(100*sigmoid(0.1)) = 52) rather than GPU 0 (frees 600,600 -> F 600,
// delta +300, score 42).
func TestFGDChoosesGPU(t *testing.T) {
	w := workloadOf(t, makePod("half").milli(500).obj(), makePod("whole").whole(1).obj())
	p, err := New("fgd", Options{Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	s := stateWithFree(t, 1000, 600)
	score, g := p.Score(demand(t, makePod("p").milli(400).obj()), s)
	if g != 1 || score != 52 {
		t.Errorf("Score = %v on GPU %d, want 52 on GPU 1", score, g)
	}
}

// FGD's score is an integer, so placements whose fragmentation changes
// differ by less than about 40 milli-GPU tie, and among tied GPUs the
// first is used.
func TestFGDQuantisedTiesGoToFirstGPU(t *testing.T) {
	for delta, want := range map[float64]int64{0: 50, -5: 50, -39: 50, -41: 51, 30: 49, 1e6: 0, -1e6: 100} {
		if got := fgdScore(delta); got != want {
			t.Errorf("fgdScore(%v) = %d, want %d", delta, got, want)
		}
	}
	w := workloadOf(t, makePod("tiny").milli(10).obj(), makePod("whole").whole(1).obj())
	p, err := New("fgd", Options{Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	// Frees 1000, 980. On GPU 0 the whole-GPU type loses its host: delta
	// 0.5*1970 - 0.5*980 = +495, score 37. On GPU 1 the whole type's
	// stranded 980 becomes 970: delta -5, score 50.
	s := stateWithFree(t, 1000, 980)
	score, g := p.Score(demand(t, makePod("p").milli(10).obj()), s)
	if g != 1 || score != 50 {
		t.Errorf("Score = %v on GPU %d, want 50 on GPU 1", score, g)
	}
	// Frees 980, 990: either GPU lowers the stranded 1970 by 10 (delta -5,
	// score 50); GPU 0 comes first.
	s = stateWithFree(t, 980, 990)
	score, g = p.Score(demand(t, makePod("p").milli(10).obj()), s)
	if g != 0 || score != 50 {
		t.Errorf("Score = %v on GPU %d, want 50 on GPU 0 (the first of two tied GPUs)", score, g)
	}
}

func TestPoliciesPickFeasibleGPUs(t *testing.T) {
	w := workloadOf(t, makePod("half").milli(500).obj(), makePod("whole").whole(1).obj())
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			p, err := New(name, Options{Workload: w, MaxNodeCPU: 64000, MaxNodeGPUMilli: 2000})
			if err != nil {
				t.Fatal(err)
			}
			s := stateWithFree(t, 300, 800)
			d := demand(t, makePod("p").milli(500).obj())
			score, g := p.Score(d, s)
			if math.IsNaN(score) {
				t.Errorf("score is NaN")
			}
			if g != -1 && g != 1 {
				t.Errorf("policy chose GPU %d, which has only 300 milli free", g)
			}
		})
	}
	if _, err := New("nope", Options{}); err == nil {
		t.Error("unknown policy accepted")
	}
}

func BenchmarkFitScore(b *testing.B) {
	var ds []*Demand
	for _, p := range []*cluster.Pod{makePod("a").milli(500).obj(), makePod("b").milli(250).obj(), makePod("c").whole(1).obj(), makePod("d").whole(8).obj(), makePod("e").obj()} {
		ds = append(ds, demand(b, p))
	}
	w := NewWorkload(ds, 1)
	for _, name := range []string{"fgd", DefaultPolicy, "bestfit"} {
		b.Run(name, func(b *testing.B) {
			p, _ := New(name, Options{Workload: w, MaxNodeCPU: 64000, MaxNodeGPUMilli: 8000})
			n := makeNode("n").gpus("T4", 8, cluster.Fractional, 0).obj()
			s := place(b, n, makePod("x").milli(300).obj(), makePod("y").milli(700).obj(), makePod("z").whole(2).obj())
			d := demand(b, makePod("p").milli(300).obj())
			b.ReportAllocs()
			for b.Loop() {
				if Fits(d, s) {
					p.Score(d, s)
				}
			}
		})
	}
}

// The fragmentation memo is a cache with a bound: visiting more node states
// than maxFragMemo (churn over weeks) keeps it at the bound, and a state
// scored after the memo started afresh scores as before.
func TestFragMemoBounded(t *testing.T) {
	w := workloadOf(t, makePod("half").milli(500).obj(), makePod("whole").whole(1).obj())
	m := fragMemo{w: &w, memo: map[fragKey]float64{}}
	s := stateWithFree(t, 1000, 600)
	first := m.frag(s, 1000, []gpu.Milli{1000, 600})
	for cpu := range gpu.CPUMilli(maxFragMemo + 1000) {
		m.frag(s, cpu+2000, []gpu.Milli{1000, 600})
		if len(m.memo) > maxFragMemo {
			t.Fatalf("memo holds %d states, over its bound %d", len(m.memo), maxFragMemo)
		}
	}
	if got := m.frag(s, 1000, []gpu.Milli{1000, 600}); got != first {
		t.Errorf("after the memo started afresh the state scores %v, before %v", got, first)
	}
}

// TestGPUClusteringReadsTheNodesShapes: gpuclustering groups pods by shape
// from the node's state alone, so a node rebuilt without a pod that left
// (as the replay and the scheduler plugin rebuild it) no longer counts it.
func TestGPUClusteringReadsTheNodesShapes(t *testing.T) {
	p, err := New("gpuclustering", Options{MaxNodeCPU: 64000, MaxNodeGPUMilli: 8000})
	if err != nil {
		t.Fatal(err)
	}
	n := makeNode("n").gpus("H100-80GB", 8, cluster.Exclusive, 0).obj()
	whole, share := makePod("whole").whole(1).obj(), makePod("share").milli(500).obj()
	score := func(s *NodeState, pod *cluster.Pod) float64 {
		v, _ := p.Score(demand(t, pod), s)
		return v
	}
	empty := NewNodeState(n)
	held := place(t, n, whole)
	if got := held.Shapes; got[1] != 1 || got[0] != 0 {
		t.Errorf("shapes after one whole-GPU pod %v, want one 1-GPU pod", got)
	}
	// Same shape only > empty > another shape there.
	base := 25 * float64(1000) / 8000
	if got, want := score(held, whole), base+75; got != want {
		t.Errorf("a 1-GPU pod next to a 1-GPU pod scores %v, want %v", got, want)
	}
	if got, want := score(held, share), base; got != want {
		t.Errorf("a shared pod next to a 1-GPU pod scores %v, want %v", got, want)
	}
	if got, want := score(empty, share), 25.0; got != want {
		t.Errorf("a shared pod on an empty node scores %v, want %v", got, want)
	}
	if s := (&Demand{}); ShapeOf(s) != -1 {
		t.Errorf("a demand without GPUs has shape %d, want -1", ShapeOf(s))
	}
}
