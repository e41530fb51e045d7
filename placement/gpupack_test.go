package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

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
