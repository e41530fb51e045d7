package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/internal/cli"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// startFleetShards starts the two shards, histories from start, and a
// Thanos Query over them.
func startFleetShards(t *testing.T, start time.Time) ([]*testcluster.Shard, *testcluster.ThanosQuery) {
	t.Helper()
	var opts []testcluster.ShardOptions
	for cluster, scenario := range map[string]string{"a": shardA, "b": shardB} {
		opts = append(opts, testcluster.ShardOptions{Dir: shardHistory(t, scenario, cluster, start), ExternalLabels: map[string]string{"cluster": cluster}, Args: []string{lookback}})
	}
	slices.SortFunc(opts, func(x, y testcluster.ShardOptions) int {
		return cmp.Compare(x.ExternalLabels["cluster"], y.ExternalLabels["cluster"])
	})
	return testcluster.StartThanosShards(t, opts, lookback)
}

// TestThanosAccountsTheFleet backfills three hours of two clusters into
// two shards and requires gpupack's raw and hourly reports through Thanos
// Query over both to be the two shards' reports (each read from its own
// Prometheus) side by side: every device row the same, the cluster's
// GPU-seconds their sum, read from the series, from the 5-minute rules
// recorded in each shard, then from the hourly ones too (each shard's at
// its own evaluation offset). With one shard down, Thanos answers partially
// (warnings, the other shard's series): the report fails and says so,
// rather than accounting the fleet without the missing shard's GPUs.
func TestThanosAccountsTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Prometheus, two Thanos sidecars and a Thanos Query")
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	shards, q := startFleetShards(t, start)
	end := start.Add(3 * time.Hour)
	for _, accounting := range []string{"raw", "hourly"} {
		checkFleetSum(t, shards, q, accounting, end)
	}
	// The 5-minute rules, recorded in each shard's Prometheus, are read
	// through the sidecars as any series: the hourly path takes every hour
	// from them.
	for _, s := range shards {
		recordRules(t, s.Prometheus, start, end.Add(time.Hour), 0)
	}
	q.WaitStoresUp(t)
	recorded := "3 of 3 hours read from gpupack's recording rules"
	checkFleetSum(t, shards, q, "hourly", end, recorded)
	// The 1-hour rules, recorded in each shard too, each at its own
	// evaluation offset: the fleet's report reads each shard's hourly
	// windows, as each shard's own report does.
	for _, s := range shards {
		recordRules(t, s.Prometheus, start, end.Add(time.Hour), 1)
	}
	q.WaitStoresUp(t)
	checkOwnOffsets(t, q.URL, end)
	hourly := "hourly windows read from gpupack's hourly recording rules"
	reports := checkFleetSum(t, shards, q, "hourly", end, recorded, hourly)
	a, b, fleet := hourlyWindows(t, reports[0]), hourlyWindows(t, reports[1]), hourlyWindows(t, reports[2])
	if a == 0 || b == 0 || fleet != a+b {
		t.Errorf("hourly windows read: %d through Thanos; want shard a's %d and shard b's %d, none of them 0", fleet, a, b)
	}

	shards[1].Stop()
	for _, accounting := range []string{"raw", "hourly"} {
		var out bytes.Buffer
		err := gpupackCommand(t, &out, reportArgs(q.URL, accounting, end)...).ExecuteContext(t.Context())
		if err == nil || !strings.Contains(err.Error(), "partial answer") {
			t.Errorf("%s with shard b down: error %v; want the partial answer named", accounting, err)
		}
		if strings.Contains(out.String(), `"devices"`) {
			t.Errorf("%s with shard b down printed a report:\n%s", accounting, out.String())
		}
	}
}

