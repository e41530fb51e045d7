package plan

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

func TestLevelHeld(t *testing.T) {
	cases := map[string]struct {
		hourly []float64
		q      float64
		want   float64
	}{
		"none":                 {nil, 0.99, 0},
		"one hour":             {[]float64{3}, 0.99, 3},
		"every hour":           {[]float64{4, 2, 3}, 1, 2},
		"one dip in 100 hours": {append([]float64{1}, repeatLevel(2, 99)...), 0.99, 2},
		"two dips in 100":      {append([]float64{1, 0.5}, repeatLevel(2, 98)...), 0.99, 1},
		"a week, one dip":      {append([]float64{0}, repeatLevel(5, 167)...), 0.99, 5},
		"a week, two dips":     {append([]float64{0, 1}, repeatLevel(5, 166)...), 0.99, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := LevelHeld(tc.hourly, tc.q); got != tc.want {
				t.Errorf("LevelHeld = %v, want %v", got, tc.want)
			}
		})
	}
}

func repeatLevel(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// reserveWorld is four L4 GPUs over 100 hours: three trainers, one busy
// every hour, one every hour but hour 50, one in hours 0..49; and a
// nightly Job busy in hours 0..9. The GPUs busy per hour are 3 or 4 in
// hours 0..49 and 2 in hours 50..99 but 1 in hour 50.
func reserveWorld(t *testing.T) (*cluster.Snapshot, *usage.Facts) {
	t.Helper()
	trainer := map[string]string{"app": "trainer"}
	s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{node("l1", "L4", 4, cluster.Exclusive, nil)},
		[]*cluster.Pod{pod("ml", "trainer-a", "l1", 1, trainer), pod("ml", "trainer-b", "l1", 1, trainer), pod("ml", "trainer-c", "l1", 1, trainer),
			pod("ml", "nightly-x", "l1", 1, map[string]string{"batch.kubernetes.io/job-name": "nightly"})})
	if err != nil {
		t.Fatal(err)
	}
	hourly := func(busy func(h int) bool) []float64 {
		out := make([]float64, 100)
		for h := range out {
			if busy(h) {
				out[h] = 0.9
			}
		}
		return out
	}
	facts := func(busy func(h int) bool) usage.PodFacts {
		f := obs(0.9, usage.Busy, 20, 0)
		f.HourlyActivity = hourly(busy)
		return f
	}
	u := &usage.Facts{Window: 100 * time.Hour, Pods: map[string]usage.PodFacts{
		"ml/trainer-a": facts(func(int) bool { return true }),
		"ml/trainer-b": facts(func(h int) bool { return h != 50 }),
		"ml/trainer-c": facts(func(h int) bool { return h < 50 }),
		"ml/nightly-x": facts(func(h int) bool { return h < 10 }),
	}}
	return s, u
}

// TestReserve checks the reservation baseline, its saving and its risk,
// and that the allocation measured per hour caps it.
func TestReserve(t *testing.T) {
	l4 := gpu.Default().MustLookup("L4")
	if !l4.Priced {
		t.Fatal("the catalogue's L4 has no price; the test needs one")
	}
	price := l4.PricePerHour
	o := DefaultOptions()
	money := func(x float64) float64 { return math.Round(x*100) / 100 }

	s, u := reserveWorld(t)
	pl, err := Make(context.Background(), s, u, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []Reservation{{Model: "L4", BaselineGPUs: 2, LevelGPUs: 2, Quantile: ReserveQuantile, MinGPUs: 1, PeakGPUs: 4, Hours: 100, Workloads: 2,
		Priced: true, PricePerHour: price, Discount: o.ReserveDiscount,
		SavingPerMonth: money(2 * price * o.ReserveDiscount * HoursPerMonth), RiskPerMonth: money(1 * price * (1 - o.ReserveDiscount) * HoursPerMonth)}}
	if diff := cmp.Diff(want, pl.Reservations); diff != "" {
		t.Errorf("reservations (-want +got):\n%s", diff)
	}
	wantSpot := []SpotCandidate{{Workload: "ml/nightly", Model: "L4", Why: spotWhy(pl.Decisions[1].w), GPUs: 0.1, Measured: true, Priced: true,
		Discount: o.SpotDiscount, SavingPerMonth: money(0.1 * price * o.SpotDiscount * HoursPerMonth)}}
	if diff := cmp.Diff(wantSpot, pl.SpotCandidates); diff != "" {
		t.Errorf("spot candidates (-want +got):\n%s", diff)
	}

	// Measured: 3 GPUs allocated every hour but 1.5 in hour 99, which caps
	// that hour: the level held in 99 of 100 hours falls to 1.5.
	s, u = reserveWorld(t)
	alloc := repeatLevel(3, 100)
	alloc[99] = 1.5
	u.Hourly = []usage.ModelHours{{Model: "L4", AllocatedGPUs: alloc, ActiveGPUs: repeatLevel(1, 100), IdleGPUs: repeatLevel(2, 100), ActivityUnknownGPUs: repeatLevel(0, 100)}}
	u.Hourly[0].IdleGPUs[99] = 0.5
	pl, err = Make(context.Background(), s, u, o)
	if err != nil {
		t.Fatal(err)
	}
	want[0].BaselineGPUs, want[0].LevelGPUs, want[0].PeakGPUs = 1, 1.5, 3
	want[0].Measured = &MeasuredLevels{AllocatedGPUs: 3, ActiveGPUs: 1, MinAllocatedGPUs: 1.5}
	want[0].SavingPerMonth = money(1 * price * o.ReserveDiscount * HoursPerMonth)
	want[0].RiskPerMonth = 0 // the commitment (1) is the window's minimum
	if diff := cmp.Diff(want, pl.Reservations); diff != "" {
		t.Errorf("reservations with the measured allocation (-want +got):\n%s", diff)
	}
}
