package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	clidiagnose "github.com/gpupack/gpupack/internal/cli/diagnose"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// liveScenario is the DCGM history the live test backfills: the three
// hours before the test, a busy and an idle pod on node-a's H100s, the
// idle one's GPU reporting XID 79 (fallen off the bus), an unallocated L4
// on node-b.
const liveScenario = `duration: 3h
nodes:
  - {name: node-a, model: H100-80GB, gpus: 2, xids: {"1": 79}}
  - {name: node-b, model: L4, gpus: 1}
pods:
  - {namespace: train, name: busy, node: node-a, gpu: 0, from: 0s, to: 3h, memoryMiB: 60000, activity: {pattern: constant, level: 0.9}}
  - {namespace: serve, name: idle, node: node-a, gpu: 1, from: 0s, to: 3h, memoryMiB: 900, activity: {pattern: constant, level: 0.01}}
`

// TestServeLive runs `gpupack serve` on a real Prometheus holding three
// hours of backfilled DCGM history and a real apiserver with the nodes,
// the running pods and two pending ones, over real sockets: /readyz turns
// ready, /metrics passes promtool and counts the pods, /api/v1/pending is
// what `gpupack diagnose --kubeconfig` finds, with each pending pod's wait,
// /api/v1/health and gpupack_gpus_unhealthy name node-a's GPU with XID 79,
// and the page in headless Chromium lists the same pods and that GPU with
// no console error.
func TestServeLive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus, a control plane and a browser")
	}
	begun := time.Now()
	dir := t.TempDir()
	sc, err := gpusim.Parse([]byte(liveScenario), "liveScenario", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Minute)
	file := filepath.Join(dir, "history.om")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.WriteOpenMetrics(f, start, 0, 3*time.Hour, 30*time.Second, gpusim.Faults{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	testcluster.Backfill(t, filepath.Join(dir, "data"), file, 0)
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir})

	kc := testcluster.Start(t, testcluster.Options{})
	kc.AddGPUNode("node-a", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 2})
	kc.AddGPUNode("node-b", testcluster.GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 1})
	for _, ns := range []string{"train", "serve", "ml"} {
		kc.CreateNamespace(ns)
	}
	for _, p := range []struct {
		ns, name, node string
		gpus           int64
	}{{"train", "busy", "node-a", 1}, {"serve", "idle", "node-a", 1}, {"ml", "eight", "", 8}, {"ml", "two-l4", "", 2}} {
		kc.CreateGPUPod(p.ns, p.name, p.node, "nvidia.com/gpu", p.gpus)
	}

	t.Logf("%s: cluster and Prometheus up", time.Since(begun))
	base := startServeArgs(t, "--prometheus", prom.URL, "--kubeconfig", kc.Kubeconfig(), "--listen", "127.0.0.1:0", "--window", "2h", "--refresh", "2s", "--metrics-per-pod")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body := get(t, base+"/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready after 2 minutes: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Logf("%s: serve ready", time.Since(begun))
	code, metrics := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, metrics)
	}
	check := exec.Command(testcluster.NeedBinary(t, "promtool", "prometheus"), "check", "metrics")
	check.Stdin = strings.NewReader(metrics)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	for _, want := range []string{`gpupack_gpu_allocated_seconds_total{namespace="train",pod="busy",workload="(none)"}`, `gpupack_gpu_idle_allocated_seconds_total{namespace="serve",pod="idle",workload="(none)"}`, `gpupack_gpu_unsampled_seconds_total{node="node-a"}`, `gpupack_pending_pods{`, "gpupack_refresh_ok 1", `gpupack_gpus_unhealthy{node="node-a"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}

	// The pending pods are diagnose's, and each has waited since created.
	var out bytes.Buffer
	root := clidiagnose.NewCommand(t.Context())
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"--kubeconfig", kc.Kubeconfig(), "--format", "json"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("diagnose: %v", err)
	}
	var diag diagnose.Report
	if err := json.Unmarshal(out.Bytes(), &diag); err != nil {
		t.Fatalf("diagnose JSON: %v", err)
	}
	_, body := get(t, base+"/api/v1/pending")
	var pending []app.PendingPod
	if err := json.Unmarshal([]byte(body), &pending); err != nil {
		t.Fatalf("/api/v1/pending: %v\n%s", err, body)
	}
	causes := func(fs []diagnose.Finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Pod+" "+string(f.Cause))
		}
		return out
	}
	var got []diagnose.Finding
	for _, p := range pending {
		got = append(got, p.Finding)
		if p.Created == nil || !p.WaitedSeconds.Known() || p.WaitedSeconds.Value() <= 0 {
			t.Errorf("%s: created %v, waited %v; want its creation time and a wait", p.Pod, p.Created, p.WaitedSeconds)
		}
	}
	if g, w := causes(got), causes(diag.Findings); !slices.Equal(g, w) || len(g) != 2 {
		t.Errorf("serve's pending pods %v, want diagnose's %v (2 pods)", g, w)
	}

	_, body = get(t, base+"/api/v1/health")
	var health []planout.GPUHealth
	if err := json.Unmarshal([]byte(body), &health); err != nil {
		t.Fatalf("/api/v1/health: %v\n%s", err, body)
	}
	if len(health) != 1 || health[0].Node != "node-a" || health[0].GPU != "1" || health[0].Critical != 79 {
		t.Errorf("/api/v1/health = %+v, want node-a's GPU 1 with XID 79", health)
	}

	// The live report judges the running pods as report does, and puts the
	// cluster beside the field.
	_, body = get(t, base+"/api/v1/report")
	var live usage.Report
	if err := json.Unmarshal([]byte(body), &live); err != nil {
		t.Fatalf("/api/v1/report: %v", err)
	}
	verdicts := map[string]usage.VerdictName{}
	for _, p := range live.Pods {
		if p.Bottleneck != nil {
			verdicts[p.Key()] = p.Bottleneck.Verdict
		}
	}
	if want := map[string]usage.VerdictName{"train/busy": usage.GPUBoundVerdict, "serve/idle": usage.IdleHeldVerdict}; !maps.Equal(verdicts, want) || live.Field == nil {
		t.Errorf("/api/v1/report verdicts %v and field %+v; want %v and the field", verdicts, live.Field, want)
	}

	t.Logf("%s: API checked", time.Since(begun))
	// The page, in a real browser.
	ctx, problems := browser(t)
	do(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("#pending-table"))
	rows := runB(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#pending-table tbody tr'), r => r.dataset.pod + " " + r.querySelector('.cause').textContent)`))
	if w := causes(diag.Findings); !slices.Equal(rows, w) {
		t.Errorf("the page's pending list %v, want diagnose's %v", rows, w)
	}
	healthRows := runB(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#health-table tbody tr'), r => r.cells[0].textContent + " " + r.cells[1].textContent + " " + r.querySelector('.kind').textContent)`))
	if want := []string{"node-a 1 critical (XID 79)"}; !slices.Equal(healthRows, want) {
		t.Errorf("the page's GPU health %q, want %q", healthRows, want)
	}
	charts := runB(t, ctx, chromedp.Evaluate[[]chartInfo](chartsJS))
	_, hoursBody := get(t, base+"/api/v1/hours")
	var hours []app.Hour
	if err := json.Unmarshal([]byte(hoursBody), &hours); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range charts {
		if c.ID == "chart-hours" {
			found = true
			if c.Series["allocated"] != len(hours) || len(hours) < 2 {
				t.Errorf("chart-hours: %d allocated points, want one per hour of /api/v1/hours (%d, at least 2)", c.Series["allocated"], len(hours))
			}
		}
	}
	if !found {
		t.Error("the page has no chart-hours")
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
