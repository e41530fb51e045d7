package promql

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// BenchmarkBucketQueries backfills a fleet (GPUPACK_BENCH_GPUS, 48 by
// default) for two days at 30 s scrapes into a real Prometheus and times,
// on the second day, side by side in one run, each query of the
// subqueries-only reference (every figure a subquery over every device)
// and of the plain path (the check for device-hours that are not plain,
// each plain figure, and the subqueries on the flagged device-hours, hour
// by hour), then StreamBuckets over that day both ways, each the median of
// three runs, so that a change to the queries is measured figure by figure
// on the same data (the reference's queries once each unless
// GPUPACK_BENCH_RUNS=3: they take minutes). Run it once:
//
//	GPUPACK_E2E=1 go test ./internal/source/promql -run XXX -bench BucketQueries -benchtime 1x -v
func BenchmarkBucketQueries(b *testing.B) {
	if os.Getenv("GPUPACK_E2E") == "" {
		b.Skip("set GPUPACK_E2E=1: backfills and starts a real Prometheus")
	}
	const scrape, days = 30 * time.Second, 2
	gpus, start, prom := benchFleet(b, scrape, days)
	s, err := New(prom.URL)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	day := usage.Window{Start: start.Add(24 * time.Hour), End: start.Add(48 * time.Hour), Step: scrape}
	r := v1.Range{Start: day.Start.Add(time.Hour - time.Millisecond), End: day.End.Add(-time.Millisecond), Step: time.Hour}
	// runs is how many times the reference's queries run: once, for they
	// take minutes on a busy machine, or 3 (the median reported) where
	// GPUPACK_BENCH_RUNS=3.
	runs := 1
	if os.Getenv("GPUPACK_BENCH_RUNS") == "3" {
		runs = 3
	}
	median := func(n int, f func() error) (time.Duration, error) {
		var ds []time.Duration
		for range n {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			ds = append(ds, time.Since(t0))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2], nil
	}
	for b.Loop() {
		for _, path := range []struct {
			name    string
			queries []profiledQuery
		}{{"subqueries only", profiledQueries(scrape, time.Hour)}, {"plain", plainQueries(scrape, time.Hour)}} {
			var sum time.Duration
			for _, q := range path.queries {
				n := 3
				if path.name != "plain" {
					n = runs
				}
				d, err := median(n, func() error { _, err := s.queryRange(ctx, q.query, r); return err })
				if err != nil {
					b.Fatal(err)
				}
				sum += d
				b.Logf("%-18s %-26s %8.3f s", path.name, q.name, d.Seconds())
			}
			if path.name == "plain" {
				others, err := s.notPlain(ctx, r, scrape, time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				hours := others.hours()
				d, err := median(3, func() error {
					for _, t := range hours {
						for _, q := range fallbackQueries(scrape, time.Hour, others.selector(t)) {
							if _, err := s.queryRange(ctx, q, v1.Range{Start: t, End: t, Step: time.Hour}); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				sum += d
				b.Logf("%-18s %-26s %8.3f s (%d of %d device-hours, %d hours)", path.name, "subqueries where needed", d.Seconds(), len(others.devices), 24*gpus, len(hours))
			}
			b.Logf("%-18s %d queries one by one: %.3f s for %d device-days", path.name, len(path.queries), sum.Seconds(), gpus)
		}
		for _, only := range []bool{true, false} {
			var ref referencePaths
			if only {
				ref.fastest = pathSubqueries
			}
			src := s.readingBy(ref)
			n, k := 0, 3
			if only {
				k = runs
			}
			d, err := median(k, func() error {
				n = 0
				return src.StreamBuckets(ctx, day, time.Hour, func(*usage.Bucket) error { n++; return nil })
			})
			name := "plain"
			if err != nil && only {
				b.Logf("subqueries only StreamBuckets over the day: %v", err)
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			if only {
				name = "subqueries only"
			} else {
				b.ReportMetric(d.Seconds()/float64(gpus)*1000, "ms/device-day")
			}
			b.Logf("%-18s StreamBuckets over the day: %.3f s, %d buckets, %.1f ms per device-day", name, d.Seconds(), n, d.Seconds()/float64(gpus)*1000)
		}
	}
}

// benchFleet backfills a fleet of GPUPACK_BENCH_GPUS GPUs (48 by default)
// over days from its start, scraped every scrape, into a new real
// Prometheus.
func benchFleet(b *testing.B, scrape time.Duration, days int) (int, time.Time, *testcluster.Prometheus) {
	b.Helper()
	gpus := testcluster.EnvInt(b, "GPUPACK_BENCH_GPUS", 48)
	fleet, err := gpusim.Fleet(gpus, days, 1, gpu.Default())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return gpus, start, testcluster.FleetHistory(b, fleet, start, scrape, gpusim.Faults{})
}

type profiledQuery struct{ name, query string }

func profiledQueries(step, bucket time.Duration) []profiledQuery {
	var out []profiledQuery
	for _, f := range bucketFigures {
		out = append(out, profiledQuery{f.name, expand(f.query, step, bucket, "")})
	}
	return out
}

func plainQueries(step, bucket time.Duration) []profiledQuery {
	out := []profiledQuery{{"check (not plain)", expandPlain(plainCheckQuery(step, bucket), step, bucket, "")}}
	for _, f := range plainFigures {
		out = append(out, profiledQuery{f.name, expandPlain(f.query, step, bucket, "")})
	}
	for _, f := range bucketFigures {
		if f.name == "samples" {
			out = append(out, profiledQuery{f.name, expand(f.query, step, bucket, "")})
		}
	}
	return out
}
