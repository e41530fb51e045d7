package usage

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/vram"
)

const usageHeader = "apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\n"

func TestParseFacts(t *testing.T) {
	u, err := ParseFacts([]byte(usageHeader+`window: 30m
pods:
- {pod: ml/a, activity: 0.04, pattern: idle-held, vramUsedP95: 3Gi}
- {pod: ml/llm, model: {params: 7B, dtype: int4, context: 8192}, gpuMemory: 6Gi}
- {pod: ml/gqa, model: {params: 8B, dtype: bf16, kvDtype: fp8, layers: 32, kvHeads: 8, headDim: 128}}
- {pod: ml/mixtral, model: {family: mixtral-8x7b, context: 32768, batch: 2}}
`), "u.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Facts{Window: 30 * time.Minute, Pods: map[string]PodFacts{
		"ml/a":   {Measured: true, ActiveRatio: 0.04, Pattern: IdleHeld, VRAMUsedP95: gpu.GiB(3), VRAMMeasured: true},
		"ml/llm": {GPUMemory: gpu.GiB(6), Model: &vram.ModelSpec{Params: 7e9, DType: "int4", Context: 8192}},
		"ml/gqa": {Model: &vram.ModelSpec{Params: 8e9, DType: "bf16", KVDType: "fp8", Layers: 32, KVHeads: 8, HeadDim: 128}},
		"ml/mixtral": {Model: func() *vram.ModelSpec {
			a, _ := vram.Family("mixtral-8x7b")
			s := a.Spec("mixtral-8x7b")
			s.Context, s.Batch = 32768, 2
			return &s
		}()},
	}}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestParseUsagePlannerFields reads the fields added for the planner, and
// a window in days.
func TestParseUsagePlannerFields(t *testing.T) {
	u, err := ParseFacts([]byte(usageHeader+`window: 3d
pods:
- {pod: ml/a, activity: 0.04, pattern: idle-held, idleHeldRatio: 0.95, hourlyActivity: [0, 0.5, 1]}
- {pod: ml/b, idleHeldRatio: 0, sharedWith: [ml/c]}
`), "u.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Facts{Window: 72 * time.Hour, Pods: map[string]PodFacts{
		"ml/a": {Measured: true, ActiveRatio: 0.04, Pattern: IdleHeld, IdleHeldRatio: 0.95, IdleHeldMeasured: true, HourlyActivity: []float64{0, 0.5, 1}},
		"ml/b": {IdleHeldMeasured: true, SharedWith: []string{"ml/c"}},
	}}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseWindow(t *testing.T) {
	good := map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1h": time.Hour, "30m": 30 * time.Minute, "90d": MaxWindow, "168h0m0s": 168 * time.Hour}
	for in, want := range good {
		if got, err := ParseWindow(in); err != nil || got != want {
			t.Errorf("ParseWindow(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0d", "-1d", "91d", "d", "1.5d", "forever", "0s", "-1h", "9999999999d"} {
		if _, err := ParseWindow(bad); err == nil {
			t.Errorf("ParseWindow(%q) accepted", bad)
		}
	}
}

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"7d", "1h", "30m", "90d", "1h30m", "-3d", "d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWindow(s)
		if err == nil && (w <= 0 || w > MaxWindow) {
			t.Fatalf("ParseWindow(%q) = %v, outside (0, 90d]", s, w)
		}
	})
}

