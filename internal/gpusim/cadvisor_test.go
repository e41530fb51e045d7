package gpusim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

const running = `duration: 20s
nodes:
  - {name: n1, model: H100-80GB, gpus: 2}
pods:
  - {namespace: a, name: throttled, node: n1, gpu: 0, from: 2s, to: 18s, memoryMiB: 1000, activity: {pattern: square, level: 0.8, low: 0, on: 1s, off: 3s},
     cpu: {limitCores: 4, throttledRatio: 0.4, usedCores: 3.9}}
  - {namespace: a, name: fed, node: n1, gpu: 1, memoryMiB: 1000, activity: {pattern: constant, level: 0.2},
     input: {networkReceiveBytesPerSecond: 2e8, diskReadBytesPerSecond: 1e6, pcieRxBytesPerSecond: 1.9e8, pcieTxBytesPerSecond: 1e7, nvlinkRxBytesPerSecond: 5e6, nvlinkTxBytesPerSecond: 4e6}}
`

// TestCAdvisorExposition compares what the kubelet's cAdvisor endpoint
// serves at 5 s with its golden file, parses it as Prometheus does, and
// checks the counters against the script.
func TestCAdvisorExposition(t *testing.T) {
	s, err := Parse([]byte(running), "running.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	if err := s.WriteCAdvisorMetrics(&b, start, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	check(t, "cadvisor-5s.txt", []byte(b.String()))
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, b.String())
	}
	value := func(name, pod string) float64 {
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pod" && l.GetValue() == pod {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	// a/throttled started at 2 s: 3 s of 100 ms periods, 40% throttled,
	// 3.9 cores for 3 s; a/fed has no CPU script, only its input.
	got := map[string]float64{
		"periods": value(usage.CFSPeriods, "throttled"), "throttled": value(usage.CFSThrottledPeriods, "throttled"),
		"cpu seconds": value(usage.CPUUsageSeconds, "throttled"), "quota": value(usage.CPUQuota, "throttled"),
		"fed periods": value(usage.CFSPeriods, "fed"), "fed network": value(usage.NetworkReceiveBytes, "fed"), "fed disk": value(usage.FSReadsBytes, "fed"),
	}
	want := map[string]float64{"periods": 30, "throttled": 12, "cpu seconds": 11.7, "quota": 400000, "fed periods": -1, "fed network": 1e9, "fed disk": 5e6}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("cAdvisor values (-want +got):\n%s", diff)
	}
}

// TestBusFamiliesServedWithInput: the PCIe and NVLink fields appear only
// where a pod scripts its input, with the device's holders' rates.
func TestBusFamiliesServedWithInput(t *testing.T) {
	s, err := Parse([]byte(running), "running.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteMetrics(&b, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	check(t, "running-5s.txt", []byte(b.String()))
	if !strings.Contains(b.String(), usage.PCIeRxBytes+`{gpu="1",`) || !strings.Contains(b.String(), `pod="fed"} 1.9e+08`) {
		t.Errorf("no PCIe receive rate for a/fed:\n%s", b.String())
	}
	plain, err := Parse([]byte(small), "small.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := plain.WriteMetrics(&b, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), usage.PCIeRxBytes) {
		t.Errorf("bus fields served without any pod's input")
	}
}

func TestParseRefusesBadEvidence(t *testing.T) {
	for name, pod := range map[string]string{
		"throttled without a limit": `cpu: {throttledRatio: 0.3}`,
		"throttled above 1":         `cpu: {limitCores: 2, throttledRatio: 1.5}`,
		"negative rate":             `input: {diskReadBytesPerSecond: -1}`,
	} {
		t.Run(name, func(t *testing.T) {
			doc := "duration: 10s\nnodes: [{name: n1, model: H100-80GB, gpus: 1}]\npods:\n  - {namespace: a, name: p, node: n1, gpu: 0, activity: {pattern: idle}, " + pod + "}\n"
			if _, err := Parse([]byte(doc), "bad.yaml", gpu.Default()); err == nil {
				t.Errorf("accepted %s", pod)
			}
		})
	}
}
