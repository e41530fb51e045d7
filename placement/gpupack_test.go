package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// sharesWorkload is a workload of 470-, 320-, 650- and 810-milli shares
// (a quarter each) and one 160 in a hundred, too rare to count as
// frequent.
func sharesWorkload(t *testing.T) Workload {
	var ds []*Demand
	for _, m := range []gpu.Milli{470, 320, 650, 810} {
		for range 25 {
			ds = append(ds, demand(t, makePod("s").milli(m).obj()))
		}
	}
	ds = append(ds, demand(t, makePod("rare").milli(160).obj()))
	return NewWorkload(ds, 1)
}

// TestUnfillable: what the frequent shares leave of a GPU's free compute
// at best.
func TestUnfillable(t *testing.T) {
	u := unfillableBy(sharesWorkload(t))
	got := map[gpu.Milli]gpu.Milli{}
	for _, f := range []gpu.Milli{0, 60, 190, 210, 320, 350, 530, 680, 970, 1000} {
		got[f] = u[f]
	}
	// 190 (beside an 810) stays free: the 160s are too rare to count;
	// 350 takes a 320; 530 a 470; 680 a 650; 970 a 650 and a 320; 1000
	// two 470s (60) or 650+320 (30): 30.
	want := map[gpu.Milli]gpu.Milli{0: 0, 60: 60, 190: 190, 210: 210, 320: 0, 350: 30, 530: 60, 680: 30, 970: 0, 1000: 30}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("unfillable (-want +got):\n%s", d)
	}
}

// TestGpupackPairsShares: a 320-milli share beside a 470 would leave 210
// that no frequent share fills; beside another 320 it leaves 360, which a
// third 320 fills to 40. fgd, which asks only whether a task fits a rest,
// takes the first; gpupack the second.
func TestGpupackPairsShares(t *testing.T) {
	w := sharesWorkload(t)
	s := stateWithFree(t, 530, 680)
	d := demand(t, makePod("x").milli(320).obj())
	got := map[string]int{}
	for _, name := range []string{"fgd", DefaultPolicy} {
		p, err := New(name, Options{Workload: w})
		if err != nil {
			t.Fatal(err)
		}
		_, got[name] = p.Score(d, s)
	}
	if d := cmp.Diff(map[string]int{"fgd": 0, DefaultPolicy: 1}, got); d != "" {
		t.Errorf("GPU chosen for the 320 (-want +got):\n%s", d)
	}
}

// scarceModelCase is a cluster of 64 A100s and 4 T4s, whose pods name the
// A100 in 3 of 10 cases, the T4 in 1 and no model in 6: the T4s are
// scarce for the pods that can only run there.
func scarceModelCase(t *testing.T) (Workload, map[int]int) {
	c := gpu.Default()
	var pods []*cluster.Pod
	for range 3 {
		pods = append(pods, makePod("a").whole(1).models("A100-80GB").obj())
	}
	pods = append(pods, makePod("t").whole(1).models("T4").obj())
	for range 6 {
		pods = append(pods, makePod("any").whole(1).obj())
	}
	gpus := map[int]int{c.MustLookup("A100-80GB").Index: 64, c.MustLookup("T4").Index: 4}
	return workloadOf(t, pods...), gpus
}

// TestModelPressure: each model's share of the demand of the pods that
// name it over its share of the GPUs (0.3 / (64/68), 0.1 / (4/68)).
func TestModelPressure(t *testing.T) {
	w, gpus := scarceModelCase(t)
	c := gpu.Default()
	got := modelPressure(w, gpus)
	want := map[int]float64{c.MustLookup("A100-80GB").Index: 0.3 * 68 / 64, c.MustLookup("T4").Index: 0.1 * 68 / 4}
	if d := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); d != "" {
		t.Errorf("pressure (-want +got):\n%s", d)
	}
	if got := modelPressure(w, nil); got != nil {
		t.Errorf("pressure without the cluster's GPUs = %v, want nil", got)
	}
}

// TestGpupackSparesScarceModels: a pod that names no model goes where the
// pods that name models need the GPUs least. fgd sends it to the T4 node,
// whose free GPUs the A100 pods cannot use (so filling it lowers the
// fragmentation most), and the T4 pods then find the T4s taken; gpupack
// sends it to the A100s.
func TestGpupackSparesScarceModels(t *testing.T) {
	w, gpus := scarceModelCase(t)
	states := []*NodeState{
		NewNodeState(makeNode("a100").gpus("A100-80GB", 8, cluster.Exclusive, 0).obj()),
		NewNodeState(makeNode("t4").gpus("T4", 4, cluster.Exclusive, 0).obj()),
	}
	d := demand(t, makePod("x").whole(1).obj())
	got := map[string]string{}
	for _, name := range []string{"fgd", DefaultPolicy} {
		p, err := New(name, Options{Workload: w, GPUsByModel: gpus})
		if err != nil {
			t.Fatal(err)
		}
		best, bestScore := "", -1.0
		for _, s := range states {
			if score, _ := p.Score(d, s); score > bestScore {
				best, bestScore = s.Node.Name, score
			}
		}
		got[name] = best
	}
	if d := cmp.Diff(map[string]string{"fgd": "t4", DefaultPolicy: "a100"}, got); d != "" {
		t.Errorf("node chosen for a pod that names no model (-want +got):\n%s", d)
	}
}