func TestParseUsageErrors(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"unknown field":      {usageHeader + "pods: [{pod: ml/a, activity: 0.1, pattern: busy, gpu: 1}]", `unknown field "gpu"`},
		"wrong kind":         {"apiVersion: gpupack.io/v1alpha1\nkind: Usage\npods: []", `kind "Usage"`},
		"percent":            {usageHeader + "pods: [{pod: ml/a, activity: 4, pattern: busy}]", "pods[0]: activity: 4 is not a ratio"},
		"nan":                {usageHeader + "pods: [{pod: ml/a, activity: .nan, pattern: busy}]", "u.yaml:3: pods[0].activity: .nan is not a finite number"},
		"activity a string":  {usageHeader + "pods:\n- pod: ml/a\n  activity: \"0.5\"\n  pattern: moderate\n", `u.yaml:5: pods[0].activity: "0.5" is a string; want a number`},
		"hourly a mapping":   {usageHeader + "pods: [{pod: ml/a, hourlyActivity: {a: 1}}]", "u.yaml:3: pods[0].hourlyActivity: a mapping; want a list"},
		"context a string":   {usageHeader + "pods: [{pod: ml/a, model: {params: 7B, dtype: fp16, context: 4k}}]", `u.yaml:3: pods[0].model.context: "4k" is a string; want an integer`},
		"idle-held but busy": {usageHeader + "pods: [{pod: ml/a, activity: 0.9, pattern: idle-held}]", "pods[0]: pattern: idle-held contradicts activity 0.9: the mean activity of idle-held pods is 0..0.0975"},
		"busy but idle":      {usageHeader + "pods: [{pod: ml/a, activity: 0.01, pattern: busy}]", "pods[0]: pattern: busy contradicts activity 0.01"},
		"flat-low at 0":      {usageHeader + "pods: [{pod: ml/a, activity: 0, pattern: flat-low}]", "pods[0]: pattern: flat-low contradicts activity 0"},
		"second document":    {usageHeader + "pods: []\n---\n" + usageHeader + "pods: [{pod: ml/a, gpuMemory: 1Gi}]", "u.yaml:4: a second document"},
		"trailing garbage":   {`{"apiVersion": "gpupack.io/v1alpha1", "kind": "PodUsage", "pods": []}}`, "u.yaml: text after the end of the document"},
		"no pattern":         {usageHeader + "pods: [{pod: ml/a, activity: 0.1}]", "pods[0]: pattern: missing"},
		"pattern alone":      {usageHeader + "pods: [{pod: ml/a, pattern: busy}]", "pods[0]: activity: missing"},
		"bad pattern":        {usageHeader + "pods: [{pod: ml/a, activity: 0.1, pattern: lazy}]", `pods[0]: pattern: "lazy"`},
		"no namespace":       {usageHeader + "pods: [{pod: a, activity: 0.1, pattern: busy}]", "pods[0]: pod: \"a\""},
		"duplicate":          {usageHeader + "pods: [{pod: ml/a, gpuMemory: 1Gi}, {pod: ml/a, gpuMemory: 2Gi}]", "pods[1].pod: \"ml/a\" is already listed at pods[0]"},
		"bad window":         {usageHeader + "window: forever\npods: []", `window "forever"`},
		"negative vram":      {usageHeader + "pods: [{pod: ml/a, vramUsedP95: -1Gi}]", "pods[0]: vramUsedP95"},
		"absurd memory":      {usageHeader + "pods: [{pod: ml/a, gpuMemory: 100Ti}]", "pods[0]: gpuMemory"},
		"empty entry":        {usageHeader + "pods: [{pod: ml/a}]", "pods[0]: no facts"},
		"bad params":         {usageHeader + "pods: [{pod: ml/a, model: {params: lots, dtype: fp16}}]", "pods[0]: model.params"},
		"layers sans hidden": {usageHeader + "pods: [{pod: ml/a, model: {params: 7B, dtype: fp16, layers: 32}}]", "pods[0]: model.layers and hidden"},
		"unknown family":     {usageHeader + "pods: [{pod: ml/a, model: {family: gpt-9}}]", `pods[0]: model.family: "gpt-9" is not a built-in model family`},
		"family and figures": {usageHeader + "pods: [{pod: ml/a, model: {family: mistral-7b, layers: 4}}]", "pods[0]: model.layers, hidden, kvHeads and headDim: the family gives them"},
		"no params":          {usageHeader + "pods: [{pod: ml/a, model: {dtype: fp16}}]", "pods[0]: model.params: missing"},
		"kv heads sans dim":  {usageHeader + "pods: [{pod: ml/a, model: {params: 7B, dtype: fp16, layers: 32, kvHeads: 8}}]", "pods[0]: model.kv heads and head dim: give both"},
		"not yaml":           {"pods: [", "u.yaml"},
		"idle as percent":    {usageHeader + "pods: [{pod: ml/a, idleHeldRatio: 90}]", "pods[0]: idleHeldRatio: 90 is not a ratio"},
		"hourly too long":    {usageHeader + "window: 2h\npods: [{pod: ml/a, hourlyActivity: [0, 0, 0]}]", "pods[0]: hourlyActivity: 3 hours listed from hour 0, the window has 2"},
		"hourly past end":    {usageHeader + "window: 2h\npods: [{pod: ml/a, firstHour: 1, hourlyActivity: [0, 0]}]", "pods[0]: hourlyActivity: 2 hours listed from hour 1, the window has 2"},
		"first hour alone":   {usageHeader + "pods: [{pod: ml/a, firstHour: 1, idleHeldRatio: 0.5}]", "pods[0]: firstHour: 1"},
		"hourly unbalanced":  {usageHeader + "window: 2h\npods: []\nhourly: [{model: L4, allocatedGPUs: [1, 1], activeGPUs: [0.5, 2], idleGPUs: [0.5, 0], activityUnknownGPUs: [0, 0]}]", "hourly[0]: hour 1: activeGPUs + idleGPUs + activityUnknownGPUs = 2"},
		"hourly not ratio":   {usageHeader + "pods: [{pod: ml/a, hourlyActivity: [2]}]", "pods[0]: hourlyActivity[0]: 2 is not a ratio"},
		"window in weeks":    {usageHeader + "window: 1w\npods: []", `window "1w"`},
		"shared with itself": {usageHeader + "pods: [{pod: ml/a, idleHeldRatio: 0, sharedWith: [ml/a]}]", `pods[0]: sharedWith[0]: "ml/a" is the pod itself`},
		"shared twice":       {usageHeader + "pods: [{pod: ml/a, idleHeldRatio: 0, sharedWith: [ml/b, ml/b]}]", `pods[0]: sharedWith[1]: "ml/b" is already listed at sharedWith[0]`},
		"shared sans ns":     {usageHeader + "pods: [{pod: ml/a, idleHeldRatio: 0, sharedWith: [b]}]", `pods[0]: sharedWith[0]: "b": want namespace/name`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFacts([]byte(tc.doc), "u.yaml")
			if err == nil || !strings.HasPrefix(err.Error(), "u.yaml") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one starting with the file and containing %q", err, tc.want)
			}
		})
	}
}

