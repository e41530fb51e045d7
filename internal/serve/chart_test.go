package serve

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/sim"
)

// TestHourTicks: the ticks of the hourly charts fall on hour boundaries at
// a spacing that gives at most eight, read forward in time, and name the
// day: midnights by date from a spacing of a day, whole hours below it
// with the date at midnight and on the first tick.
func TestHourTicks(t *testing.T) {
	hoursFrom := func(start time.Time, n int) []app.Hour {
		hs := make([]app.Hour, n)
		for i := range hs {
			hs[i].Start = start.Add(time.Duration(i) * time.Hour)
		}
		return hs
	}
	cases := map[string]struct {
		hours []app.Hour
		want  []string
	}{
		"a week from a midnight": {hoursFrom(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), 168),
			[]string{"Mon Jan 5", "Tue Jan 6", "Wed Jan 7", "Thu Jan 8", "Fri Jan 9", "Sat Jan 10", "Sun Jan 11"}},
		"a day from 13:00": {hoursFrom(time.Date(2026, 1, 5, 13, 0, 0, 0, time.UTC), 24),
			[]string{"Jan 5 15:00", "18:00", "21:00", "Jan 6 00:00", "03:00", "06:00", "09:00", "12:00"}},
		"thirty days": {hoursFrom(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 720),
			[]string{"Sat Jan 3", "Wed Jan 7", "Sun Jan 11", "Thu Jan 15", "Mon Jan 19", "Fri Jan 23", "Tue Jan 27"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := axis{lo: -0.5, hi: float64(len(tc.hours)) - 0.5, from: 64, to: 704}
			ticks := hourTicks(tc.hours, x)
			var got []string
			for i, tk := range ticks {
				got = append(got, tk.Label)
				if i > 0 && tk.Pos <= ticks[i-1].Pos {
					t.Errorf("tick %q at %v is not right of %q at %v", tk.Label, tk.Pos, ticks[i-1].Label, ticks[i-1].Pos)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ticks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCurveBand: the simulator chart shows the band where the policies,
// the hindsight packing and the cap end, not 0..100%: every run's
// last point and both levels lie inside it, every point it keeps (from
// xLo on) too, and its low is well above 0.
func TestCurveBand(t *testing.T) {
	run := func(name string, ends float64) app.CurveRun {
		var pts []sim.Point
		for x := 0.05; x <= 1.3; x += 0.05 {
			pts = append(pts, sim.Point{ArrivedRatio: x, AllocRatio: min(x, ends)})
		}
		return app.CurveRun{Result: sim.Result{Policy: name}, Points: pts}
	}
	runs := []app.CurveRun{run("fgd", 0.96), run("gpupack", 0.955), run("bestfit", 0.93)}
	levels := []float64{0.986, 0.963}
	b := curveBand(runs, levels)
	if b.yLo < 0.8 || b.yHi > 1 || b.yLo >= 0.93 || b.yHi <= 0.986 {
		t.Errorf("band y %v..%v, want it around 0.93..0.986 and within 0.8..1", b.yLo, b.yHi)
	}
	for _, r := range runs {
		for _, p := range r.Points {
			if p.ArrivedRatio >= b.xLo && (p.AllocRatio < b.yLo || p.AllocRatio > b.yHi) {
				t.Errorf("%s: point %+v is kept (x >= %v) but outside y %v..%v", r.Policy, p, b.xLo, b.yLo, b.yHi)
			}
		}
		if last := r.Points[len(r.Points)-1]; last.ArrivedRatio < b.xLo || last.ArrivedRatio > b.xHi {
			t.Errorf("%s: the last point %+v is outside x %v..%v", r.Policy, last, b.xLo, b.xHi)
		}
	}
	ticks, step := niceTicks(b.yLo, b.yHi)
	if len(ticks) < 2 || len(ticks) > 7 || percentTick(ticks[0], step) == "0%" {
		t.Errorf("y ticks %v (step %v), want two to seven in the band", ticks, step)
	}
}
