package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli"
	clifakedcgm "github.com/gpupack/gpupack/internal/cli/fakedcgm"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// runningScenario has a pod for each verdict: busy (GPU-bound), one
// throttled by its CPU limit while its GPU bursts, one fed over the
// network, one over PCIe, one memory-bound and an idle notebook.
const runningScenario = `duration: 40s
nodes:
  - {name: run-a, model: H100-80GB, gpus: 6}
pods:
  - {namespace: train, name: busy, node: run-a, gpu: 0, from: 6s, to: 36s, memoryMiB: 60000, dram: 0.2, activity: {pattern: constant, level: 0.9},
     cpu: {limitCores: 16, throttledRatio: 0.02, usedCores: 8}}
  - {namespace: serve, name: throttled, node: run-a, gpu: 1, from: 6s, to: 36s, memoryMiB: 20000, activity: {pattern: square, level: 0.8, low: 0, on: 1s, off: 3s},
     cpu: {limitCores: 4, throttledRatio: 0.41, usedCores: 3.9}}
  - {namespace: serve, name: fed, node: run-a, gpu: 2, from: 6s, to: 36s, memoryMiB: 20000, activity: {pattern: constant, level: 0.2},
     cpu: {limitCores: 8, throttledRatio: 0.01, usedCores: 2}, input: {networkReceiveBytesPerSecond: 2e8, pcieRxBytesPerSecond: 2.1e8, pcieTxBytesPerSecond: 1e7}}
  - {namespace: serve, name: copier, node: run-a, gpu: 3, from: 6s, to: 36s, memoryMiB: 20000, activity: {pattern: constant, level: 0.15},
     input: {pcieRxBytesPerSecond: 3e9, pcieTxBytesPerSecond: 2e8, nvlinkRxBytesPerSecond: 1e6}}
  - {namespace: lab, name: genome, node: run-a, gpu: 4, from: 6s, to: 36s, memoryMiB: 30000, dram: 0.8, activity: {pattern: constant, level: 0.3}}
  - {namespace: lab, name: notebook, node: run-a, gpu: 5, from: 6s, to: 36s, memoryMiB: 900, activity: {pattern: constant, level: 0.01}}
`

