package usage

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
)

// bucketize computes buckets from series as the query engine does from the
// same samples (a reference for AccountBuckets' tests; promsource's
// end-to-end test checks the real PromQL): per step, the last sample of
// each metric, the owners present, activity by per-step preference.
func bucketize(series []Series, start time.Time, n int, length, step time.Duration) []Bucket {
	slots := n * int(length/step)
	stepMs := step.Milliseconds()
	type dev struct {
		device  Device
		vals    [nMetrics][]float64
		has     [nMetrics][]bool
		sampled []bool
		owners  map[Owner][]bool
		dra     map[Owner]DRAHold
		samples []float64
		nan     []float64
		metrics map[string]bool
	}
	devs := map[string]*dev{}
	var order []string
	for _, s := range series {
		mi, ok := metricIndex[s.Metric]
		if !ok {
			continue
		}
		d := devs[s.Device.Key()]
		if d == nil {
			d = &dev{device: s.Device, sampled: make([]bool, slots), owners: map[Owner][]bool{}, dra: map[Owner]DRAHold{}, samples: make([]float64, slots), nan: make([]float64, slots), metrics: map[string]bool{}}
			for m := range d.vals {
				d.vals[m] = make([]float64, slots)
				d.has[m] = make([]bool, slots)
				for k := range d.vals[m] {
					d.vals[m][k] = math.NaN()
				}
			}
			devs[s.Device.Key()] = d
			order = append(order, s.Device.Key())
		}
		d.metrics[s.Metric] = true
		for _, smp := range s.Samples {
			k := int((smp.TimeMs - start.UnixMilli()) / stepMs)
			if k < 0 || k >= slots {
				continue
			}
			d.sampled[k] = true
			d.samples[k]++
			if !s.Owner.IsZero() {
				if !s.DRA.IsZero() {
					d.dra[s.Owner] = s.DRA
				}
				if d.owners[s.Owner] == nil {
					d.owners[s.Owner] = make([]bool, slots)
				}
				d.owners[s.Owner][k] = true
			}
			d.has[mi][k] = true
			if math.IsNaN(smp.Value) || math.IsInf(smp.Value, 0) {
				d.nan[k]++
				continue
			}
			d.vals[mi][k] = smp.Value
		}
	}
	var out []Bucket
	per := int(length / step)
	for _, key := range order {
		d := devs[key]
		activity := func(k int) (float64, string) {
			for i, m := range []int{mGR, mSM, mUtil} {
				if d.has[m][k] {
					v := d.vals[m][k]
					if m == mUtil {
						v /= 100
					}
					return math.Max(0, math.Min(1, v)), ActivitySources[i]
				}
			}
			return math.NaN(), ""
		}
		energy := func(k int) float64 {
			e := d.vals[mEnergy][k]
			if k > 0 && !math.IsNaN(e) && !math.IsNaN(d.vals[mEnergy][k-1]) {
				if e < d.vals[mEnergy][k-1] {
					return e / 1000
				}
				return (e - d.vals[mEnergy][k-1]) / 1000
			}
			if p := d.vals[mPower][k]; !math.IsNaN(p) {
				return p * step.Seconds()
			}
			return math.NaN()
		}
		// shared says whether two or more pods held the device at step k.
		shared := func(k int) bool {
			pods := map[string]bool{}
			for o, present := range d.owners {
				if present[k] {
					pods[o.PodKey()] = true
				}
			}
			return len(pods) > 1
		}
		for bi := 0; bi < n; bi++ {
			bs := start.Add(time.Duration(bi) * length)
			own := Bucket{Start: bs, Length: length, Step: step, Device: d.device}
			var vram, free []float64
			for m := range d.metrics {
				own.Metrics = append(own.Metrics, m)
			}
			srcRank := 3
			for k := bi * per; k < (bi+1)*per; k++ {
				if !d.sampled[k] {
					continue
				}
				own.SampledSteps++
				if k == 0 || !d.sampled[k-1] { // nothing before the window here
					own.SampledAfterGap++
				}
				own.Samples += d.samples[k]
				own.NaNSamples += d.nan[k]
				for _, o := range d.owners {
					if o[k] {
						own.HeldSteps++
						break
					}
				}
				if shared(k) {
					own.SharedSteps++
				}
				if v := d.vals[mFBUsed][k]; !math.IsNaN(v) {
					vram = append(vram, v)
				}
				if v := d.vals[mFBFree][k]; !math.IsNaN(v) {
					free = append(free, v)
				}
				if v := d.vals[mPower][k]; !math.IsNaN(v) {
					own.PowerSum += v
					own.PowerSteps++
				}
				if e := energy(k); !math.IsNaN(e) {
					own.EnergyJoules = Known(own.EnergyJoules.Value() + e)
				}
				if k > 0 && d.vals[mEnergy][k] < d.vals[mEnergy][k-1] {
					own.CounterResets++
				}
				for i, m := range []int{mGR, mSM, mUtil} {
					if !math.IsNaN(d.vals[m][k]) && i < srcRank {
						srcRank = i
					}
				}
			}
			if own.SampledSteps == 0 {
				continue
			}
			if srcRank < 3 {
				own.ActivitySource = ActivitySources[srcRank]
			}
			own.VRAMUsedMiB, own.VRAMFreeMiB = percentiles(vram), percentiles(free)
			own.OutOfRange = outOfRangeOf(&d.vals, bi*per, (bi+1)*per)
			out = append(out, own)
			for o, present := range d.owners {
				b := Bucket{Start: bs, Length: length, Step: step, Device: d.device, Owner: o, DRA: d.dra[o]}
				var acts, fbs []float64
				for k := bi * per; k < (bi+1)*per; k++ {
					if !present[k] {
						continue
					}
					n := 0.0
					for _, p := range d.owners {
						if p[k] {
							n++
						}
					}
					b.HeldSteps++
					b.HeldShareSteps += 1 / n
					if shared(k) {
						b.SharedSteps++
					}
					if b.FirstHeld.IsZero() {
						b.FirstHeld = start.Add(time.Duration(k) * step)
					}
					a, _ := activity(k)
					fb := d.vals[mFBUsed][k]
					if !math.IsNaN(a) {
						b.ActivityKnownShareSteps += 1 / n
						b.ActiveShareSteps += a / n
						acts = append(acts, a)
					}
					if !math.IsNaN(fb) {
						fbs = append(fbs, fb)
					}
					if b.FirstUse.IsZero() && (a > ActivityIdleFloor || fb > FBIdleFloorMiB) {
						b.FirstUse = start.Add(time.Duration(k) * step)
					}
					if v := d.vals[mDRAM][k]; !math.IsNaN(v) {
						b.DRAMSum += v
						b.DRAMSteps++
					}
					if v := d.vals[mPower][k]; !math.IsNaN(v) {
						b.PowerSum += v
						b.PowerSteps++
					}
					if e := energy(k); !math.IsNaN(e) {
						b.EnergyJoules = Known(b.EnergyJoules.Value() + e/n)
					}
				}
				if b.HeldSteps == 0 {
					continue
				}
				p := percentiles(acts)
				b.Activity = activityStats(acts)
				b.ActivityP50, b.ActivityMax = p.P50, p.Max
				b.VRAMUsedMiB = percentiles(fbs)
				out = append(out, b)
			}
		}
	}
	return out
}

