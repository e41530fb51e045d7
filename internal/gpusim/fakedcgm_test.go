package gpusim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/testkit/golden"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

const small = `duration: 20s
nodes:
  - {name: n1, model: H100-80GB, gpus: 3, mig: {"2": [3g.40gb, 4g.40gb]}}
pods:
  - {namespace: a, name: busy, node: n1, gpu: 0, from: 2s, to: 18s, memoryMiB: 1000, activity: {pattern: constant, level: 0.9}}
  - {namespace: a, name: ts-1, node: n1, gpu: 1, memoryMiB: 1000, activity: {pattern: square, level: 0.4, low: 0.1, on: 1s, off: 3s}}
  - {namespace: a, name: ts-2, node: n1, gpu: 1, from: 4s, memoryMiB: 1000, activity: {pattern: square, level: 0.4, low: 0.1, on: 1s, off: 3s}}
  - {namespace: b, name: mig, node: n1, gpu: 2, slice: 0, memoryMiB: 1000, activity: {pattern: constant, level: 0.5}}
`

func TestExpositionParses(t *testing.T) {
	s, err := Parse([]byte(small), "small.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteMetrics(&b, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	check(t, "small-5s.txt", []byte(b.String()))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, b.String())
	}
	for _, name := range usage.Metrics {
		if fams[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	// GPU 0 (busy from 2s), GPU 1 held by two pods at 5s, the 3g slice held,
	// the 4g slice free: 1 + 2 + 1 + 1 series per metric.
	if got := len(fams[usage.GREngineActive].Metric); got != 5 {
		t.Errorf("GR_ENGINE_ACTIVE series = %d, want 5\n%s", got, b.String())
	}
	for _, m := range fams[usage.FBUsed].Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for _, want := range []string{"gpu", "UUID", "device", "modelName", "Hostname"} {
			if labels[want] == "" {
				t.Errorf("series %v lacks label %s", labels, want)
			}
		}
		if (labels["GPU_I_ID"] == "") != (labels["GPU_I_PROFILE"] == "") {
			t.Errorf("series %v has half the MIG labels", labels)
		}
	}
}

// TestAccountingMatchesTruth samples the scenario on a 1 s grid, as
// Prometheus scraping fake-dcgm every second would, and checks that usage
// finds the scripted truth.
func TestAccountingMatchesTruth(t *testing.T) {
	s, err := Parse([]byte(small), "small.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(s.Duration.D()), Step: time.Second}
	r, err := usage.Account(usage.Input{Window: w, Series: s.Series(start, w), Pricing: usage.Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		t.Fatal(err)
	}
	truth := s.Truth(start, s.Duration.D())
	if len(truth.Pods) != 4 {
		t.Fatalf("truth has %d pods, want 4", len(truth.Pods))
	}
	for _, pt := range truth.Pods {
		got, ok := r.Pod(pt.Namespace, pt.Pod)
		if !ok {
			t.Errorf("pod %s/%s missing from the report", pt.Namespace, pt.Pod)
			continue
		}
		if !near(float64(got.AllocatedGPUSeconds), float64(pt.AllocatedGPUSeconds)) || !near(got.ActiveGPUSeconds.Value(), float64(pt.ActiveGPUSeconds)) {
			t.Errorf("%s/%s: allocated %.3f active %.3f, truth %.3f and %.3f", pt.Namespace, pt.Pod,
				got.AllocatedGPUSeconds, got.ActiveGPUSeconds.Value(), pt.AllocatedGPUSeconds, pt.ActiveGPUSeconds)
		}
	}
}

func check(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-6+1e-9*math.Abs(want) }

// TestDayParses keeps testdata/day.yaml, a day on three GPU nodes that
// FuzzParse also seeds from, a valid scenario.
func TestDayParses(t *testing.T) {
	s, err := Parse(dayYAML(t), "testdata/day.yaml", gpu.Default())
	if err != nil || len(s.Pods) == 0 {
		t.Fatalf("err %v, %d pods; want a valid scenario with pods", err, len(s.Pods))
	}
}

func dayYAML(t testing.TB) []byte {
	b, err := os.ReadFile("testdata/day.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want string
	}{
		"unknown field": {"duration: 1m\nnodez: []\n", `s.yaml:2: unknown field "nodez"; want one of duration, nodes, pods`},
		"bad duration":  {"duration: soon\n", `s.yaml:1: duration: "soon" is not a duration`},
		"gpus a string": {"duration: 1m\nnodes: [{name: n, model: L4, gpus: \"2\"}]\n", `s.yaml:2: nodes[0].gpus: "2" is a string; want an integer`},
		"memory a string": {`duration: 1m
nodes: [{name: n, model: L4, gpus: 1}]
pods:
  - {namespace: a, name: p, node: n, gpu: 0, memoryMiB: 30GiB, activity: {pattern: idle}}
`, `s.yaml:4: pods[0].memoryMiB: "30GiB" is a string; want a number`},
		"second document": {"duration: 1m\n---\nduration: 2m\n", "s.yaml:2: a second document"},
		"memory beyond the GPU": {`duration: 1m
nodes: [{name: n, model: L4, gpus: 1}]
pods:
  - {namespace: a, name: p, node: n, gpu: 0, memoryMiB: 100000, activity: {pattern: idle}}
`, "s.yaml:4: pods[0].memoryMiB: 100000 MiB, more than the "},
		"memory beyond the slice": {`duration: 1m
nodes: [{name: n, model: A30, gpus: 1, mig: {"0": [2g.12gb, 2g.12gb]}}]
pods:
  - {namespace: a, name: p, node: n, gpu: 0, slice: 1, memoryMiB: 20000, activity: {pattern: idle}}
`, "s.yaml:4: pods[0].memoryMiB: 20000 MiB, more than the "},
		"memory beyond the GPU together": {`duration: 1m
nodes: [{name: n, model: L4, gpus: 1}]
pods:
  - {namespace: a, name: p, node: n, gpu: 0, memoryMiB: 15000, activity: {pattern: idle}}
  - {namespace: a, name: q, node: n, gpu: 0, memoryMiB: 15000, from: 10s, activity: {pattern: idle}}
`, "s.yaml:5: pods[1].memoryMiB: 15000 MiB beside the 15000 MiB of a/p on GPU 0 on n at 10s: more than its "},
		"unknown node": {`duration: 1m
nodes: [{name: n, model: L4, gpus: 1}]
pods:
  - {namespace: a, name: p, node: m, gpu: 0, activity: {pattern: idle}}
`, "s.yaml:4: pods[0].node: node \"m\" is not defined"},
		"mig on L4": {`duration: 1m
nodes:
  - name: n
    model: L4
    gpus: 1
    mig: {"0": [1g.10gb]}
`, "s.yaml:6: nodes[0].mig.0: L4 does not support MIG"},
		"bad pattern": {`duration: 1m
nodes: [{name: n, model: L4, gpus: 1}]
pods:
  - namespace: a
    name: p
    node: n
    activity:
      pattern: wobbly
`, "s.yaml:8: pods[0].activity.pattern: unknown pattern \"wobbly\""},
		"empty": {"", "empty scenario"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "s.yaml", gpu.Default())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(small))
	f.Add(dayYAML(f))
	f.Add([]byte("duration: 1m\nnodes: [{name: n, model: A30, gpus: 1, mig: {\"0\": [4g.24gb]}}]\npods: [{namespace: a, name: p, node: n, gpu: 0, slice: 0, activity: {pattern: square, on: 1s, off: 1s}}]"))
	f.Add([]byte("duration: 1m\nnodes: [{name: n, model: L4, gpus: \"1\"}]\npods: [{namespace: a, name: p, node: n, gpu: 0, memoryMiB: 100000, activity: {pattern: idle}}]"))
	f.Add([]byte("duration: 1m\nnodes: [{name: n, model: L4, gpus: 1}]\npods: [{namespace: a, name: p, node: n, gpu: 0, memoryMiB: 15000, activity: {pattern: idle}}, {namespace: a, name: q, node: n, gpu: 0, memoryMiB: 15000, from: 10s, to: 20s, activity: {pattern: constant, level: 1}}]\n---\nduration: 2m\n"))
	f.Add([]byte(`{"duration": "1m", "nodes": [{"name": "n", "model": "L4", "gpus": 1}], "pods": []} ]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml", gpu.Default())
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, at := range []time.Duration{0, s.Duration.D() / 2} {
			for _, r := range s.at(at) {
				if r.fbFree < 0 {
					t.Fatalf("accepted a scenario whose pods use more than the memory of %+v at %s: %v MiB used", r.device, at, r.fbUsed)
				}
			}
		}
		if s.Duration > Duration(time.Hour) {
			return
		}
		var b strings.Builder
		if err := s.WriteMetrics(&b, s.Duration.D()/2); err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := p.TextToMetricFamilies(strings.NewReader(b.String())); err != nil {
			t.Fatalf("a valid scenario wrote an exposition that does not parse: %v\n%s", err, b.String())
		}
		s.Truth(time.Unix(0, 0), s.Duration.D())
	})
}
