package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/cli"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// twoHours has a pod for each verdict over two whole hours, the bursts a
// minute long so that a 30 s scrape sees them.
const twoHours = `duration: 2h
nodes:
  - {name: run-b, model: H100-80GB, gpus: 5}
pods:
  - {namespace: train, name: busy, node: run-b, gpu: 0, memoryMiB: 60000, activity: {pattern: constant, level: 0.9}}
  - {namespace: serve, name: throttled, node: run-b, gpu: 1, memoryMiB: 20000, activity: {pattern: square, level: 0.8, low: 0, on: 1m, off: 3m},
     cpu: {limitCores: 4, throttledRatio: 0.41, usedCores: 3.9}}
  - {namespace: serve, name: fed, node: run-b, gpu: 2, from: 30m, memoryMiB: 20000, activity: {pattern: constant, level: 0.2},
     cpu: {limitCores: 8, throttledRatio: 0.01, usedCores: 2}, input: {networkReceiveBytesPerSecond: 2e8, pcieRxBytesPerSecond: 2.1e8, pcieTxBytesPerSecond: 1e7}}
  - {namespace: lab, name: genome, node: run-b, gpu: 3, memoryMiB: 30000, dram: 0.8, activity: {pattern: constant, level: 0.3}}
  - {namespace: lab, name: notebook, node: run-b, gpu: 4, memoryMiB: 900, activity: {pattern: constant, level: 0.01}}
`

// TestRunningVerdictsRawAndHourly backfills a real Prometheus with two
// hours of fake-dcgm's and its cAdvisor stand-in's series, and requires
// report's raw and hourly paths to give every pod the same verdict and
// evidence, the scripted figures: serve/fed ran only the last 90 minutes,
// and its rates are still its own. cAdvisor's container_spec_* series are
// dropped, as kube-prometheus drops them: the CPU limits are
// kube-state-metrics'.
func TestRunningVerdictsRawAndHourly(t *testing.T) {
	s, err := gpusim.Parse([]byte(twoHours), "two-hours.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	const scrape = 30 * time.Second
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	for name, write := range map[string]func(f *os.File) error{
		"dcgm.om": func(f *os.File) error {
			return s.WriteOpenMetrics(f, start, 0, s.Duration.D(), scrape, gpusim.Faults{})
		},
		// kube-prometheus's kubelet job drops container_spec_*: the CPU
		// limits come from kube-state-metrics instead.
		"cadvisor.om": func(f *os.File) error {
			var b strings.Builder
			if err := s.WriteCAdvisorOpenMetrics(&b, start, 0, s.Duration.D(), scrape); err != nil {
				return err
			}
			for line := range strings.Lines(b.String()) {
				if !strings.Contains(line, "container_spec_") {
					if _, err := f.WriteString(line); err != nil {
						return err
					}
				}
			}
			return nil
		},
		"ksm.om": func(f *os.File) error {
			var b strings.Builder
			b.WriteString("# HELP kube_pod_container_resource_limits The number of requested limit resource by a container.\n# TYPE kube_pod_container_resource_limits gauge\n")
			for _, l := range []struct {
				ns, pod string
				cores   float64
			}{{"serve", "throttled", 4}, {"serve", "fed", 8}} {
				for at := time.Duration(0); at < s.Duration.D(); at += scrape {
					fmt.Fprintf(&b, "kube_pod_container_resource_limits{namespace=%q,pod=%q,uid=\"u-%s\",container=\"main\",node=\"run-b\",resource=\"cpu\",unit=\"core\"} %g %d\n", l.ns, l.pod, l.pod, l.cores, start.Add(at).Unix())
				}
			}
			b.WriteString("# EOF\n")
			_, err := f.WriteString(b.String())
			return err
		},
	} {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := write(f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		testcluster.Backfill(t, filepath.Join(dir, "data"), path, 0)
	}
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir})

	verdicts := map[string]map[string]usage.Bottleneck{}
	for _, accounting := range []string{"raw", "hourly"} {
		var out bytes.Buffer
		root := cli.NewRoot(t.Context())
		root.SetOut(&out)
		root.SetArgs([]string{"report", "--prometheus", prom.URL, "--accounting", accounting, "--window", "2h", "--end", start.Add(2 * time.Hour).Format(time.RFC3339), "--step", "30s", "--format", "json"})
		if err := root.ExecuteContext(t.Context()); err != nil {
			t.Fatalf("report --accounting %s: %v", accounting, err)
		}
		var r usage.Report
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("report JSON: %v", err)
		}
		if r.Accounting != accounting {
			t.Fatalf("report accounted %s, want %s", r.Accounting, accounting)
		}
		got := map[string]usage.Bottleneck{}
		for _, p := range r.Pods {
			if p.Bottleneck != nil {
				got[p.Key()] = *p.Bottleneck
			}
		}
		verdicts[accounting] = got
		for pod, want := range map[string]usage.VerdictName{
			"train/busy": usage.GPUBoundVerdict, "serve/throttled": usage.CPUBoundVerdict, "serve/fed": usage.InputBoundVerdict,
			"lab/genome": usage.MemoryBoundVerdict, "lab/notebook": usage.IdleHeldVerdict,
		} {
			if got[pod].Verdict != want {
				t.Errorf("%s: %s is %q, want %s", accounting, pod, got[pod].Verdict, want)
			}
		}
		e := got["serve/throttled"].Evidence
		near(t, accounting+": serve/throttled throttled ratio", e.CPUThrottledRatio, 0.41, 0.01)
		near(t, accounting+": serve/throttled CPU limit", e.CPULimitCores, 4, 0)
		near(t, accounting+": serve/throttled CPU used", e.CPUUsedCores, 3.9, 0.05)
		fed := got["serve/fed"].Evidence
		near(t, accounting+": serve/fed network receive", fed.NetworkReceiveBytesPerSecond, 2e8, 0.03*2e8)
		near(t, accounting+": serve/fed PCIe receive", fed.PCIeRxBytesPerSecond, 2.1e8, 1)
	}
	// The evidence is one set of queries over the window for both paths;
	// the pattern's figures may differ in the last decimals.
	for pod, raw := range verdicts["raw"] {
		hourly := verdicts["hourly"][pod]
		if diff := cmp.Diff(raw.Evidence, hourly.Evidence); diff != "" || raw.Verdict != hourly.Verdict || raw.Change.Kind != hourly.Change.Kind {
			t.Errorf("%s: raw %s, hourly %s; evidence (-raw +hourly):\n%s", pod, raw.Verdict, hourly.Verdict, diff)
		}
	}
}