func TestUsageUnmatched(t *testing.T) {
	s, err := cluster.ParseFile([]byte("apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes: []\npods: [{namespace: ml, name: a}, {name: b}]\n"), "c.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	u, err := ParseFacts([]byte(usageHeader+"pods: [{pod: ml/z, gpuMemory: 1Gi}, {pod: ml/a, gpuMemory: 1Gi}, {pod: default/b, gpuMemory: 1Gi}, {pod: ml/b, gpuMemory: 1Gi}]"), "u.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ml/b", "ml/z"}, u.Unmatched(s)); diff != "" {
		t.Errorf("Unmatched (-want +got):\n%s", diff)
	}
}

func FuzzParseFacts(f *testing.F) {
	f.Add([]byte(usageHeader + "window: 1h\npods: [{pod: ml/a, activity: 0.04, pattern: idle-held, vramUsedP95: 3Gi}]"))
	f.Add([]byte(usageHeader + "pods: [{pod: ml/llm, model: {params: 70B, dtype: fp16, layers: 80, hidden: 8192}}]"))
	f.Add([]byte(`{"apiVersion":"gpupack.io/v1alpha1","kind":"PodUsage","pods":[{"pod":"a/b","gpuMemory":"1e3Mi"}]}`))
	f.Add([]byte(usageHeader + "window: 2d\npods: [{pod: ml/a, idleHeldRatio: 0.9, hourlyActivity: [0.1, 0]}]"))
	f.Add([]byte(usageHeader + "pods: [{pod: ml/a, activity: 0.9, pattern: idle-held}]"))
	f.Add([]byte(usageHeader + "window: 2h\npods: [{pod: ml/a, vramUsedP95: 0Mi}]\nhourly: [{model: L4, allocatedGPUs: [1, 2], activeGPUs: [0.5, 0.25], idleGPUs: [0.5, 1.5], activityUnknownGPUs: [0, 0.25]}]"))
	f.Add([]byte(usageHeader + "window: 2h\npods: []\nhourly: [{model: L4, allocatedGPUs: [1], activeGPUs: [2], idleGPUs: [0], activityUnknownGPUs: [0]}]"))
	f.Add([]byte(usageHeader + "pods: [{pod: ml/a, activity: \"0.5\", pattern: moderate, model: {params: 7B, dtype: fp16, context: 1e3}}]"))
	f.Add([]byte(usageHeader + "pods: []\n---\n" + usageHeader + "pods: [{pod: ml/a, gpuMemory: 1Gi}]"))
	f.Add([]byte(`{"apiVersion": "gpupack.io/v1alpha1", "kind": "PodUsage", "pods": [{"pod": "a/b", "activity": 1e400}]} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := ParseFacts(data, "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// What the writer makes of the facts reads back as the same facts
		// (models aside: the writer leaves them to the user).
		b, err := yaml.Marshal(u.File())
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseFacts(b, "written")
		if err != nil {
			t.Fatalf("the file written from accepted facts does not read back: %v\n%s", err, b)
		}
		noModels := *u
		noModels.Pods = map[string]PodFacts{}
		for key, p := range u.Pods {
			if p.Model != nil {
				if back.Pods[key].Model != nil {
					t.Fatalf("%s: a model was written", key)
				}
				p.Model = nil
				if _, ok := back.Pods[key]; !ok {
					continue // the model was its only fact
				}
			}
			noModels.Pods[key] = p
		}
		if diff := cmp.Diff(&noModels, back); diff != "" {
			t.Fatalf("written and read back (-want +got):\n%s", diff)
		}
		for key, p := range u.Pods {
			if p.ActiveRatio < 0 || p.ActiveRatio > 1 || p.VRAMUsedP95 < 0 || p.GPUMemory < 0 || !strings.Contains(key, "/") ||
				p.IdleHeldRatio < 0 || p.IdleHeldRatio > 1 || len(p.HourlyActivity) > int(u.Window.Hours())+1 {
				t.Fatalf("accepted bad facts for %s: %+v", key, p)
			}
			for _, a := range p.HourlyActivity {
				if !(a >= 0 && a <= 1) {
					t.Fatalf("accepted hourly activity %v for %s", a, key)
				}
			}
			if p.Model != nil {
				if err := p.Model.Validate(); err != nil {
					t.Fatalf("accepted an invalid model: %v", err)
				}
				if e := vram.EstimateMemory(*p.Model); e.Total <= 0 {
					t.Fatalf("estimate of an accepted model is %d", e.Total)
				}
			}
		}
	})
}

// TestReportFactsRoundTrip checks that the facts of a report are what its
// usage file reads back as: a measured 0 (no activity, no VRAM) stays 0,
// unknown figures stay unknown, pods with nothing measured are left out.
func TestReportFactsRoundTrip(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	r := &Report{Start: start, End: start.Add(2 * time.Hour), Pods: []PodUsage{
		{Namespace: "a", Pod: "idle", VRAMUsedMiB: Percentiles{P50: Known(0), P95: Known(0), Max: Known(0)},
			Pattern: Pattern{Name: IdleHeld, MeanActivity: Known(0), IdleRatio: Known(1)}, HourlyActivity: []float64{0, 0.01}},
		{Namespace: "a", Pod: "vram-only", VRAMUsedMiB: Percentiles{P95: Known(0.4)}, Pattern: Pattern{Name: UnknownPattern}, SharedWith: []string{"a/idle"}},
		{Namespace: "a", Pod: "unknown", Pattern: Pattern{Name: UnknownPattern}},
	}, Hourly: []ModelHours{{Model: "L4", AllocatedGPUs: []float64{1, 2}, ActiveGPUs: []float64{0, 0.01}, IdleGPUs: []float64{1, 1.99}, ActivityUnknownGPUs: []float64{0, 0}}}}
	want := &Facts{Window: 2 * time.Hour, Pods: map[string]PodFacts{
		"a/idle":      {Measured: true, Pattern: IdleHeld, VRAMMeasured: true, IdleHeldRatio: 1, IdleHeldMeasured: true, HourlyActivity: []float64{0, 0.01}},
		"a/vram-only": {VRAMMeasured: true, SharedWith: []string{"a/idle"}},
	}, Hourly: r.Hourly}
	facts := r.Facts()
	if diff := cmp.Diff(want, facts); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	b, err := yaml.Marshal(facts.File())
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseFacts(b, "report.podusage")
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}

func TestOwnShare(t *testing.T) {
	cases := map[string]struct {
		shared []string
		want   float64
	}{
		"alone":      {nil, 1},
		"with one":   {[]string{"ml/b"}, 0.5},
		"with three": {[]string{"ml/b", "ml/c", "ml/d"}, 0.25},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (PodFacts{SharedWith: tc.shared}).OwnShare(); got != tc.want {
				t.Errorf("OwnShare() = %v, want %v", got, tc.want)
			}
		})
	}
}
