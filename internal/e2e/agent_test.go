package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clifakedcgm "github.com/gpupack/gpupack/internal/cli/fakedcgm"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/reportdiff"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// sharedScenario: one L4 time-sliced by three pods whose processes use
// 50%, 20% and 0% of it, and one H100 held alone, from 3s to 27s.
const sharedScenario = `duration: 30s
nodes:
  - {name: agent-a, model: L4, gpus: 1}
  - {name: agent-b, model: H100-80GB, gpus: 1}
pods:
  - {namespace: ml, name: heavy, node: agent-a, gpu: 0, from: 3s, to: 27s, memoryMiB: 12000, activity: {pattern: constant, level: 0.5}}
  - {namespace: ml, name: light, node: agent-a, gpu: 0, from: 3s, to: 27s, memoryMiB: 3000, activity: {pattern: constant, level: 0.2}}
  - {namespace: ml, name: idle, node: agent-a, gpu: 0, from: 3s, to: 27s, memoryMiB: 500, activity: {pattern: constant, level: 0}}
  - {namespace: web, name: alone, node: agent-b, gpu: 0, from: 3s, to: 27s, memoryMiB: 9000, activity: {pattern: constant, level: 0.4}}
`

// TestReportPerProcessMatchesTruth: Prometheus (1 s scrapes) scrapes
// fake-dcgm's DCGM series and, as a second job, what gpupack agent serves
// for the scenario's nodes; the report's active GPU-seconds of the pods on
// the time-sliced GPU equal each pod's own (the truth) within 2%, where
// the even split gives each a third of their sum, and their framebuffer
// is their own. Allocation follows use: each pod its processes' time and
// a third of the device's idle time.
func TestReportPerProcessMatchesTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	fake := newLateTarget(t)
	target := fake.Addr()
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Config: fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n"+
		"  - job_name: dcgm-exporter\n    honor_labels: true\n    static_configs: [{targets: [%q]}]\n"+
		"  - job_name: gpupack-agent\n    honor_labels: true\n    metrics_path: %s\n    static_configs: [{targets: [%q]}]\n", target, clifakedcgm.AgentMetricsPath, target)})
	waitScraping(t, ctx, prom.URL)

	write(t, filepath.Join(dir, "scenario.yaml"), sharedScenario)
	truthPath := filepath.Join(dir, "truth.json")
	fake.waitBetweenScrapes(t, ctx, time.Second)
	addr, stop := startFakeDCGM(t, ctx, filepath.Join(dir, "scenario.yaml"), truthPath)
	defer stop()
	fake.point(addr)
	truth := waitTruth(t, ctx, truthPath)
	r, _, _ := reportAfterRun(t, ctx, prom.URL, truth)
	held := 24.0 // seconds each pod held its GPU
	levels := map[string]float64{"ml/heavy": 0.5, "ml/light": 0.2, "ml/idle": 0, "web/alone": 0.4}
	memory := map[string]float64{"ml/heavy": 12000, "ml/light": 3000, "ml/idle": 500, "web/alone": 9000}
	wantAttribution := map[string]string{"ml/heavy": usage.AttributionPerProcess, "ml/light": usage.AttributionPerProcess, "ml/idle": usage.AttributionPerProcess, "web/alone": usage.AttributionExclusive}
	idleShare := (1 - 0.5 - 0.2) / 3
	for _, pt := range truth.Pods {
		key := pt.Namespace + "/" + pt.Pod
		got, ok := r.Pod(pt.Namespace, pt.Pod)
		if !ok {
			t.Errorf("%s: missing from the report", key)
			continue
		}
		if got.Attribution != wantAttribution[key] {
			t.Errorf("%s: attribution %q, want %q", key, got.Attribution, wantAttribution[key])
		}
		if !got.ActiveGPUSeconds.Known() {
			t.Errorf("%s: active GPU-seconds unknown", key)
			continue
		}
		check(t, key+" active", got.ActiveGPUSeconds.Value(), float64(pt.ActiveGPUSeconds))
		wantAllocated := held
		if pt.Namespace == "ml" {
			wantAllocated = held * (levels[key] + idleShare)
			if even := held * (0.5 + 0.2) / 3; key != "ml/idle" && abs(float64(pt.ActiveGPUSeconds)-even) < 0.02*even {
				t.Fatalf("%s: the even split (%.2f) is right for this pod: the scenario proves nothing", key, even)
			}
		}
		check(t, key+" allocated", float64(got.AllocatedGPUSeconds), wantAllocated)
		if p95 := got.VRAMUsedMiB.P95; !p95.Known() || abs(p95.Value()-memory[key]) > 1 {
			t.Errorf("%s: VRAM p95 %v MiB, want its own %v", key, p95, memory[key])
		}
	}
	if len(truth.Pods) != 4 {
		t.Errorf("truth has %d pods, want 4", len(truth.Pods))
	}
	// fake-dcgm serves its free GPUs after the scenario: stop it, and
	// wait for Prometheus' failed scrapes, so that the two reports over
	// the whole hours read the same samples (a device's energy and idle
	// seconds would otherwise grow between them).
	stopAt := time.Now()
	stop()
	waitScrapesFail(t, ctx, prom.URL, stopAt)
	checkHourlyAgrees(t, ctx, prom.URL, truth)
}

// checkHourlyAgrees: over the whole hours of the run, the hourly path
// (PromQL per hour) splits the shared GPU by the agent's series as the
// raw path does: both reports agree pod for pod within 2%, attribution,
// per-process seconds and VRAM p95 included, and neither warns that the
// agent's series went unread.
func checkHourlyAgrees(t *testing.T, ctx context.Context, promURL string, truth gpusim.Truth) {
	t.Helper()
	start := truth.Start.Truncate(time.Hour)
	end := truth.End.Truncate(time.Hour).Add(time.Hour)
	report := func(accounting string) *usage.Report {
		r := reportJSON(t, ctx, promURL, start, end, time.Second, "--accounting", accounting)
		for _, w := range r.Quality.Warnings {
			if strings.Contains(w, "gpupack agent") {
				t.Errorf("%s report warns %q", accounting, w)
			}
		}
		return r
	}
	raw, hourly := report("raw"), report("hourly")
	for _, d := range reportdiff.Disagreements(raw, hourly, 0.02) {
		t.Errorf("hourly against raw: %s", d)
	}
	for _, p := range raw.Pods {
		h, ok := hourly.Pod(p.Namespace, p.Pod)
		if !ok {
			continue // Disagreements said so
		}
		if p95, want := h.VRAMUsedMiB.P95, p.VRAMUsedMiB.P95; p95.Known() != want.Known() || (want.Known() && abs(p95.Value()-want.Value()) > 0.01*want.Value()) {
			t.Errorf("%s: hourly VRAM p95 %v MiB, raw %v", p.Key(), p95, want)
		}
	}
	if p, _ := hourly.Pod("ml", "heavy"); p.Attribution != usage.AttributionPerProcess {
		t.Errorf("hourly report: ml/heavy attribution %q, want per-process", p.Attribution)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