// TestServeOverThanos runs `gpupack serve` against Thanos Query over the
// two shards, their histories ending now, and a real apiserver with both
// clusters' GPU nodes: its /api/v1/report lists every device of both
// shards, as report through Thanos over the same window does. With shard b
// down, Thanos answers partially: serve's refresh fails, /readyz names the
// partial answer, and the report it serves is still the last whole one,
// shard b's GPUs as they were, not idle.
func TestServeOverThanos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Prometheus, two Thanos sidecars, a Thanos Query and a control plane")
	}
	start := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Minute)
	shards, q := startFleetShards(t, start)
	kc := testcluster.Start(t, testcluster.Options{})
	kc.AddGPUNode("a-node", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 3})
	kc.AddGPUNode("b-node", testcluster.GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 2})
	for _, p := range []struct{ ns, name, node string }{{"train", "busy", "a-node"}, {"lab", "bursty", "b-node"}} {
		kc.CreateNamespace(p.ns)
		kc.CreateGPUPod(p.ns, p.name, p.node, "nvidia.com/gpu", 1)
	}
	base := startServe(t, "serve", "--prometheus", q.URL, "--kubeconfig", kc.Kubeconfig(), "--listen", "127.0.0.1:0",
		"--window", "2h", "--step", thanosScrape.String(), "--refresh", "2s")
	waitServe(t, base+"/readyz", func(code int, body string) bool { return code == http.StatusOK })

	// serve's window is --window and the current partial hour; report's
	// raw path reads any window, and agrees with the hourly path within 1%.
	served := serveReport(t, base)
	var out bytes.Buffer
	args := []string{"report", "--prometheus", q.URL, "--accounting", "raw", "--window", served.End.Sub(served.Start).String(),
		"--end", served.End.Format(time.RFC3339), "--step", thanosScrape.String(), "--format", "json"}
	if err := gpupackCommand(t, &out, args...).ExecuteContext(t.Context()); err != nil {
		t.Fatalf("report through Thanos: %v\n%s", err, out.String())
	}
	var reported usage.Report
	if err := json.Unmarshal(out.Bytes(), &reported); err != nil {
		t.Fatal(err)
	}
	want, got := deviceSeconds(reported.Devices), deviceSeconds(served.Devices)
	if diff := gocmp.Diff(want, got, cmpopts.EquateApprox(0.01, 1)); diff != "" || len(got) != 5 {
		t.Errorf("serve's devices through Thanos (-report +serve), want 5 within 1%%:\n%s", diff)
	}

	shards[1].Stop()
	waitServe(t, base+"/readyz", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "partial answer")
	})
	after := serveReport(t, base)
	if diff := gocmp.Diff(deviceSeconds(served.Devices), deviceSeconds(after.Devices)); diff != "" {
		t.Errorf("serve's devices after shard b went down (-before +after):\n%s", diff)
	}
}

// deviceSecondsRow is what a device row accounts, by device.
type deviceSecondsRow struct {
	Device                            string
	Capacity, Allocated, Active, Idle float64
}

// deviceSeconds are the rows' GPU-seconds, sorted by device.
func deviceSeconds(ds []usage.DeviceUsage) []deviceSecondsRow {
	var out []deviceSecondsRow
	for _, d := range sortedDevices(ds) {
		out = append(out, deviceSecondsRow{d.Node + "/" + d.GPU, float64(d.CapacityGPUSeconds), float64(d.AllocatedGPUSeconds),
			d.ActiveGPUSeconds.Value(), d.IdleAllocatedGPUSeconds.Value()})
	}
	return out
}

// startServe runs gpupack with args (a serve command listening on port 0)
// until the test ends and returns the base URL it prints.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root := cli.NewRoot(ctx)
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(pw)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "serving gpupack on "); ok {
				url <- strings.TrimSuffix(rest, "/")
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case u := <-url:
		return u
	case err := <-done:
		t.Fatalf("serve ended before serving: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("serve did not print its address within 2 minutes")
	}
	return ""
}

// waitServe polls url until ok says its answer is the one awaited.
func waitServe(t *testing.T, url string, ok func(code int, body string) bool) {
	t.Helper()
	var code int
	var body string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			code, body = 0, err.Error()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if code, body = resp.StatusCode, string(b); ok(code, body) {
			return
		}
	}
	t.Fatalf("%s: still %d %s after 3 minutes", url, code, body)
}

// serveReport reads serve's /api/v1/report.
func serveReport(t *testing.T, base string) *usage.Report {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/report")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r usage.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("/api/v1/report: %v", err)
	}
	return &r
}

