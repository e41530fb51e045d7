package e2e

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/cli"
	"github.com/gpupack/gpupack/internal/testkit/rulegen"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// monthStart is where the generated fleets' history starts.
var monthStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// startMonth starts a real Prometheus on a TSDB that rulegen built in
// dir/data. Its blocks are of up to 18 h (promtool rounds a day down to a
// block range it knows); the server's compaction is held to 2 h blocks, so
// that it leaves them as they are, and never merges them while a report
// is measured.
func startMonth(tb testing.TB, dir string) *testcluster.Prometheus {
	return testcluster.StartPrometheus(tb, testcluster.PrometheusOptions{Dir: dir, Args: []string{"--storage.tsdb.max-block-duration=2h"}})
}

// TestHourlyReportOnGeneratedRules is the month's path at a small size:
// the rules' output for 8 GPUs x 3 days written by rulegen (the middle
// day as the month's days between its ends), loaded with promtool into a
// real Prometheus, and the real `report --accounting hourly` over the
// three days, whose pods must hold their GPUs and be active
// for the steps the generator says, read from the hourly rules.
func TestHourlyReportOnGeneratedRules(t *testing.T) {
	promtool := testcluster.NeedBinary(t, "promtool", "prometheus")
	f := rulegen.Fleet{GPUs: 8, Days: 3, Start: monthStart}
	dir := t.TempDir()
	if err := rulegen.Build(t.Context(), f, f.All(), promtool, filepath.Join(dir, "data"), 1); err != nil {
		t.Fatal(err)
	}
	prom := startMonth(t, dir)
	checkGeneratedReport(t, prom.URL, f, 71)
}

// TestHourlyReportOnGeneratedShards is TestHourlyReportOnGeneratedRules
// through Thanos Query over two Prometheus shards, each holding half of
// the GPUs and its own hourly windows (at an evaluation offset of its
// own): the middle day is in the hourly rules only, so the report reads
// both shards' hourly windows, or fails.
func TestHourlyReportOnGeneratedShards(t *testing.T) {
	promtool := testcluster.NeedBinary(t, "promtool", "prometheus")
	f := rulegen.Fleet{GPUs: 8, Days: 3, Start: monthStart}
	var opts []testcluster.ShardOptions
	for i, fs := range shardFleets(f, 2) {
		dir := t.TempDir()
		if err := rulegen.Build(t.Context(), fs.fleet, fs.shard, promtool, filepath.Join(dir, "data"), 1); err != nil {
			t.Fatal(err)
		}
		opts = append(opts, shardOptions(dir, i))
	}
	_, q := testcluster.StartThanosShards(t, opts)
	checkGeneratedReport(t, q.URL, f, 71+71)
}

// shardFleet is one shard of a generated fleet: its GPUs, and the fleet
// as its Prometheus records it (its own hourly evaluation offset).
type shardFleet struct {
	fleet rulegen.Fleet
	shard rulegen.Shard
}

// shardFleets splits f into n shards of consecutive GPUs, the i-th's
// hourly rules evaluated 23 minutes after the one before's.
func shardFleets(f rulegen.Fleet, n int) []shardFleet {
	var out []shardFleet
	for i := range n {
		fi := f
		fi.Offset1h = (f.Offset1h + time.Duration(i)*23*time.Minute) % time.Hour
		out = append(out, shardFleet{fi, rulegen.Shard{From: i * f.GPUs / n, To: (i + 1) * f.GPUs / n}})
	}
	return out
}

// shardOptions start the i-th shard of a generated fleet on its TSDB in
// dir/data, labelled cluster=shard-<i>, its compaction held as
// startMonth holds it.
func shardOptions(dir string, i int) testcluster.ShardOptions {
	return testcluster.ShardOptions{Dir: dir, ExternalLabels: map[string]string{"cluster": fmt.Sprintf("shard-%d", i)}, Args: []string{"--storage.tsdb.max-block-duration=2h"}}
}

