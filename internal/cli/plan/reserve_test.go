package plan

import (
	"context"
	"io"
	"math"
	"testing"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/plan"
)

// TestDemoReserveFollowsFromHourly runs report's accounting over the demo
// week (the fake-dcgm scenario) and the plan made from its usage file: the
// GPUs per model and hour add up (every hour allocated = active + idle +
// activity-unknown, in GPUs) to the report's totals, per model and for the
// cluster; and each reserve line rests on them: the measured levels are the
// levels those hours held in >= 99% of them, the baseline is no more than
// that, and the money follows from the baseline.
func TestDemoReserveFollowsFromHourly(t *testing.T) {
	m, err := demo.Measure()
	if err != nil {
		t.Fatal(err)
	}
	week := m.Week
	c := gpu.Default()
	byModel := map[string][2]float64{} // allocated, active GPU-seconds per model from the devices
	for _, d := range week.Devices {
		name := d.Model
		if gm, ok := c.Lookup(d.Model); ok {
			name = gm.Name
		}
		v := byModel[name]
		v[0] += float64(d.AllocatedGPUSeconds)
		if d.ActiveGPUSeconds.Known() {
			v[1] += d.ActiveGPUSeconds.Value()
		}
		byModel[name] = v
	}
	if len(week.Hourly) < 2 {
		t.Fatalf("hourly levels of %d models, want the demo's models", len(week.Hourly))
	}
	hours := int(week.End.Sub(week.Start).Hours())
	var clusterAlloc, clusterActive float64
	for _, mh := range week.Hourly {
		if len(mh.AllocatedGPUs) != hours {
			t.Fatalf("%s: %d hours, the week has %d", mh.Model, len(mh.AllocatedGPUs), hours)
		}
		var alloc, active float64
		for h := range hours {
			if sum := mh.ActiveGPUs[h] + mh.IdleGPUs[h] + mh.ActivityUnknownGPUs[h]; math.Abs(sum-mh.AllocatedGPUs[h]) > 3e-4 {
				t.Errorf("%s hour %d: active %v + idle %v + unknown %v = %v GPUs, allocated %v", mh.Model, h, mh.ActiveGPUs[h], mh.IdleGPUs[h], mh.ActivityUnknownGPUs[h], sum, mh.AllocatedGPUs[h])
			}
			alloc += mh.AllocatedGPUs[h] * 3600
			active += mh.ActiveGPUs[h] * 3600
		}
		want := byModel[mh.Model]
		// 4 decimals per hour: at most 0.00005 GPUs x 3600 s off each hour.
		slack := 0.2 * float64(hours)
		if math.Abs(alloc-want[0]) > slack || math.Abs(active-want[1]) > slack {
			t.Errorf("%s: hours add up to %.0f allocated and %.0f active GPU-seconds; its devices to %.0f and %.0f", mh.Model, alloc, active, want[0], want[1])
		}
		clusterAlloc += alloc
		clusterActive += active
	}
	slack := 0.2 * float64(hours*len(week.Hourly))
	if math.Abs(clusterAlloc-float64(week.Cluster.AllocatedGPUSeconds)) > slack || math.Abs(clusterActive-week.Cluster.ActiveGPUSeconds.Value()) > slack {
		t.Errorf("hours add up to %.0f allocated and %.0f active GPU-seconds; the cluster's totals are %v and %v", clusterAlloc, clusterActive, week.Cluster.AllocatedGPUSeconds, week.Cluster.ActiveGPUSeconds.Value())
	}

	p, _, err := app.DemoPlan(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Reservations) == 0 {
		t.Fatal("the demo plan reserves nothing")
	}
	for _, r := range p.Reservations {
		var mh *struct{ alloc, active []float64 }
		for _, x := range week.Hourly {
			if x.Model == r.Model {
				mh = &struct{ alloc, active []float64 }{x.AllocatedGPUs, x.ActiveGPUs}
			}
		}
		if mh == nil || r.Measured == nil {
			t.Errorf("%s: reserved without the measured hourly levels (%v)", r.Model, r.Measured)
			continue
		}
		if got, want := r.Measured.AllocatedGPUs, plan.LevelHeld(mh.alloc, plan.ReserveQuantile); got != want {
			t.Errorf("%s: measured allocated level %v, the hours hold %v in >= 99%% of them", r.Model, got, want)
		}
		if got, want := r.Measured.ActiveGPUs, plan.LevelHeld(mh.active, plan.ReserveQuantile); got != want {
			t.Errorf("%s: measured active level %v, the hours hold %v in >= 99%% of them", r.Model, got, want)
		}
		if float64(r.BaselineGPUs) > r.LevelGPUs || r.LevelGPUs > r.Measured.AllocatedGPUs+1e-9 || float64(r.BaselineGPUs) < r.LevelGPUs-1 {
			t.Errorf("%s: baseline %d from level %v, measured allocated level %v", r.Model, r.BaselineGPUs, r.LevelGPUs, r.Measured.AllocatedGPUs)
		}
		gm := c.MustLookup(r.Model)
		if want := math.Round(float64(r.BaselineGPUs)*gm.PricePerHour*plan.DefaultReserveDiscount*plan.HoursPerMonth*100) / 100; r.SavingPerMonth != want {
			t.Errorf("%s: saving %v per month, want %v for %d GPUs", r.Model, r.SavingPerMonth, want, r.BaselineGPUs)
		}
	}
}