// checkFleetSum requires the report through Thanos to be the shards'
// reports side by side: the same device rows, the cluster's GPU-seconds
// and cost their sums. Every report warns each of warnings, and nothing
// else.
func checkFleetSum(t *testing.T, shards []*testcluster.Shard, q *testcluster.ThanosQuery, accounting string, end time.Time, warnings ...string) [3]*usage.Report {
	t.Helper()
	a := fleetReport(t, shards[0].Prometheus.URL, accounting, end, warnings...)
	b := fleetReport(t, shards[1].Prometheus.URL, accounting, end, warnings...)
	fleet := fleetReport(t, q.URL, accounting, end, warnings...)
	want := append(slices.Clone(a.Devices), b.Devices...)
	if diff := gocmp.Diff(sortedDevices(want), sortedDevices(fleet.Devices)); diff != "" {
		t.Errorf("%s: devices through Thanos differ from the shards' (-shards +thanos):\n%s", accounting, diff)
	}
	if len(fleet.Devices) != 5 {
		t.Errorf("%s: %d devices through Thanos, want the 3 H100s of cluster a and the 2 L4s of cluster b", accounting, len(fleet.Devices))
	}
	for what, f := range map[string]func(usage.ClusterUsage) float64{
		"allocated GPU-seconds":   func(c usage.ClusterUsage) float64 { return float64(c.AllocatedGPUSeconds) },
		"idle GPU-seconds":        func(c usage.ClusterUsage) float64 { return c.IdleAllocatedGPUSeconds.Value() },
		"capacity GPU-seconds":    func(c usage.ClusterUsage) float64 { return float64(c.CapacityGPUSeconds) },
		"unallocated GPU-seconds": func(c usage.ClusterUsage) float64 { return float64(c.UnallocatedGPUSeconds) },
		"cost":                    func(c usage.ClusterUsage) float64 { return c.Cost.Value() },
	} {
		sum := f(a.Cluster) + f(b.Cluster)
		if got := f(fleet.Cluster); math.Abs(got-sum) > 1e-9*sum || sum == 0 {
			t.Errorf("%s: the fleet's %s through Thanos = %v, want the shards' sum %v", accounting, what, got, sum)
		}
	}
	return [3]*usage.Report{a, b, fleet}
}

// recordRules records one level of gpupack's rules (0 the 5-minute one,
// 1 the hourly one, which reads the first) for thanosScrape over [from,
// to] into prom with promtool. promtool evaluates a group at the offset
// Prometheus gives it, from its name and file: each shard's file is its
// own, so each shard's hourly windows lie at an offset of their own.
func recordRules(t *testing.T, prom *testcluster.Prometheus, from, to time.Time, level int) {
	t.Helper()
	levels, err := promql.RulesYAMLByLevel(thanosScrape, promql.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), fmt.Sprintf("gpupack-rules-%d.yaml", level))
	if err := os.WriteFile(file, levels[level], 0o644); err != nil {
		t.Fatal(err)
	}
	prom.BackfillRules(file, from, to)
}

// checkOwnOffsets requires the hourly devices' series through Thanos
// Query at url to be one per shard, evaluated at offsets that differ.
func checkOwnOffsets(t *testing.T, url string, end time.Time) {
	t.Helper()
	resp, err := http.Get(url + "/api/v1/query?query=" + neturl.QueryEscape("gpupack:devices:1h[3h]") + fmt.Sprintf("&time=%d", end.Add(time.Hour).Unix()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	offsets := map[string]time.Duration{}
	for _, r := range body.Data.Result {
		if len(r.Values) > 0 {
			at, _ := r.Values[0][0].(float64)
			offsets[r.Metric["cluster"]] = time.Duration(at*1e3) * time.Millisecond % time.Hour
		}
	}
	if len(offsets) != 2 || offsets["a"] == offsets["b"] {
		t.Errorf("hourly evaluation offsets by cluster %v; want shards a and b each at its own", offsets)
	}
}

// hourlyWindows is how many hourly windows r says it read from the
// hourly rules, 0 where it says none.
func hourlyWindows(t *testing.T, r *usage.Report) int {
	t.Helper()
	for _, w := range r.Quality.Warnings {
		var n int
		if _, err := fmt.Sscanf(w, "%d hourly windows read", &n); err == nil {
			return n
		}
	}
	return 0
}
