package promql

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// BenchmarkBlockSpan measures what the hourly path's grouping of days
// saves Prometheus: a daily figure of gpupack's hourly rules (an owner's
// VRAM maximum, combined over a day as the hourly path combines it) for
// GPUPACK_BENCH_PODS pods a day (2,000 by default), each recorded every
// 2 h for its day, over 30 days, backfilled twice: into blocks of up to
// 31 days (what a long retention merges them into) and into blocks of a
// day. It times, as medians of GPUPACK_BENCH_RUNS runs (7 by default)
// alternating between the two servers, one day's query on either, and on
// the long blocks seven days read a day to a query against the same seven
// days in one range query at a one-day step. Run it once:
//
//	GPUPACK_E2E=1 go test ./internal/source/promql -run XXX -bench BlockSpan -benchtime 1x -v
func BenchmarkBlockSpan(b *testing.B) {
	if os.Getenv("GPUPACK_E2E") == "" {
		b.Skip("set GPUPACK_E2E=1: backfills and starts two real Prometheus servers")
	}
	pods, runs := testcluster.EnvInt(b, "GPUPACK_BENCH_PODS", 2000), testcluster.EnvInt(b, "GPUPACK_BENCH_RUNS", 7)
	const days, step = 30, 30 * time.Second
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	figure := slices.IndexFunc(bucketFigures, func(f bucketFigure) bool { return f.name == "owner VRAM max" })
	fig := bucketFigures[figure]
	name := RecordedHourName(fig.name)

	file := filepath.Join(b.TempDir(), "recorded.om")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# TYPE %s gauge\n", name)
	for d := range days {
		for p := range pods {
			for h := 0; h < 24; h += 2 {
				at := start.Add(time.Duration(d)*24*time.Hour + time.Duration(h)*time.Hour + 17*time.Minute)
				fmt.Fprintf(w, "%s{%s=%q,Hostname=\"node-%03d\",gpu=\"%d\",UUID=\"GPU-%08d\",modelName=\"NVIDIA H100 80GB HBM3\",namespace=\"team-%d\",pod=\"job-%d-%d\",container=\"main\"} %d %d\n",
					name, StepLabel, stepValue(step), p/8, p%8, p, p%20, d, p, 1000+p+h, at.Unix())
			}
		}
	}
	fmt.Fprintln(w, "# EOF")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	serve := func(block time.Duration) *Source {
		dir := b.TempDir()
		testcluster.Backfill(b, filepath.Join(dir, "data"), file, block)
		prom := testcluster.StartPrometheus(b, testcluster.PrometheusOptions{Dir: dir})
		s, err := New(prom.URL)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	long, daily := serve(31*24*time.Hour), serve(24*time.Hour)

	queries, err := combinedQueries(step, Selector{}, 24*time.Hour-time.Millisecond, []int{figure}, RecordedHourName)
	if err != nil {
		b.Fatal(err)
	}
	q := queries[0]
	dayEnd := func(d int) time.Time { return start.Add(time.Duration(d+1)*24*time.Hour - time.Millisecond) }
	timed := func(s *Source, r v1.Range) (time.Duration, int) {
		t0 := time.Now()
		m, err := s.queryRange(b.Context(), q, r)
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(t0), len(m)
	}
	var onLong, onDaily, byDay, grouped []time.Duration
	for range runs {
		for _, s := range []*Source{long, daily} {
			took, n := timed(s, v1.Range{Start: dayEnd(10), End: dayEnd(10), Step: 24 * time.Hour})
			if n != pods {
				b.Fatalf("a day's query answered %d series, want %d", n, pods)
			}
			if s == long {
				onLong = append(onLong, took)
			} else {
				onDaily = append(onDaily, took)
			}
		}
		var sum time.Duration
		for d := 8; d < 15; d++ {
			took, _ := timed(long, v1.Range{Start: dayEnd(d), End: dayEnd(d), Step: 24 * time.Hour})
			sum += took
		}
		byDay = append(byDay, sum)
		took, n := timed(long, v1.Range{Start: dayEnd(8), End: dayEnd(14), Step: 24 * time.Hour})
		if n != 7*pods {
			b.Fatalf("seven days in one query answered %d series, want %d", n, 7*pods)
		}
		grouped = append(grouped, took)
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	b.Logf("%d pods a day x %d days; median of %d: a day's query %s on blocks of up to 31 days, %s on day blocks; seven days on the long blocks: %s a day to a query, %s in one range query",
		pods, days, runs, median(onLong), median(onDaily), median(byDay), median(grouped))
	for b.Loop() {
	}
}