// TestRunningVerdictsThroughPrometheus runs fake-dcgm, which serves
// dcgm-exporter's format on /metrics and the kubelet's cAdvisor format on
// /metrics/cadvisor, under a real Prometheus scraping both every second,
// and requires report to give each pod its verdict with the scripted
// figures as evidence.
func TestRunningVerdictsThroughPrometheus(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "scenario.yaml"), runningScenario)
	truthPath := filepath.Join(dir, "truth.json")
	addr, stop := startFakeDCGM(t, ctx, filepath.Join(dir, "scenario.yaml"), truthPath)
	defer stop()
	config := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n"+
		"  - {job_name: dcgm, honor_labels: true, static_configs: [{targets: [%[1]q]}]}\n"+
		"  - {job_name: kubelet-cadvisor, honor_labels: true, metrics_path: %[2]s, static_configs: [{targets: [%[1]q]}]}\n",
		addr, clifakedcgm.CAdvisorMetricsPath)
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Config: config})

	truth := waitTruth(t, ctx, truthPath)
	r, _, _ := reportAfterRun(t, ctx, prom.URL, truth)
	for _, want := range []struct {
		pod     string
		verdict usage.VerdictName
		change  usage.ChangeKind
	}{
		{"train/busy", usage.GPUBoundVerdict, usage.KeepGPU},
		{"serve/throttled", usage.CPUBoundVerdict, usage.RaiseCPULimit},
		{"serve/fed", usage.InputBoundVerdict, usage.StageDataLocally},
		{"serve/copier", usage.InputBoundVerdict, usage.OverlapTransfers},
		{"lab/genome", usage.MemoryBoundVerdict, usage.CutMemoryTraffic},
		{"lab/notebook", usage.IdleHeldVerdict, usage.ReleaseGPU},
	} {
		p := reportPod(t, r, want.pod)
		if p == nil {
			continue
		}
		if b := p.Bottleneck; b == nil || b.Verdict != want.verdict || b.Change.Kind != want.change {
			t.Errorf("%s: verdict %+v, want %s with %s", want.pod, b, want.verdict, want.change)
		}
	}
	if p := reportPod(t, r, "serve/throttled"); p != nil && p.Bottleneck != nil {
		e, c := p.Bottleneck.Evidence, p.Bottleneck.Change
		near(t, "serve/throttled throttled ratio", e.CPUThrottledRatio, 0.41, 0.02)
		near(t, "serve/throttled CPU limit", e.CPULimitCores, 4, 0)
		near(t, "serve/throttled CPU used", e.CPUUsedCores, 3.9, 0.1)
		near(t, "serve/throttled proposed limit", c.ToCores, 7, 0)
	}
	if p := reportPod(t, r, "serve/fed"); p != nil && p.Bottleneck != nil {
		e := p.Bottleneck.Evidence
		near(t, "serve/fed network receive", e.NetworkReceiveBytesPerSecond, 2e8, 0.1*2e8)
		near(t, "serve/fed PCIe receive", e.PCIeRxBytesPerSecond, 2.1e8, 1)
	}
	if p := reportPod(t, r, "serve/copier"); p != nil && p.Bottleneck != nil {
		near(t, "serve/copier PCIe receive", p.Bottleneck.Evidence.PCIeRxBytesPerSecond, 3e9, 1)
		if p.Bottleneck.Evidence.CPULimitCores.Known() {
			t.Errorf("serve/copier has no cAdvisor series, yet a CPU limit of %v", p.Bottleneck.Evidence.CPULimitCores)
		}
	}
	if r.Field == nil || !r.Field.ActiveOfAllocated.Known() || r.Field.Published.Ratio != usage.FieldAverage.Ratio {
		t.Errorf("field comparison %+v, want the cluster's known ratio beside the published one", r.Field)
	}

	// diagnose --running measures the last 2 minutes at its default 30 s
	// step, once they hold the whole run: the constant pods get the same
	// verdicts (a square wave sampled every 30 s is not the one scripted),
	// and the evidence, read over the window, the same figures.
	for app.LatestWindow(time.Now(), 2*time.Minute, 30*time.Second, false).End.Before(truth.End) {
		time.Sleep(time.Second)
	}
	var out bytes.Buffer
	root := cli.NewRoot(ctx)
	root.SetOut(&out)
	root.SetArgs([]string{"diagnose", "--running", "--prometheus", prom.URL, "--window", "2m", "--format", "json"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("diagnose --running: %v", err)
	}
	var run usage.Running
	if err := json.Unmarshal(out.Bytes(), &run); err != nil {
		t.Fatalf("diagnose --running JSON: %v\n%s", err, out.String())
	}
	verdicts := map[string]usage.VerdictName{}
	for _, p := range run.Pods {
		verdicts[p.Pod] = p.Bottleneck.Verdict
		if p.Pod == "serve/throttled" {
			near(t, "diagnose --running: serve/throttled throttled ratio", p.Bottleneck.Evidence.CPUThrottledRatio, 0.41, 0.02)
		}
	}
	for pod, want := range map[string]usage.VerdictName{"serve/fed": usage.InputBoundVerdict, "lab/notebook": usage.IdleHeldVerdict, "train/busy": usage.GPUBoundVerdict} {
		if verdicts[pod] != want {
			t.Errorf("diagnose --running: %s is %q, want %s (all: %v)", pod, verdicts[pod], want, verdicts)
		}
	}
}

func reportPod(t *testing.T, r *usage.Report, key string) *usage.PodUsage {
	t.Helper()
	for i := range r.Pods {
		if r.Pods[i].Key() == key {
			return &r.Pods[i]
		}
	}
	t.Errorf("%s: missing from the report", key)
	return nil
}

func near(t *testing.T, what string, got usage.Amount, want, tolerance float64) {
	t.Helper()
	if !got.Known() || math.Abs(got.Value()-want) > tolerance {
		t.Errorf("%s = %v, want %v ± %v", what, got, want, tolerance)
	}
}
