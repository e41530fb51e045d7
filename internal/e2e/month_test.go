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
	var out bytes.Buffer
	root := cli.NewRoot(t.Context())
	root.SetOut(&out)
	root.SetArgs([]string{"report", "--prometheus", prom.URL, "--accounting", "hourly", "--window", "72h", "--end", f.End().Format(time.RFC3339), "--step", "30s", "--format", "json"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("report: %v", err)
	}
	var r usage.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if want := "72 of 72 hours read from gpupack's recording rules"; !strings.Contains(strings.Join(r.Quality.Warnings, "\n"), want) {
		t.Errorf("the report does not say %q: %q", want, r.Quality.Warnings)
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
// the generator's version, rebuilt with GPUPACK_BENCH_REBUILD=1. It logs
// the build's time, and for each report gpupack's wall time, CPU and peak
// RSS (VmHWM, read while it runs), Prometheus' CPU over the report (from
// /proc), and the load average beside them.
//
//	GPUPACK_E2E=1 go test ./internal/e2e -run XXX -bench HourlyMonth -benchtime 1x -v -timeout 3h
func BenchmarkHourlyMonth(b *testing.B) {
	promtool := testcluster.NeedBinary(b, "promtool", "prometheus")
	f := rulegen.Fleet{GPUs: testcluster.EnvInt(b, "GPUPACK_BENCH_GPUS", 1000), Days: testcluster.EnvInt(b, "GPUPACK_BENCH_DAYS", 30), Start: monthStart}
	home, _ := os.UserHomeDir()
	cache := cmp.Or(os.Getenv("GPUPACK_BENCH_CACHE"), filepath.Join(home, ".cache", "gpupack", "bench"))
	b.Logf("load average %s", loadAverage())
	dir, took, err := rulegen.Cached(b.Context(), f, f.All(), promtool, cache, os.Getenv("GPUPACK_BENCH_REBUILD") == "1", runtime.NumCPU())
	if err != nil {
		b.Fatal(err)
	}
	if took > 0 {
		b.Logf("built %d GPUs x %d days in %s (load average %s): %s", f.GPUs, f.Days, took.Round(time.Second), loadAverage(), dir)
	} else {
		b.Logf("cached: %s", dir)
	}
	bin := filepath.Join(b.TempDir(), "gpupack")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gpupack/gpupack/cmd/gpupack").CombinedOutput(); err != nil {
		b.Fatalf("go build gpupack: %v\n%s", err, out)
	}
	prom := startMonth(b, dir)
	out := filepath.Join(b.TempDir(), "report.json")
	for b.Loop() {
		before := procCPU(b, prom.PID())
		wall, cpu, hwm := runReport(b, bin, out, "report", "--prometheus", prom.URL, "--accounting", "hourly", "--format", "json",
			"--window", (time.Duration(f.Days) * 24 * time.Hour).String(), "--step", "30s", "--end", f.End().Format(time.RFC3339))
		promCPU := procCPU(b, prom.PID()) - before
		b.ReportMetric(wall.Seconds(), "s-wall")
		b.ReportMetric(hwm, "MiB-gpupack-peak")
		b.ReportMetric(promCPU.Seconds(), "s-prometheus-cpu")
		b.Logf("%d GPUs x %d days: %s wall, gpupack %s CPU and %.0f MiB peak RSS, Prometheus %s CPU (load average %s)",
			f.GPUs, f.Days, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), hwm, promCPU.Round(time.Millisecond), loadAverage())
	}
	b.ReportMetric(took.Seconds(), "s-build")
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
			if want := "hours read from gpupack's recording rules"; !bytes.Contains(mustRead(b, out), []byte(want)) {
				b.Fatalf("the report does not say %q:\n%s", want, stderr.String())
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
