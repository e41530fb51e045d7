package promql

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/usage"
)

// dayOfAnswers is what the hourly path reads for one day of devices
// GPUs, each held by six pods of four hours in turn, as Prometheus
// answers it: the per-hour figures (a point per hour held) and the daily
// figures (a point per owner and device), with dcgm-exporter's labels.
func dayOfAnswers(devices int, start time.Time) (hourly, daily []model.Matrix) {
	labels := func(d, pod int) model.Metric {
		m := model.Metric{
			"Hostname": model.LabelValue(fmt.Sprintf("gpu-node-%04d", d/8)), "gpu": model.LabelValue(fmt.Sprint(d % 8)),
			"UUID":      model.LabelValue(fmt.Sprintf("GPU-%08x-1111-2222-3333-%012x", d, d)),
			"modelName": "NVIDIA A100-SXM4-80GB", StepLabel: "30s",
		}
		if pod >= 0 {
			m["namespace"], m["pod"], m["container"] = "team-a", model.LabelValue(fmt.Sprintf("train-%06d-x7k2p", d*6+pod)), "main"
		}
		return m
	}
	for i, f := range bucketFigures {
		if !f.owner || !perHourFigures[f.name] {
			continue
		}
		var m model.Matrix
		for d := range devices {
			for pod := range 6 {
				ss := &model.SampleStream{Metric: labels(d, pod)}
				ss.Metric[model.MetricNameLabel] = model.LabelValue(RecordedHourName(bucketFigures[i].name))
				for h := range 4 {
					at := start.Add(time.Duration(pod*4+h+1)*time.Hour + hourLag)
					ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(at.UnixNano()), Value: 120})
				}
				m = append(m, ss)
			}
		}
		hourly = append(hourly, m)
	}
	for _, i := range dailyFigures() {
		var m model.Matrix
		pods := []int{-1}
		if bucketFigures[i].owner {
			pods = []int{0, 1, 2, 3, 4, 5}
		}
		for d := range devices {
			for _, pod := range pods {
				at := start.Add(24*time.Hour + hourLag)
				m = append(m, &model.SampleStream{Metric: labels(d, pod), Values: []model.SamplePair{{Timestamp: model.TimeFromUnixNano(at.UnixNano()), Value: 480}}})
			}
		}
		daily = append(daily, m)
	}
	return hourly, daily
}

// BenchmarkPieceSetFile files a day of 250 GPUs' answers into a day's
// pieces and hands them on, as streamHourly does: gpupack's own work per
// day of the hourly path, besides decoding and accounting.
func BenchmarkPieceSetFile(b *testing.B) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(24 * time.Hour), Step: 30 * time.Second}
	hourly, daily := dayOfAnswers(250, start)
	names := map[string]*bucketFigure{}
	for i := range bucketFigures {
		names[RecordedHourName(bucketFigures[i].name)] = &bucketFigures[i]
	}
	hourlyAt := func(ss *model.SampleStream, t time.Time) (int, time.Time, *bucketFigure) {
		return pieceHourly, hourStart(w, t.Add(-hourLag).Add(time.Millisecond-HourWindow)), names[string(ss.Metric[model.MetricNameLabel])]
	}
	figs := dailyFigures()
	b.ReportAllocs()
	for b.Loop() {
		p := newPieceSet(w.Step, HourWindow)
		for k, m := range daily {
			fig := &bucketFigures[figs[k]]
			p.file(m, func(*model.SampleStream, time.Time) (int, time.Time, *bucketFigure) { return pieceDaily, start, fig })
		}
		for _, m := range hourly {
			p.file(m, hourlyAt)
		}
		n := 0
		if err := p.emit(func(*usage.Bucket) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if want := 250*6*4 + 250*6 + 250; n != want {
			b.Fatalf("%d buckets handed on, want %d", n, want)
		}
	}
}