// checkGeneratedReport runs the real `report --accounting hourly` against
// url over the three days of f, and requires every hour read from the
// rules, windows hourly windows among them, and each pod to hold its GPU
// and be active for the steps the generator says.
func checkGeneratedReport(t *testing.T, url string, f rulegen.Fleet, windows int) {
	t.Helper()
	var out bytes.Buffer
	root := cli.NewRoot(t.Context())
	root.SetOut(&out)
	root.SetArgs([]string{"report", "--prometheus", url, "--accounting", "hourly", "--window", "72h", "--end", f.End().Format(time.RFC3339), "--step", "30s", "--format", "json"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("report: %v", err)
	}
	var r usage.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	warnings := strings.Join(r.Quality.Warnings, "\n")
	for _, want := range []string{"72 of 72 hours read from gpupack's recording rules", fmt.Sprintf("%d hourly windows read", windows)} {
		if !strings.Contains(warnings, want) {
			t.Errorf("the report does not say %q: %q", want, r.Quality.Warnings)
		}
	}
	truth := f.Truth(f.Start, f.End())
	step := rulegen.Step.Seconds()
	got := map[string]rulegen.PodTruth{}
	for _, p := range r.Pods {
		got[p.Key()] = rulegen.PodTruth{HeldSteps: float64(p.AllocatedGPUSeconds) / step, ActiveSteps: p.ActiveGPUSeconds.Value() / step}
	}
	if len(truth) != 8*3*6 {
		t.Fatalf("the generator holds %d pods, want %d", len(truth), 8*3*6)
	}
	for pod, want := range truth {
		g, ok := got[pod]
		if !ok {
			t.Errorf("pod %s is not in the report", pod)
			continue
		}
		if math.Abs(g.HeldSteps-want.HeldSteps) > 1e-6 || math.Abs(g.ActiveSteps-want.ActiveSteps) > 1e-6 {
			t.Errorf("pod %s: report holds %+v steps, the generator %+v", pod, g, want)
		}
	}
	if len(got) != len(truth) {
		t.Errorf("the report has %d pods, the generator %d", len(got), len(truth))
	}
}

// BenchmarkHourlyMonth measures the real `gpupack report --accounting
// hourly --format json` over GPUPACK_BENCH_GPUS GPUs (1,000) x
// GPUPACK_BENCH_DAYS days (30) held by a real Prometheus: the rules'
// output written by rulegen and loaded with promtool, cached under
// GPUPACK_BENCH_CACHE ($HOME/.cache/gpupack/bench) by its parameters and
// the generator's version, rebuilt with GPUPACK_BENCH_REBUILD=1. With
// GPUPACK_BENCH_SHARDS=n (n > 1) the GPUs are split into n shards, each
// built and cached on its own with its own hourly evaluation offset, each
// served by a Prometheus and a Thanos sidecar, and the report reads them
// through one Thanos Query. It logs the build's time, and for each report
// gpupack's wall time, CPU and peak RSS (VmHWM, read while it runs), each
// engine's CPU over the report (every Prometheus, sidecar and the query,
// from /proc), per device-day too, and the load average beside them.
//
//	GPUPACK_E2E=1 go test ./internal/e2e -run XXX -bench HourlyMonth -benchtime 1x -v -timeout 3h
func BenchmarkHourlyMonth(b *testing.B) {
	promtool := testcluster.NeedBinary(b, "promtool", "prometheus")
	f := rulegen.Fleet{GPUs: testcluster.EnvInt(b, "GPUPACK_BENCH_GPUS", 1000), Days: testcluster.EnvInt(b, "GPUPACK_BENCH_DAYS", 30), Start: monthStart}
	shards := testcluster.EnvInt(b, "GPUPACK_BENCH_SHARDS", 1)
	if shards < 1 || shards > f.GPUs {
		b.Fatalf("GPUPACK_BENCH_SHARDS=%d: want 1 (one Prometheus) to the fleet's %d GPUs", shards, f.GPUs)
	}
	home, _ := os.UserHomeDir()
	cache := cmp.Or(os.Getenv("GPUPACK_BENCH_CACHE"), filepath.Join(home, ".cache", "gpupack", "bench"))
	b.Logf("load average %s", loadAverage())
	var dirs []string
	var took time.Duration
	for _, fs := range shardFleets(f, shards) {
		dir, t, err := rulegen.Cached(b.Context(), fs.fleet, fs.shard, promtool, cache, os.Getenv("GPUPACK_BENCH_REBUILD") == "1", runtime.NumCPU())
		if err != nil {
			b.Fatal(err)
		}
		if t > 0 {
			b.Logf("built GPUs [%d, %d) x %d days in %s (load average %s): %s", fs.shard.From, fs.shard.To, f.Days, t.Round(time.Second), loadAverage(), dir)
		} else {
			b.Logf("cached: %s", dir)
		}
		dirs, took = append(dirs, dir), took+t
	}
	bin := filepath.Join(b.TempDir(), "gpupack")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gpupack/gpupack/cmd/gpupack").CombinedOutput(); err != nil {
		b.Fatalf("go build gpupack: %v\n%s", err, out)
	}
	// The Prometheus on PATH serves the month (Debian's 2.42, or the one
	// hack/prometheus-bins.sh builds, put first on PATH).
	if out, err := exec.Command(testcluster.NeedBinary(b, "prometheus", "prometheus"), "--version").Output(); err == nil {
		b.Logf("%s", strings.SplitN(string(out), "\n", 2)[0])
	}
	url, engines := startEngines(b, dirs)
	deviceDays := float64(f.GPUs * f.Days)
	out := filepath.Join(b.TempDir(), "report.json")
	for b.Loop() {
		before := make([]time.Duration, len(engines))
		for i, e := range engines {
			before[i] = procCPU(b, e.pid)
		}
		wall, cpu, hwm := runReport(b, bin, out, "report", "--prometheus", url, "--accounting", "hourly", "--format", "json",
			"--window", (time.Duration(f.Days) * 24 * time.Hour).String(), "--step", "30s", "--end", f.End().Format(time.RFC3339))
		b.ReportMetric(wall.Seconds(), "s-wall")
		b.ReportMetric(hwm, "MiB-gpupack-peak")
		b.Logf("%d GPUs x %d days, %d shards: %s wall, gpupack %s CPU (%.2f ms per device-day) and %.0f MiB peak RSS (load average %s)",
			f.GPUs, f.Days, shards, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), float64(cpu.Microseconds())/1000/deviceDays, hwm, loadAverage())
		for i, e := range engines {
			used := procCPU(b, e.pid) - before[i]
			b.ReportMetric(used.Seconds(), "s-"+e.name+"-cpu")
			b.Logf("%s: %s CPU, %.2f ms per device-day", e.name, used.Round(time.Millisecond), float64(used.Microseconds())/1000/deviceDays)
		}
	}
	b.ReportMetric(took.Seconds(), "s-build")
}

