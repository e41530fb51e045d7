package promql

import (
	"fmt"
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
