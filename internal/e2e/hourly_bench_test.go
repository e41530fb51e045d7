package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// BenchmarkHourlyReport backfills a fleet's history into a real Prometheus
// a day at a time (each day's OpenMetrics file is removed once loaded, to
// save disk), then runs `gpupack report --accounting hourly` over the last
// days of it for each length asked, measuring the report's wall time and
// gpupack's peak RSS, and the cost per added day between the shortest and
// the longest. By default it is the size, 1,000 GPUs x 30 days
// (reports of 7 and 30 days, 30 s scrapes); GPUPACK_BENCH_GPUS,
// GPUPACK_BENCH_DAYS (comma-separated lengths, the longest backfilled) and
// GPUPACK_BENCH_SCRAPE make it smaller. With GPUPACK_BENCH_RULES=1 it also
// records gpupack's rules over the whole history, level by level
// (promtool tsdb create-blocks-from rules, as an operator backfills new
// rules; its time is logged, not measured) and checks that each report
// read every hour from them. -benchtime Nx runs each report N times and reports the
// median. GPUPACK_BENCH_BASELINE=<a gpupack binary> runs that one too,
// alternating with this tree's, on the same history. Run it once:
//
//	GPUPACK_E2E=1 go test ./internal/e2e -run XXX -bench HourlyReport -benchtime 1x -timeout 24h
func BenchmarkHourlyReport(b *testing.B) {
	gpus := testcluster.EnvInt(b, "GPUPACK_BENCH_GPUS", 1000)
	var days []int
	for _, d := range strings.Split(envString("GPUPACK_BENCH_DAYS", "7,30"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || n < 1 {
			b.Fatalf("GPUPACK_BENCH_DAYS=%q: want comma-separated day counts such as 7,30", os.Getenv("GPUPACK_BENCH_DAYS"))
		}
		days = append(days, n)
	}
	longest := days[0]
	for _, d := range days {
		longest = max(longest, d)
	}
	scrape, err := time.ParseDuration(envString("GPUPACK_BENCH_SCRAPE", "30s"))
	if err != nil || scrape < 2*time.Second || time.Hour%scrape != 0 {
		b.Fatalf("GPUPACK_BENCH_SCRAPE=%q: want a scrape interval that divides an hour, such as 30s", os.Getenv("GPUPACK_BENCH_SCRAPE"))
	}

	dir := b.TempDir()
	bin := filepath.Join(dir, "gpupack")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gpupack/gpupack/cmd/gpupack").CombinedOutput(); err != nil {
		b.Fatalf("go build gpupack: %v\n%s", err, out)
	}
	fleet, err := gpusim.Fleet(gpus, longest, 1, gpu.Default())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	began := time.Now()
	prom := testcluster.FleetHistory(b, fleet, start, scrape, gpusim.Faults{})
	b.Logf("backfilled %d GPUs, %d pods, %d days at %s scrapes in %s", gpus, len(fleet.Pods), longest, scrape, time.Since(began).Round(time.Second))
	end := start.Add(time.Duration(longest) * 24 * time.Hour)
	recorded := os.Getenv("GPUPACK_BENCH_RULES") == "1"
	if recorded {
		// Level by level: the hourly rules read the 5-minute ones, which
		// must be loaded first; an hour past the end, so that the hourly
		// window ending in the last hour is recorded whatever the
		// group's evaluation offset.
		levels, err := promql.RulesYAMLByLevel(scrape, promql.Selector{})
		if err != nil {
			b.Fatal(err)
		}
		for i, rules := range levels {
			file := filepath.Join(dir, fmt.Sprintf("gpupack-rules-%d.yaml", i))
			if err := os.WriteFile(file, rules, 0o644); err != nil {
				b.Fatal(err)
			}
			began := time.Now()
			prom.BackfillRules(file, start, end.Add(time.Hour))
			b.Logf("recorded level %d of gpupack's rules over the %d days in %s", i+1, longest, time.Since(began).Round(time.Second))
		}
		// As a server that recorded them as it went holds them: merged.
		prom.WaitCompacted()
	}

	// GPUPACK_BENCH_BASELINE names another gpupack binary (an earlier
	// commit's) to run beside this one on the same history, alternating,
	// so that a comparison is made side by side in one run.
	bins := []struct{ name, path string }{{"", bin}}
	if base := os.Getenv("GPUPACK_BENCH_BASELINE"); base != "" {
		bins = append(bins, struct{ name, path string }{"baseline-", base})
	}
	type run struct {
		bin string
		d   int
	}
	walls := map[run][]time.Duration{} // every run's, for the median
	for b.Loop() {
		for _, bn := range bins {
			for _, d := range days {
				cmd := exec.Command(bn.path, "report", "--prometheus", prom.URL, "--accounting", "hourly", "--format", "json",
					"--window", (time.Duration(d) * 24 * time.Hour).String(), "--step", scrape.String(), "--end", end.Format(time.RFC3339))
				t0 := time.Now()
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("gpupack report over %d days: %v\n%s", d, err, tail(out))
				}
				took := time.Since(t0)
				walls[run{bn.name, d}] = append(walls[run{bn.name, d}], took)
				if want := fmt.Sprintf("%d of %d hours read from gpupack's recording rules", d*24, d*24); recorded && !strings.Contains(string(out), want) {
					b.Fatalf("gpupack report over %d days does not say %q:\n%s", d, want, tail(out))
				}
				rss := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024 // KiB on Linux
				b.ReportMetric(rss, fmt.Sprintf("MiB-%speak-%dd", bn.name, d))
				cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				b.Logf("%s%d GPUs x %d days: %s, %.0f MiB peak RSS, %s of gpupack's CPU, %d bytes of JSON", bn.name, gpus, d, took.Round(time.Millisecond), rss, cpu.Round(time.Millisecond), len(out))
			}
		}
	}
	// -benchtime Nx runs each report N times: the median of them.
	wall := map[run]time.Duration{}
	for r, ws := range walls {
		slices.Sort(ws)
		wall[r] = ws[len(ws)/2]
		b.ReportMetric(wall[r].Seconds(), fmt.Sprintf("s/%sreport-%dd", r.bin, r.d))
		b.Logf("%s%d GPUs x %d days: median %s of %d runs (%s to %s)", r.bin, gpus, r.d, wall[r].Round(time.Millisecond), len(ws), ws[0].Round(time.Millisecond), ws[len(ws)-1].Round(time.Millisecond))
	}
	for _, bn := range bins {
		if lo, hi := days[0], longest; hi > lo {
			perDay := (wall[run{bn.name, hi}] - wall[run{bn.name, lo}]) / time.Duration(hi-lo)
			b.ReportMetric(perDay.Seconds(), "s/"+bn.name+"added-day")
			b.Logf("%scost per added day (%d to %d days): %s, %.2f ms per device-day", bn.name, lo, hi, perDay.Round(time.Millisecond), float64(perDay.Microseconds())/1000/float64(gpus))
		}
	}
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}