// engine is a process that answers the report's queries, by name.
type engine struct {
	name string
	pid  int
}

// startEngines serves the TSDBs in dirs: one Prometheus for one, or a
// shard each (a Prometheus and a Thanos sidecar, labelled cluster=shard-i)
// behind a Thanos Query. It says the URL to report from and the
// processes that answer it.
func startEngines(b *testing.B, dirs []string) (string, []engine) {
	if len(dirs) == 1 {
		prom := startMonth(b, dirs[0])
		return prom.URL, []engine{{"prometheus", prom.PID()}}
	}
	var opts []testcluster.ShardOptions
	for i, dir := range dirs {
		opts = append(opts, shardOptions(dir, i))
	}
	shards, q := testcluster.StartThanosShards(b, opts)
	var engines []engine
	for i, s := range shards {
		engines = append(engines, engine{fmt.Sprintf("prometheus-%d", i), s.Prometheus.PID()}, engine{fmt.Sprintf("sidecar-%d", i), s.SidecarPID()})
	}
	return q.URL, append(engines, engine{"thanos-query", q.PID()})
}

// runReport runs bin with args, its JSON into out, and says its wall time,
// its CPU and its peak RSS in MiB (VmHWM, polled: a child's ru_maxrss
// starts from its parent's at the fork).
func runReport(b *testing.B, bin, out string, args ...string) (time.Duration, time.Duration, float64) {
	b.Helper()
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	hwm := 0.0
	for {
		select {
		case err := <-done:
			wall := time.Since(t0)
			if err != nil {
				b.Fatalf("gpupack %v: %v\n%s", args, err, stderr.String())
			}
			for _, want := range []string{"hours read from gpupack's recording rules", "hourly windows read from gpupack's hourly recording rules"} {
				if !bytes.Contains(mustRead(b, out), []byte(want)) {
					b.Fatalf("the report does not say %q:\n%s", want, stderr.String())
				}
			}
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			maxrss := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
			b.Logf("gpupack's ru_maxrss %.0f MiB (from the fork), VmHWM %.0f MiB", maxrss, hwm)
			return wall, cpu, hwm
		case <-time.After(50 * time.Millisecond):
			if v := vmHWM(cmd.Process.Pid); v > hwm {
				hwm = v
			}
		}
	}
}

func mustRead(b *testing.B, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// vmHWM is a process' peak RSS in MiB, 0 once it is gone.
func vmHWM(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// procCPU is a process' user and system CPU so far (/proc/PID/stat).
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}
