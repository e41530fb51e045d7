package usage

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

// TestOutOfRangeWarnings: values outside their metric's range (negative
// VRAM and power, activity above 1, GPU utilisation above 100) are named
// in the warnings with the device, the value and its hour, by the raw
// path and the hourly one alike; activity stays clamped to 0..1 in the
// accounting, and values inside their range warn of nothing.
func TestOutOfRangeWarnings(t *testing.T) {
	const step = 10 * time.Second
	w := Window{Start: t0, End: t0.Add(2 * time.Hour), Step: step}
	steps := int(2 * time.Hour / step)
	inHour := func(h int, v, rest float64) []float64 {
		out := repeat(rest, steps)
		out[h*360+7] = v
		return out
	}
	series := []Series{
		makeSeries(GREngineActive).pod("ml", "train").at(0, inHour(1, 1.5, 0.5)...).obj(),
		makeSeries(FBUsed).pod("ml", "train").at(0, inHour(0, -512, 4096)...).obj(),
		makeSeries(PowerUsage).pod("ml", "train").at(0, repeat(300, steps)...).obj(),
		makeSeries(GPUUtil).gpu("1", "GPU-2").pod("ml", "infer").at(0, inHour(1, 250, 40)...).obj(),
		makeSeries(PowerUsage).gpu("1", "GPU-2").pod("ml", "infer").at(0, inHour(1, -3, 100)...).obj(),
	}
	raw, err := Account(Input{Window: w, Series: series, Pricing: Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"DCGM_FI_DEV_FB_USED of GPU GPU-1 on node n1 (gpu 0) was -512 in the hour from 2026-01-05T00:00:00Z, outside its range 0 and up (in 1 hour(s) of the window; taken as reported)",
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE of GPU GPU-1 on node n1 (gpu 0) was 1.5 in the hour from 2026-01-05T01:00:00Z, outside its range 0..1 (in 1 hour(s) of the window; clamped to its range as activity)",
		"DCGM_FI_DEV_GPU_UTIL of GPU GPU-2 on node n1 (gpu 1) was 250 in the hour from 2026-01-05T01:00:00Z, outside its range 0..100 (in 1 hour(s) of the window; clamped to its range as activity)",
		"DCGM_FI_DEV_POWER_USAGE of GPU GPU-2 on node n1 (gpu 1) was -3 in the hour from 2026-01-05T01:00:00Z, outside its range 0 and up (in 1 hour(s) of the window; taken as reported)",
	}
	check := func(path string, r *Report) {
		t.Helper()
		var got []string
		for _, l := range r.Quality.Warnings {
			if strings.Contains(l, "outside its range") {
				got = append(got, strings.TrimSuffix(l, ": a broken exporter, or series of another job that --prometheus-selector should leave out"))
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: out-of-range warnings (-want +got):\n%s", path, diff)
		}
		// One step of activity 1.5 counts as fully active, no more.
		p := r.Pods[podIndex(t, r, "ml/train")]
		if a, want := p.Totals.ActiveGPUSeconds.Value(), (359*0.5+1+360*0.5)*step.Seconds(); math.Abs(a-want) > 1e-6 {
			t.Errorf("%s: ml/train active %g GPU-seconds; want %g, the step above 1 clamped", path, a, want)
		}
	}
	check("raw", raw)
	hourly, err := AccountBuckets(BucketInput{Start: w.Start, End: w.End, Buckets: bucketize(series, w.Start, 2, time.Hour, step), Pricing: Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		t.Fatal(err)
	}
	check("hourly", hourly)
}

// TestOutOfRangeWarningsAreBounded: a fleet of broken exporters gives
// OutOfRangeWarnings warnings and one that counts the rest.
func TestOutOfRangeWarningsAreBounded(t *testing.T) {
	var series []Series
	for i := range OutOfRangeWarnings + 5 {
		series = append(series, makeSeries(FBUsed).gpu(fmt.Sprint(i), fmt.Sprintf("GPU-%d", i)).at(0, -1).obj())
	}
	r := account(t, series...)
	n := 0
	for _, l := range r.Quality.Warnings {
		if strings.Contains(l, "outside its range") {
			n++
		}
	}
	last := r.Quality.Warnings[len(r.Quality.Warnings)-1]
	if n != OutOfRangeWarnings || !strings.HasPrefix(last, "5 more devices' metrics were outside their range") {
		t.Errorf("%d warnings of values outside their range, the last %q; want %d and one that counts 5 more", n, last, OutOfRangeWarnings)
	}
}

// podIndex is the index of the pod "namespace/name" in r.Pods.
func podIndex(t *testing.T, r *Report, key string) int {
	t.Helper()
	for i, p := range r.Pods {
		if p.Namespace+"/"+p.Pod == key {
			return i
		}
	}
	t.Fatalf("no pod %s in the report", key)
	return -1
}
