package usage

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// seriesBuilder makes test series fluently: one sample per 10 s step.
type seriesBuilder struct{ s Series }

func makeSeries(metric string) *seriesBuilder {
	return &seriesBuilder{s: Series{Metric: metric, Device: Device{Node: "n1", GPU: "0", UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3"}}}
}

func (b *seriesBuilder) pod(ns, name string) *seriesBuilder {
	b.s.Owner = Owner{Namespace: ns, Pod: name, Container: "main"}
	return b
}

func (b *seriesBuilder) gpu(index, uuid string) *seriesBuilder {
	b.s.Device.GPU, b.s.Device.UUID = index, uuid
	return b
}

func (b *seriesBuilder) mig(profile, id string) *seriesBuilder {
	b.s.Device.MIGProfile, b.s.Device.MIGInstance = profile, id
	return b
}

// at adds values from step `from` on, one per step; NaN stays NaN.
func (b *seriesBuilder) at(from int, values ...float64) *seriesBuilder {
	for i, v := range values {
		b.s.Samples = append(b.s.Samples, Sample{TimeMs: t0.Add(time.Duration(from+i) * 10 * time.Second).UnixMilli(), Value: v})
	}
	return b
}

func (b *seriesBuilder) obj() Series { return b.s }

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func account(t *testing.T, series ...Series) *Report {
	t.Helper()
	r, err := Account(Input{
		Window:  Window{Start: t0, End: t0.Add(100 * time.Second), Step: 10 * time.Second},
		Series:  series,
		Pricing: Pricing{Catalogue: gpu.Default()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type podFigures struct {
	Allocated, Active float64
	ActiveKnown       bool
	Pattern           PatternName
}

func figures(r *Report) map[string]podFigures {
	out := map[string]podFigures{}
	for _, p := range r.Pods {
		out[p.Key()] = podFigures{
			Allocated:   math.Round(float64(p.AllocatedGPUSeconds)*1000) / 1000,
			Active:      math.Round(p.ActiveGPUSeconds.Value()*1000) / 1000,
			ActiveKnown: p.ActiveGPUSeconds.Known(),
			Pattern:     p.Pattern.Name,
		}
	}
	return out
}

func TestAccount(t *testing.T) {
	cases := map[string]struct {
		series []Series
		want   map[string]podFigures
	}{
		"whole GPU, GR engine preferred over SM and util": {
			series: []Series{
				makeSeries(GREngineActive).pod("a", "p").at(0, repeat(0.9, 10)...).obj(),
				makeSeries(SMActive).pod("a", "p").at(0, repeat(0.1, 10)...).obj(),
				makeSeries(GPUUtil).pod("a", "p").at(0, repeat(10, 10)...).obj(),
			},
			want: map[string]podFigures{"a/p": {Allocated: 100, Active: 90, ActiveKnown: true, Pattern: Busy}},
		},
		"GPU_UTIL is a percentage": {
			series: []Series{makeSeries(GPUUtil).pod("a", "p").at(0, repeat(50, 10)...).obj()},
			want:   map[string]podFigures{"a/p": {Allocated: 100, Active: 50, ActiveKnown: true, Pattern: Moderate}},
		},
		"time-sliced GPU splits allocation and activity": {
			series: []Series{
				makeSeries(GREngineActive).pod("a", "p1").at(0, repeat(0.4, 10)...).obj(),
				makeSeries(GREngineActive).pod("a", "p2").at(5, repeat(0.4, 5)...).obj(),
			},
			want: map[string]podFigures{
				"a/p1": {Allocated: 75, Active: 30, ActiveKnown: true, Pattern: Moderate},
				"a/p2": {Allocated: 25, Active: 10, ActiveKnown: true, Pattern: Moderate},
			},
		},
		"MIG slice counts its share of the GPU": {
			series: []Series{makeSeries(GREngineActive).mig("3g.40gb", "1").pod("a", "p").at(0, repeat(0.7, 7)...).obj()},
			want:   map[string]podFigures{"a/p": {Allocated: 30, Active: 21, ActiveKnown: true, Pattern: Busy}},
		},
		"no activity metric: active is unknown, not zero": {
			series: []Series{makeSeries(FBUsed).pod("a", "p").at(0, repeat(1000, 10)...).obj()},
			want:   map[string]podFigures{"a/p": {Allocated: 100, Pattern: UnknownPattern}},
		},
		"NaN samples hold the device but say nothing of activity": {
			series: []Series{makeSeries(GREngineActive).pod("a", "p").at(0, 0.5, math.NaN(), 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5).obj()},
			want:   map[string]podFigures{"a/p": {Allocated: 100, Active: 45, ActiveKnown: true, Pattern: Moderate}},
		},
		"idle-held": {
			series: []Series{makeSeries(GREngineActive).pod("a", "p").at(0, repeat(0.01, 10)...).obj()},
			want:   map[string]podFigures{"a/p": {Allocated: 100, Active: 1, ActiveKnown: true, Pattern: IdleHeld}},
		},
		"bursty": {
			series: []Series{makeSeries(GREngineActive).pod("a", "p").at(0, 0.9, 0, 0, 0, 0.9, 0, 0, 0, 0.9, 0).obj()},
			want:   map[string]podFigures{"a/p": {Allocated: 100, Active: 27, ActiveKnown: true, Pattern: Bursty}},
		},
		"memory-bound": {
			series: []Series{
				makeSeries(GREngineActive).pod("a", "p").at(0, repeat(0.3, 10)...).obj(),
				makeSeries(DRAMActive).pod("a", "p").at(0, repeat(0.8, 10)...).obj(),
			},
			want: map[string]podFigures{"a/p": {Allocated: 100, Active: 30, ActiveKnown: true, Pattern: MemoryBound}},
		},
		"flat-low": {
			series: []Series{makeSeries(GREngineActive).pod("a", "p").at(0, repeat(0.15, 10)...).obj()},
			want:   map[string]podFigures{"a/p": {Allocated: 100, Active: 15, ActiveKnown: true, Pattern: FlatLow}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := figures(account(t, tc.series...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQualityAndUnallocated(t *testing.T) {
	r := account(t,
		// GPU 0: free for 3 steps, a gap of 2, then held by p for 5.
		makeSeries(GREngineActive).at(0, 0, 0, 0).obj(),
		makeSeries(GREngineActive).pod("a", "p").at(5, repeat(0.5, 5)...).obj(),
		// GPU 1: an energy counter that resets, no activity at all.
		makeSeries(TotalEnergy).gpu("1", "GPU-2").at(0, 1000, 2000, 3000, 500, 1500).obj(),
		// A sample outside the window.
		makeSeries(GREngineActive).gpu("2", "GPU-3").at(50, 1).obj(),
	)
	q := r.Quality
	if q.Gaps != 1 || q.CounterResets != 1 || q.OutOfWindow != 1 {
		t.Errorf("gaps %d, resets %d, out of window %d; want 1, 1, 1", q.Gaps, q.CounterResets, q.OutOfWindow)
	}
	if q.ActivitySources[GREngineActive] != 1 || q.ActivitySources["none"] != 2 {
		t.Errorf("activity sources %v; want GPU 0 from GR engine, GPUs 1 and 2 (no sample in the window) none", q.ActivitySources)
	}
	if got := float64(r.Cluster.UnallocatedGPUSeconds); got != 30+50 {
		t.Errorf("unallocated %v GPU-seconds, want 80 (3 free steps of GPU 0, 5 of GPU 1)", got)
	}
	var gpu1 DeviceUsage
	for _, d := range r.Devices {
		if d.GPU == "1" {
			gpu1 = d
		}
	}
	// Energy: increases of 1, 1, then 0.5 after the reset and 1: 3.5 J.
	if !gpu1.EnergyJoules.Known() || gpu1.EnergyJoules.Value() != 3.5 {
		t.Errorf("GPU 1 energy %+v, want 3.5 J across the reset", gpu1.EnergyJoules)
	}
	if len(q.MissingMetrics) == 0 {
		t.Error("no missing metrics reported; FB_USED and DRAM_ACTIVE are absent")
	}
}

func TestCost(t *testing.T) {
	r := account(t, makeSeries(GREngineActive).pod("a", "p").at(0, repeat(0.25, 10)...).obj())
	p, _ := r.Pod("a", "p")
	h100 := gpu.Default().MustLookup("H100-80GB").PricePerHour
	want := h100 * 100 / 3600
	if math.Abs(p.Cost.Value()-want) > 1e-9 || math.Abs(p.IdleCost.Value()-0.75*want) > 1e-9 || math.Abs(p.CostPerActiveGPUHour.Value()-4*h100) > 1e-9 {
		t.Errorf("cost %v idle %v per active hour %v; want %v, %v, %v", p.Cost.Value(), p.IdleCost.Value(), p.CostPerActiveGPUHour.Value(), want, 0.75*want, 4*h100)
	}
	rule := Pricing{Catalogue: gpu.Default(), NodeLabels: map[string]map[string]string{"n1": {"spot": "true"}}, Rules: []PriceRule{{Labels: map[string]string{"spot": "true"}, PerHour: 1}}}
	if got := rule.PerHour(Device{Node: "n1", Model: "H100"}); got != Known(1) {
		t.Errorf("node-label rule price = %+v, want 1", got)
	}
	sanitised := Pricing{Catalogue: gpu.Default(), NodeLabels: map[string]map[string]string{"n1": {"cloud_google_com_gke_spot": "true"}}, Rules: []PriceRule{{Labels: map[string]string{"cloud.google.com/gke-spot": "true"}, PerHour: 0.5}}}
	if got := sanitised.PerHour(Device{Node: "n1", Model: "H100"}); got != Known(0.5) {
		t.Errorf("rule on a kube-state-metrics label = %+v, want 0.5", got)
	}
	if got := (Pricing{Catalogue: gpu.Default()}).PerHour(Device{Model: "Mystery GPU"}); got.Known() {
		t.Errorf("unknown model priced %+v, want unknown", got)
	}
}

func TestBadWindow(t *testing.T) {
	cases := map[string]struct {
		w    Window
		want string
	}{
		"empty":           {Window{Start: t0, End: t0, Step: time.Second}, "has no steps"},
		"no step":         {Window{Start: t0, End: t0.Add(time.Hour)}, "has no steps"},
		"one step over":   {Window{Start: t0, End: t0.Add((MaxSteps + 1) * time.Second), Step: time.Second}, "has 11001 steps, more than the 11000 one window may have; use a step of 2s or more"},
		"a nanosecond":    {Window{Start: t0, End: t0.Add(24 * time.Hour), Step: time.Nanosecond}, "not a whole number of milliseconds"},
		"a millisecond":   {Window{Start: t0, End: t0.Add(24 * time.Hour), Step: time.Millisecond}, "use a step of 8s or more"},
		"1.5 ms":          {Window{Start: t0, End: t0.Add(time.Second), Step: 1500 * time.Microsecond}, "not a whole number of milliseconds"},
		"100000 h at 30s": {Window{Start: t0, End: t0.Add(100000 * time.Hour), Step: 30 * time.Second}, "has 12000000 steps"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Account(Input{Window: tc.w})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := Account(Input{Window: Window{Start: t0, End: t0.Add(MaxSteps * time.Second), Step: time.Second}}); err != nil {
		t.Errorf("a window of exactly MaxSteps steps was refused: %v", err)
	}
}

func TestUninstantiatedMIGSlices(t *testing.T) {
	// An H100 (7 compute slices) with a 3g and a 2g instance: 2/7 of it has
	// no instance. The 3g is held for the whole window, the 2g is free and
	// sampled for half of it.
	r := account(t,
		makeSeries(GREngineActive).mig("3g.40gb", "1").pod("a", "p").at(0, repeat(0.5, 10)...).obj(),
		makeSeries(GREngineActive).mig("2g.20gb", "2").at(0, repeat(0, 5)...).obj(),
	)
	price := gpu.Default().MustLookup("H100-80GB").PricePerHour
	type row struct {
		Uninstantiated                            bool
		Share                                     float64
		Capacity, Allocated, Unallocated, Unsampl float64
		UnallocatedCost                           float64
	}
	round := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }
	var got []row
	for _, d := range r.Devices {
		got = append(got, row{d.Uninstantiated, round(d.Share), round(float64(d.CapacityGPUSeconds)), round(float64(d.AllocatedGPUSeconds)),
			round(float64(d.UnallocatedGPUSeconds)), round(float64(d.UnsampledGPUSeconds)), round(d.UnallocatedCost.Value())})
	}
	c := r.Cluster
	got = append(got, row{false, 1, round(float64(c.CapacityGPUSeconds)), round(float64(c.AllocatedGPUSeconds)),
		round(float64(c.UnallocatedGPUSeconds)), round(float64(c.UnsampledGPUSeconds)), round(c.UnallocatedCost.Value())})
	sev := 100.0 / 7
	want := []row{
		{false, round(3.0 / 7), round(3 * sev), round(3 * sev), 0, 0, 0},
		{false, round(2.0 / 7), round(2 * sev), 0, round(sev), round(sev), round(sev * price / 3600)},
		{true, round(2.0 / 7), round(2 * sev), 0, round(2 * sev), 0, round(2 * sev * price / 3600)},
		{false, 1, 100, round(3 * sev), round(3 * sev), round(sev), round(3 * sev * price / 3600)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices and cluster (-want +got):\n%s", diff)
	}
}

// TestZeroIsNotNull checks that a measured 0 encodes as 0 and only what is
// unknown as null, and that money over partly unpriced time is unknown
// rather than the sum of the priced part.
func TestZeroIsNotNull(t *testing.T) {
	mystery := makeSeries(GREngineActive).gpu("1", "GPU-2").pod("b", "unpriced").at(0, repeat(0.5, 10)...).obj()
	mystery.Device.Model = "Mystery GPU"
	r := account(t,
		makeSeries(GREngineActive).pod("a", "idle").at(0, repeat(0, 10)...).obj(),
		makeSeries(FBUsed).pod("a", "idle").at(0, repeat(0, 10)...).obj(),
		makeSeries(FBUsed).gpu("2", "GPU-3").pod("a", "noactivity").at(0, repeat(500, 10)...).obj(),
		mystery,
	)
	field := func(v any, name string) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return string(m[name])
	}
	idle, _ := r.Pod("a", "idle")
	noActivity, _ := r.Pod("a", "noactivity")
	unpriced, _ := r.Pod("b", "unpriced")
	got := map[string]string{
		"idle active":          field(idle, "activeGPUSeconds"),
		"idle mean activity":   field(idle.Pattern, "meanActivity"),
		"idle vram p95":        field(idle.VRAMUsedMiB, "p95"),
		"idle per active hour": field(idle, "costPerActiveGPUHour"),
		"no activity active":   field(noActivity, "activeGPUSeconds"),
		"no activity unknown":  field(noActivity, "activityUnknownGPUSeconds"),
		"unpriced cost":        field(unpriced, "cost"),
		"namespace a cost":     strconv.FormatBool(field(r.Namespaces[0], "cost") != "null"),
		"cluster cost":         field(r.Cluster, "cost"),
		"cluster unsampled":    field(r.Cluster, "unsampledGPUSeconds"),
	}
	want := map[string]string{
		"idle active":          "0",
		"idle mean activity":   "0",
		"idle vram p95":        "0",
		"idle per active hour": "null", // nothing active to divide by
		"no activity active":   "null",
		"no activity unknown":  "100",
		"unpriced cost":        "null",
		"namespace a cost":     "true",
		"cluster cost":         "null", // part of it has no price
		"cluster unsampled":    "0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON figures (-want +got):\n%s", diff)
	}
	// The idle pod's null is a figure with no value, since nothing was
	// active; the others' are unknown.
	for name, tc := range map[string]struct {
		p    *PodUsage
		want bool
	}{"idle": {idle, true}, "no activity": {noActivity, false}, "unpriced": {unpriced, false}} {
		if got := tc.p.NoActiveHour(); got != tc.want {
			t.Errorf("%s: NoActiveHour() = %v, want %v", name, got, tc.want)
		}
	}
}

// TestCompareOwnerKeys: owners order as their joined keys do, including
// names that are prefixes of one another and characters below "/".
func TestCompareOwnerKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	name := func() string {
		const chars = "ab-.z"
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = chars[rng.IntN(len(chars))]
		}
		return string(b)
	}
	for range 20000 {
		x := Owner{Namespace: name(), Pod: name(), Container: name()}
		y := Owner{Namespace: name(), Pod: name(), Container: name()}
		if rng.IntN(4) == 0 {
			y.Namespace = x.Namespace
		}
		want := strings.Compare(x.PodKey()+"/"+x.Container, y.PodKey()+"/"+y.Container)
		if got := compareOwnerKeys(x, y); got != want {
			t.Fatalf("compareOwnerKeys(%+v, %+v) = %d, want %d", x, y, got, want)
		}
	}
}
