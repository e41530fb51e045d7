package usage

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// attributed is a pod's figures on a shared GPU and how they were split.
type attributed struct {
	Allocated, Active, VRAMP95 float64
	Attribution                string
}

func attributedFigures(r *Report) map[string]attributed {
	out := map[string]attributed{}
	for _, p := range r.Pods {
		out[p.Pod] = attributed{Allocated: float64(p.AllocatedGPUSeconds), Active: p.ActiveGPUSeconds.Value(), VRAMP95: p.VRAMUsedMiB.P95.Value(), Attribution: p.Attribution}
	}
	return out
}

// TestAccountPerProcess: a time-sliced GPU at 70% activity, 40 GiB used,
// held by ml/a (its processes 60% of the device, 30 GiB) and ml/b (10%, 10
// GiB) over 100 s. With the agent's series a is credited 60 active and
// 60 + 30/2 allocated GPU-seconds, b 10 and 10 + 15, each its own VRAM;
// without them both get 35 of 50; with b's series missing for the last
// five steps, the first of those takes its neighbour's value (the two
// exporters are scraped at different moments) and the other four are
// split evenly.
func TestAccountPerProcess(t *testing.T) {
	device := []Series{
		makeSeries(GREngineActive).at(0, repeat(0.7, 10)...).obj(),
		makeSeries(FBUsed).at(0, repeat(40960, 10)...).obj(),
		makeSeries(GREngineActive).pod("ml", "a").at(0, repeat(0.7, 10)...).obj(),
		makeSeries(GREngineActive).pod("ml", "b").at(0, repeat(0.7, 10)...).obj(),
	}
	agentA := []Series{
		makeSeries(PodSMActive).pod("ml", "a").at(0, repeat(0.6, 10)...).obj(),
		makeSeries(PodFBUsed).pod("ml", "a").at(0, repeat(30720, 10)...).obj(),
	}
	agentB := []Series{
		makeSeries(PodSMActive).pod("ml", "b").at(0, repeat(0.1, 10)...).obj(),
		makeSeries(PodFBUsed).pod("ml", "b").at(0, repeat(10240, 10)...).obj(),
	}
	halfB := []Series{makeSeries(PodSMActive).pod("ml", "b").at(0, repeat(0.1, 5)...).obj()}
	cases := map[string]struct {
		series []Series
		want   map[string]attributed
	}{
		"per process": {
			series: join(device, agentA, agentB),
			want: map[string]attributed{
				"a": {Allocated: 75, Active: 60, VRAMP95: 30720, Attribution: AttributionPerProcess},
				"b": {Allocated: 25, Active: 10, VRAMP95: 10240, Attribution: AttributionPerProcess},
			},
		},
		"even split without the agent": {
			series: device,
			want: map[string]attributed{
				"a": {Allocated: 50, Active: 35, VRAMP95: 40960, Attribution: AttributionEvenSplit},
				"b": {Allocated: 50, Active: 35, VRAMP95: 40960, Attribution: AttributionEvenSplit},
			},
		},
		"a pod's series missing for half the window": {
			series: join(device, agentA[:1], halfB),
			want: map[string]attributed{
				"a": {Allocated: 6*7.5 + 20, Active: 6*6 + 14, VRAMP95: 40960, Attribution: AttributionMixed},
				"b": {Allocated: 6*2.5 + 20, Active: 6*1 + 14, VRAMP95: 40960, Attribution: AttributionMixed},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := account(t, tc.series...)
			if diff := cmp.Diff(tc.want, attributedFigures(r), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
			if got := r.Devices[0].ActiveGPUSeconds.Value(); math.Abs(got-70) > 1e-9 {
				t.Errorf("device active %v GPU-seconds, want DCGM's 70 whatever the split", got)
			}
		})
	}
}

// TestAccountPerProcessAloneIsExclusive: the agent's series of a pod that
// held its GPU alone change nothing, and make no device of their own.
func TestAccountPerProcessAloneIsExclusive(t *testing.T) {
	r := account(t,
		makeSeries(GREngineActive).pod("ml", "a").at(0, repeat(0.7, 10)...).obj(),
		makeSeries(PodSMActive).pod("ml", "a").at(0, repeat(0.2, 10)...).obj(),
		makeSeries(PodSMActive).gpu("1", "GPU-2").pod("ml", "z").at(0, repeat(0.2, 10)...).obj(),
	)
	want := map[string]attributed{"a": {Allocated: 100, Active: 70, Attribution: AttributionExclusive}}
	if diff := cmp.Diff(want, attributedFigures(r), cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreFields(attributed{}, "VRAMP95")); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if len(r.Devices) != 1 {
		t.Errorf("%d devices, want 1: the agent's series make no device", len(r.Devices))
	}
}

func join(parts ...[]Series) []Series {
	var out []Series
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestBridgeOneStep(t *testing.T) {
	n := math.NaN()
	cases := map[string]struct{ in, want []float64 }{
		"edges one step apart": {in: []float64{n, 1, 2, n}, want: []float64{1, 1, 2, 2}},
		"two steps apart":      {in: []float64{1, n, n, 2}, want: []float64{1, 1, 2, 2}},
		"three steps apart":    {in: []float64{1, n, n, n, 2}, want: []float64{1, 1, n, 2, 2}},
		"nothing":              {in: []float64{n, n}, want: []float64{n, n}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bridgeOneStep(tc.in)
			if diff := cmp.Diff(tc.want, tc.in, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("bridgeOneStep (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFactsPerProcess: a pod measured per process on a shared GPU keeps
// its own VRAM and activity (OwnShare 1) through the usage file; one
// split evenly is credited its equal share.
func TestFactsPerProcess(t *testing.T) {
	device := []Series{
		makeSeries(GREngineActive).pod("ml", "a").at(0, repeat(0.7, 10)...).obj(),
		makeSeries(GREngineActive).pod("ml", "b").at(0, repeat(0.7, 10)...).obj(),
	}
	agent := []Series{
		makeSeries(PodSMActive).pod("ml", "a").at(0, repeat(0.6, 10)...).obj(),
		makeSeries(PodSMActive).pod("ml", "b").at(0, repeat(0.1, 10)...).obj(),
	}
	for name, tc := range map[string]struct {
		series []Series
		want   float64
	}{"per process": {join(device, agent), 1}, "even split": {device, 0.5}} {
		t.Run(name, func(t *testing.T) {
			f := account(t, tc.series...).Facts()
			data, err := json.Marshal(f.File())
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseFacts(data, "usage.json")
			if err != nil {
				t.Fatal(err)
			}
			if got := back.Pods["ml/a"].OwnShare(); got != tc.want {
				t.Errorf("OwnShare of ml/a read back: %v, want %v", got, tc.want)
			}
		})
	}
}
