package promsource

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/fakedcgm"
	"github.com/gpupack/gpupack/internal/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// BenchmarkBucketQueries backfills a fleet (GPUPACK_BENCH_GPUS, 48 by
// default) for two days at 30 s scrapes into a real Prometheus and times,
// on the second day, each bucket query one by one, then StreamBuckets over
// that day, so that a change to the queries is measured figure by figure
// on the same data. Run it once:
//
//	GPUPACK_E2E=1 go test ./internal/promsource -run XXX -bench BucketQueries -benchtime 1x -v
func BenchmarkBucketQueries(b *testing.B) {
	if os.Getenv("GPUPACK_E2E") == "" {
		b.Skip("set GPUPACK_E2E=1: backfills and starts a real Prometheus")
	}
	gpus := 48
	if v := os.Getenv("GPUPACK_BENCH_GPUS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("GPUPACK_BENCH_GPUS=%q: want a positive whole number", v)
		}
		gpus = n
	}
	const scrape, days = 30 * time.Second, 2
	fleet, err := fakedcgm.Fleet(gpus, days, 1, gpu.Default())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := b.TempDir()
	file := filepath.Join(dir, "history.om")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := fleet.WriteOpenMetrics(f, start, 0, fleet.Duration.D(), scrape, fakedcgm.Faults{}); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	testcluster.Backfill(b, filepath.Join(dir, "data"), file, 24*time.Hour)
	prom := testcluster.StartPrometheus(b, testcluster.PrometheusOptions{Dir: dir, Args: []string{"--query.lookback-delta=29s"}})
	s, err := New(prom.URL)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	day := usage.Window{Start: start.Add(24 * time.Hour), End: start.Add(48 * time.Hour), Step: scrape}
	r := v1.Range{Start: day.Start.Add(time.Hour - time.Millisecond), End: day.End.Add(-time.Millisecond), Step: time.Hour}
	type timing struct {
		name string
		d    time.Duration
	}
	for b.Loop() {
		var times []timing
		var sum time.Duration
		for _, q := range profiledQueries(scrape, time.Hour) {
			t0 := time.Now()
			if _, err := s.queryRange(ctx, q.query, r); err != nil {
				b.Fatal(err)
			}
			times = append(times, timing{q.name, time.Since(t0)})
			sum += time.Since(t0)
		}
		sort.Slice(times, func(i, j int) bool { return times[i].d > times[j].d })
		for _, t := range times {
			b.Logf("%-24s %8.3f s", t.name, t.d.Seconds())
		}
		b.Logf("%d queries one by one: %.3f s for %d device-days", len(times), sum.Seconds(), gpus)
		t0 := time.Now()
		n := 0
		if err := s.StreamBuckets(ctx, day, time.Hour, func(*usage.Bucket) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		b.ReportMetric(d.Seconds()/float64(gpus)*1000, "ms/device-day")
		b.Logf("StreamBuckets over the day: %.3f s, %d buckets, %.1f ms per device-day", d.Seconds(), n, d.Seconds()/float64(gpus)*1000)
	}
}

type profiledQuery struct{ name, query string }

func profiledQueries(step, bucket time.Duration) []profiledQuery {
	var out []profiledQuery
	for _, f := range bucketFigures {
		out = append(out, profiledQuery{f.name, expand(f.query, step, bucket, "")})
	}
	return out
}