func mustPod(t *testing.T, r *Report, ns, name string) *PodUsage {
	t.Helper()
	p, ok := r.Pod(ns, name)
	if !ok {
		t.Fatalf("no pod %s/%s in the report", ns, name)
	}
	return p
}

func TestAccountBucketsEdgeCases(t *testing.T) {
	pricing := Pricing{Catalogue: gpu.Default()}
	end := t0.Add(2 * time.Hour)
	dev := Device{Node: "n1", GPU: "0", UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3"}
	owner := Owner{"ml", "p", "main"}
	bucket := func(d Device, o Owner, start time.Time) Bucket {
		return Bucket{Start: start, Length: time.Hour, Step: 30 * time.Second, Device: d, Owner: o, HeldSteps: 120, SampledSteps: 120}
	}

	t.Run("no buckets", func(t *testing.T) {
		r, err := AccountBuckets(BucketInput{Start: t0, End: end, Pricing: pricing})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Devices) != 0 || r.Cluster.CapacityGPUSeconds != 0 || r.Quality.Coverage.Known() || len(r.Quality.MissingMetrics) == 0 {
			t.Errorf("empty input gave devices %v, capacity %v, coverage %+v, missing %v; want none, 0, unknown, every metric missing", r.Devices, r.Cluster.CapacityGPUSeconds, r.Quality.Coverage, r.Quality.MissingMetrics)
		}
	})
	t.Run("unknown activity", func(t *testing.T) {
		own := bucket(dev, Owner{}, t0)
		held := bucket(dev, owner, t0)
		held.HeldShareSteps = 120 // no activity-known steps
		r, err := AccountBuckets(BucketInput{Start: t0, End: end, Pricing: pricing, Buckets: []Bucket{own, held}})
		if err != nil {
			t.Fatal(err)
		}
		p := mustPod(t, r, "ml", "p")
		if p.AllocatedGPUSeconds != 3600 || p.ActiveGPUSeconds.Known() || p.IdleCost.Known() || p.ActivityUnknownGPUSeconds != 3600 || p.Pattern.Name != UnknownPattern {
			t.Errorf("pod %+v; want 3600 allocated, active and idle cost unknown, all of it activity-unknown, unknown pattern", p.Totals)
		}
		d := r.Devices[0]
		if d.UnsampledGPUSeconds != 3600 || d.UnallocatedGPUSeconds != 0 || d.Coverage.Value() != 0.5 {
			t.Errorf("device capacity %+v coverage %v; want the second hour unsampled, nothing unallocated, coverage 0.5", d.Capacity, d.Coverage)
		}
		if d.EnergyJoules.Known() || p.EnergyJoules.Known() {
			t.Errorf("energy %+v / %+v without power or counter; want unknown", d.EnergyJoules, p.EnergyJoules)
		}
	})
	t.Run("unpriced device", func(t *testing.T) {
		odd := dev
		odd.Model = "NVIDIA Mystery GPU"
		own := bucket(odd, Owner{}, t0)
		held := bucket(odd, owner, t0)
		held.HeldShareSteps, held.ActivityKnownShareSteps, held.ActiveShareSteps = 120, 120, 60
		r, err := AccountBuckets(BucketInput{Start: t0, End: end, Pricing: pricing, Buckets: []Bucket{own, held}})
		if err != nil {
			t.Fatal(err)
		}
		p := mustPod(t, r, "ml", "p")
		if p.Cost.Known() || p.CostPerActiveGPUHour.Known() || !p.ActiveGPUSeconds.Known() || p.ActiveGPUSeconds.Value() != 1800 {
			t.Errorf("pod %+v; want cost unknown and 1800 active GPU-seconds", p.Totals)
		}
	})
	t.Run("attribution from the per-process steps", func(t *testing.T) {
		// Two pods share the device both hours; the first hour is split
		// per process for both, the second only for the first 30 steps.
		other := Owner{"ml", "q", "main"}
		var buckets []Bucket
		for h, pp := range []float64{120, 30} {
			start := t0.Add(time.Duration(h) * time.Hour)
			own := bucket(dev, Owner{}, start)
			own.SharedSteps, own.PerProcessSteps = 120, pp
			buckets = append(buckets, own)
			for _, o := range []Owner{owner, other} {
				b := bucket(dev, o, start)
				b.HeldShareSteps, b.SharedSteps, b.PerProcessSteps = 60, 120, pp
				buckets = append(buckets, b)
			}
		}
		for _, tc := range []struct {
			name    string
			buckets []Bucket
			want    string
			wantPP  Seconds
		}{
			{"per-process", buckets[:3], AttributionPerProcess, 3600},
			{"mixed", buckets, AttributionMixed, 3600 + 900},
		} {
			r, err := AccountBuckets(BucketInput{Start: t0, End: end, Pricing: pricing, Buckets: tc.buckets})
			if err != nil {
				t.Fatal(err)
			}
			for _, pod := range []string{"p", "q"} {
				if p := mustPod(t, r, "ml", pod); p.Attribution != tc.want {
					t.Errorf("%s: pod %s attribution %q, want %q", tc.name, pod, p.Attribution, tc.want)
				}
			}
			if d := r.Devices[0]; d.PerProcessSeconds != tc.wantPP {
				t.Errorf("%s: device per-process seconds %v, want %v", tc.name, d.PerProcessSeconds, tc.wantPP)
			}
		}
	})
	t.Run("buckets that do not fit", func(t *testing.T) {
		for name, tc := range map[string]struct {
			b    Bucket
			want string
		}{
			"outside":   {bucket(dev, Owner{}, end), "not inside the window"},
			"bad step":  {Bucket{Start: t0, Length: time.Hour, Step: 7 * time.Minute, Device: dev}, "divides the length"},
			"zero step": {Bucket{Start: t0, Length: time.Hour, Device: dev}, "positive step"},
		} {
			_, err := AccountBuckets(BucketInput{Start: t0, End: end, Pricing: pricing, Buckets: []Bucket{tc.b}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v; want one saying %q", name, err, tc.want)
			}
		}
		mixed := []Bucket{bucket(dev, Owner{}, t0), bucket(dev, Owner{}, t0.Add(time.Hour))}
		mixed[1].Step = time.Minute
		if _, err := AccountBuckets(BucketInput{Start: t0, End: end, Pricing: pricing, Buckets: mixed}); err == nil || !strings.Contains(err.Error(), "one step") {
			t.Errorf("mixed steps: error %v; want one asking for one step", err)
		}
	})
}

// TestDeviceKey: a device's key, whole or a MIG instance, and one longer
// than Key's buffer on the stack; the account finds a device by it.
func TestDeviceKey(t *testing.T) {
	long := strings.Repeat("n", 200)
	for _, c := range []struct {
		d    Device
		want string
	}{
		{Device{Node: "node-1", GPU: "0", UUID: "GPU-a"}, "node-1/0/GPU-a"},
		{Device{Node: "node-1", GPU: "0", UUID: "GPU-a", MIGProfile: "1g.10gb", MIGInstance: "3"}, "node-1/0/GPU-a/mig3"},
		{Device{Node: long, GPU: "7", UUID: "GPU-b"}, long + "/7/GPU-b"},
	} {
		if got := c.d.Key(); got != c.want {
			t.Errorf("Key() = %q, want %q", got, c.want)
		}
	}
}

// outOfRangeOf is, as the hourly path's figures give them, each metric's
// value furthest below its range and furthest above it at the steps
// [from, to) of vals (by metric index).
func outOfRangeOf(vals *[nMetrics][]float64, from, to int) []MetricValue {
	var out []MetricValue
	for _, m := range Metrics {
		lo, hi := MetricRange(m)
		below, above := math.Inf(1), math.Inf(-1)
		for _, v := range vals[metricIndex[m]][from:to] {
			if v < lo {
				below = min(below, v)
			}
			if v > hi {
				above = max(above, v)
			}
		}
		if !math.IsInf(below, 1) {
			out = append(out, MetricValue{m, below})
		}
		if !math.IsInf(above, -1) {
			out = append(out, MetricValue{m, above})
		}
	}
	return out
}
