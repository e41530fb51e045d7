package usage_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/testkit/reportdiff"
	. "github.com/gpupack/gpupack/usage"
)

func TestAccountBucketsAgreesWithAccount(t *testing.T) {
	const step, hours = 10 * time.Second, 3
	per := int(time.Hour / step)
	at := func(k int) int64 { return T0.Add(time.Duration(k) * step).UnixMilli() }
	var series []Series
	add := func(metric string, d Device, o Owner, from, to int, value func(k int) float64) {
		s := Series{Metric: metric, Device: d, Owner: o}
		for k := from; k < to; k++ {
			s.Samples = append(s.Samples, Sample{TimeMs: at(k), Value: value(k)})
		}
		series = append(series, s)
	}
	h100 := Device{Node: "n1", GPU: "0", UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3"}
	shared := Device{Node: "n1", GPU: "1", UUID: "GPU-2", Model: "NVIDIA H100 80GB HBM3"}
	mig := Device{Node: "n2", GPU: "0", UUID: "GPU-3", Model: "NVIDIA H100 80GB HBM3", MIGProfile: "3g.40gb", MIGInstance: "1"}
	a, b, c := Owner{"ml", "a", "main"}, Owner{"ml", "b", "main"}, Owner{"web", "c", "main"}
	all := hours * per
	wave := func(k int) float64 { return 0.5 + 0.5*math.Sin(float64(k)/7) }
	// GPU 0: a holds it until 1h20m, then b (an owner change mid-hour);
	// a gap of 20 min at 2h; NaN activity every 50th step; the energy
	// counter resets at 1h30m.
	change, gapFrom, gapTo := per+per/3, 2*per, 2*per+per/3
	for _, seg := range []struct {
		o        Owner
		from, to int
	}{{a, 0, change}, {b, change, gapFrom}, {b, gapTo, all}} {
		add(GREngineActive, h100, seg.o, seg.from, seg.to, func(k int) float64 {
			if k%50 == 0 {
				return math.NaN()
			}
			return wave(k)
		})
		add(FBUsed, h100, seg.o, seg.from, seg.to, func(k int) float64 { return float64(1000 + k%300) })
		add(PowerUsage, h100, seg.o, seg.from, seg.to, func(k int) float64 { return 100 + 300*wave(k) })
		add(TotalEnergy, h100, seg.o, seg.from, seg.to, func(k int) float64 {
			if k >= per+per/2 {
				return float64(k-per-per/2) * 2000
			}
			return float64(k) * 3000
		})
	}
	// GPU 1: time-sliced by a and c for the second hour, free otherwise.
	add(SMActive, shared, Owner{}, 0, per, func(int) float64 { return 0 })
	add(SMActive, shared, a, per, 2*per, func(k int) float64 { return 0.2 })
	add(SMActive, shared, c, per, 2*per, func(k int) float64 { return 0.2 })
	// ... each through a DRA claim of its own on one device that allows
	// several allocations, as dcgm-exporter labels them.
	gpu1 := DRAHold{Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-1"}
	series[len(series)-2].DRA, series[len(series)-1].DRA = gpu1, gpu1
	series[len(series)-2].DRA.ClaimNamespace, series[len(series)-2].DRA.ClaimName = "ml", "half-a"
	series[len(series)-1].DRA.ClaimNamespace, series[len(series)-1].DRA.ClaimName = "web", "half-c"
	add(SMActive, shared, Owner{}, 2*per, all, func(int) float64 { return 0 })
	add(DRAMActive, shared, c, per, 2*per, func(int) float64 { return 0.5 })
	// A 3g slice of a MIG GPU: c holds it throughout, with GPU utilisation only.
	add(GPUUtil, mig, c, 0, all, func(k int) float64 { return float64(k % 100) })

	pricing := Pricing{Catalogue: gpu.Default()}
	raw, err := Account(Input{Window: Window{Start: T0, End: T0.Add(hours * time.Hour), Step: step}, Series: series, Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	got, err := AccountBuckets(BucketInput{Start: T0, End: T0.Add(hours * time.Hour), Buckets: Bucketize(series, T0, hours, time.Hour, step), Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range reportdiff.Disagreements(raw, got, 0.01) {
		t.Error(d)
	}
	if q := got.Quality; q.CounterResets != raw.Quality.CounterResets || q.Samples != raw.Quality.Samples || q.NaNSamples != raw.Quality.NaNSamples || q.Gaps != raw.Quality.Gaps {
		t.Errorf("quality %+v, want that of the raw path %+v", q, raw.Quality)
	}
	// The GPUs held at start, which both paths read from the pod's first
	// hour: b arrives at 1h20m on a whole GPU; c holds a 3g slice (3/7)
	// from the start and shares GPU 1 only from its second hour.
	for _, want := range []struct {
		pod  string
		gpus float64
	}{{"a", 1}, {"b", 1}, {"c", 0.4286}} {
		ns := "ml"
		if want.pod == "c" {
			ns = "web"
		}
		if h := MustPod(t, got, ns, want.pod).Startup.HeldGPUs; !h.Known() || math.Abs(h.Value()-want.gpus) > 1e-4 {
			t.Errorf("%s: GPUs held at start %+v, want %v", want.pod, h, want.gpus)
		}
	}
	// Who shared GPU 1 (the second hour, 360 steps of 10 s) and through
	// which claims, on both paths.
	for _, r := range []*Report{raw, got} {
		for _, d := range r.Devices {
			want := Device{}
			if d.Key() == shared.Key() {
				want = shared
				if d.SharedSeconds != 3600 || !slices.Equal(d.SharedBy, []string{"ml/a", "web/c"}) || d.DRADevice != "gpu.nvidia.com/n1/gpu-1" {
					t.Errorf("%s: %s shared %v s by %v, DRA device %q; want 3600 s by [ml/a web/c], gpu.nvidia.com/n1/gpu-1", r.Accounting, d.Key(), d.SharedSeconds, d.SharedBy, d.DRADevice)
				}
			}
			if want == (Device{}) && (d.SharedSeconds != 0 || d.SharedBy != nil || d.DRADevice != "") {
				t.Errorf("%s: %s shared %v s by %v, DRA device %q; want none", r.Accounting, d.Key(), d.SharedSeconds, d.SharedBy, d.DRADevice)
			}
		}
		for _, want := range []struct {
			ns, pod      string
			with, claims []string
		}{{"ml", "a", []string{"web/c"}, []string{"ml/half-a"}}, {"ml", "b", nil, nil}, {"web", "c", []string{"ml/a"}, []string{"web/half-c"}}} {
			p := MustPod(t, r, want.ns, want.pod)
			if !slices.Equal(p.SharedWith, want.with) || !slices.Equal(p.Claims, want.claims) {
				t.Errorf("%s: %s shared with %v, claims %v; want %v, %v", r.Accounting, p.Key(), p.SharedWith, p.Claims, want.with, want.claims)
			}
		}
	}
	if p, _ := got.Pod("ml", "a"); p.Pattern.Name != MustPod(t, raw, "ml", "a").Pattern.Name {
		t.Errorf("pod ml/a pattern %s, raw %s", p.Pattern.Name, MustPod(t, raw, "ml", "a").Pattern.Name)
	}
}