// TestFileHoursDefaults files a day of per-hour figures as the second
// level records them, in an order that puts the figures with a default
// first: where a figure is recorded its value stands, where it is not it
// takes its default's (hourDefaults), an explicit 0 stays 0, and the day's
// piece holds the owner's held steps and activity samples added up from
// its hours, and the activity samples out of the hours.
func TestFileHoursDefaults(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(24 * time.Hour), Step: 30 * time.Second}
	fig := func(name string) *bucketFigure {
		i := slices.IndexFunc(bucketFigures, func(f bucketFigure) bool { return f.name == name })
		if i < 0 {
			t.Fatalf("no figure %q", name)
		}
		return &bucketFigures[i]
	}
	labels := model.Metric{"Hostname": "n1", "gpu": "0", "UUID": "GPU-1", "namespace": "ns", "pod": "p", "container": "main"}
	at := func(hour int) model.Time {
		return model.TimeFromUnixNano(start.Add(time.Duration(hour+1)*time.Hour + hourLag).UnixNano())
	}
	// Two hours: in the first everything equals its default (nothing
	// recorded but held steps, activity sum, VRAM max and first held); in
	// the second the pod shares its GPU half the time, its activity is
	// unknown for 10 steps, it exports no DRAM activity, its VRAM grows,
	// and it does not use the GPU.
	points := func(name string, vs ...[2]float64) figurePoints {
		ss := &model.SampleStream{Metric: labels}
		for _, v := range vs {
			ss.Values = append(ss.Values, model.SamplePair{Timestamp: at(int(v[0])), Value: model.SampleValue(v[1])})
		}
		return figurePoints{fig(name), model.Matrix{ss}}
	}
	figs := []figurePoints{
		points("held share", [2]float64{1, 90}),
		points("activity-known share", [2]float64{1, 85}),
		points("active share", [2]float64{1, 40}),
		points("activity samples", [2]float64{1, 110}),
		points("owner DRAM steps", [2]float64{1, 0}),
		points("owner VRAM p50", [2]float64{1, 1000}),
		points("owner VRAM p95", [2]float64{1, 3000}),
		points("first use", [2]float64{1, 0}),
		points("held steps", [2]float64{0, 120}, [2]float64{1, 120}),
		points("activity sum", [2]float64{0, 60}, [2]float64{1, 55}),
		points("owner VRAM max", [2]float64{0, 2000}, [2]float64{1, 4000}),
		points("first held", [2]float64{0, float64(start.Unix())}, [2]float64{1, float64(start.Unix() + 3600)}),
	}
	p := newPieceSet(w.Step, HourWindow)
	p.fileHours(figs, func(t time.Time) time.Time { return hourStart(w, t.Add(-hourLag).Add(time.Millisecond-HourWindow)) })
	p.settleDay(start)
	var got []usage.Bucket
	if err := p.emit(func(b *usage.Bucket) error { got = append(got, *b); return nil }); err != nil {
		t.Fatal(err)
	}
	type figures struct {
		held, share, known, active, samples, sum, dram, power float64
		vram                                                  usage.Percentiles
		firstHeld, firstUse                                   time.Time
	}
	of := func(b usage.Bucket) figures {
		return figures{b.HeldSteps, b.HeldShareSteps, b.ActivityKnownShareSteps, b.ActiveShareSteps, b.Activity.Samples, b.Activity.Sum, b.DRAMSteps, b.PowerSteps,
			b.VRAMUsedMiB, b.FirstHeld, b.FirstUse}
	}
	known := usage.Known
	want := []figures{
		{held: 120, share: 120, known: 120, active: 60, sum: 60, dram: 120, power: 120, firstHeld: start, firstUse: start},
		{held: 120, share: 90, known: 85, active: 40, sum: 55, dram: 0, power: 120, firstHeld: start.Add(time.Hour)},
		// The day's piece: PromQL's quantile_over_time of the hours' (2000
		// and 1000; 2000 and 3000), the larger maximum.
		{held: 240, samples: 230, vram: usage.Percentiles{P50: known(1500), P95: known(2950), Max: known(4000)}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d pieces handed on, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if g := of(got[i]); g != want[i] {
			t.Errorf("piece %d (%s, from %s): %+v, want %+v", i, got[i].Owner.Pod, got[i].Start.Format("15h"), g, want[i])
		}
	}
}
