package e2e

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/reportdiff"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// TestHourlyAgreesWithRaw backfills two days of a 16-GPU fleet (pods
// coming and going mid-hour, time-slicing, a MIG GPU with an uninstantiated
// slice) with NaN samples, a gap and an energy counter reset into a real
// Prometheus, then accounts the window twice: from the raw samples
// (promql.Load, usage.Account) and from hourly buckets that PromQL
// computed (LoadBuckets, usage.AccountBuckets). Both must agree within 1%
// per device and pod, and both must match the fleet's ground truth for the
// pods that the faults leave alone.
func TestHourlyAgreesWithRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet, err := gpusim.Fleet(16, 2, 7, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	const (
		nanDevice   = "node-000/1/GPU-00000001-0000-4000-8000-000000000002"
		gapDevice   = "node-001/2/GPU-00000002-0000-4000-8000-000000000003"
		resetDevice = "node-001/5/GPU-00000002-0000-4000-8000-000000000006"
	)
	faults := gpusim.Faults{
		NaNEvery: 7, NaNDevices: []string{nanDevice},
		Gaps:   []gpusim.Gap{{Device: gapDevice, From: 30*time.Hour + 20*time.Minute, To: 30*time.Hour + 50*time.Minute}},
		Resets: []gpusim.Reset{{Device: resetDevice, At: 20*time.Hour + 13*time.Minute}},
	}
	prom := testcluster.FleetHistory(t, fleet, start, scrape, faults)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, err := promql.New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	w := usage.Window{Start: start, End: start.Add(fleet.Duration.D()), Step: scrape}
	pricing := usage.Pricing{Catalogue: gpu.Default()}
	began := time.Now()
	data, err := src.Load(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := usage.Account(usage.Input{Window: w, Series: data.Series, Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("raw path: %s", time.Since(began))
	began = time.Now()
	buckets, err := src.LoadBuckets(ctx, w, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hourly, err := usage.AccountBuckets(usage.BucketInput{Start: w.Start, End: w.End, Buckets: buckets, Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hourly path: %s", time.Since(began))
	t.Logf("%d pods, %d devices, %d buckets, %d raw series", len(raw.Pods), len(raw.Devices), len(buckets), len(data.Series))
	for _, d := range reportdiff.Disagreements(raw, hourly, 0.01) {
		t.Error("hourly vs raw: " + d)
	}
	q, rq := hourly.Quality, raw.Quality
	if q.NaNSamples != rq.NaNSamples || q.NaNSamples == 0 || q.CounterResets != rq.CounterResets || q.CounterResets == 0 || q.Samples != rq.Samples {
		t.Errorf("hourly quality: %d samples, %d NaN, %d resets; raw %d, %d, %d (the history has NaNs and a reset)", q.Samples, q.NaNSamples, q.CounterResets, rq.Samples, rq.NaNSamples, rq.CounterResets)
	}
	if rq.Gaps == 0 || q.Gaps == 0 {
		t.Errorf("gaps: hourly %d, raw %d; the history has one", q.Gaps, rq.Gaps)
	}
	var uninstantiated bool
	for _, d := range hourly.Devices {
		uninstantiated = uninstantiated || d.Uninstantiated && d.UnallocatedGPUSeconds > 0
	}
	if !uninstantiated {
		t.Error("no uninstantiated MIG slice accounted; the fleet's MIG GPU leaves one")
	}

	// Ground truth, for the pods whose devices had every sample and that
	// held theirs alone: a time-sliced pod's truth counts its own activity,
	// the measurement the device's (DCGM cannot tell the pods apart).
	truth := fleet.Truth(start, fleet.Duration.D())
	faulty := map[string]bool{nanDevice: true, gapDevice: true}
	shared := map[string]bool{}
	for i, p := range fleet.Pods {
		for _, q := range fleet.Pods[i+1:] {
			same := p.Node == q.Node && p.GPU == q.GPU && (p.Slice == nil) == (q.Slice == nil) && (p.Slice == nil || *p.Slice == *q.Slice)
			if same && p.From < q.To && q.From < p.To {
				shared[p.Namespace+"/"+p.Name], shared[q.Namespace+"/"+q.Name] = true, true
			}
		}
	}
	checked := 0
	for _, pt := range truth.Pods {
		p, ok := hourly.Pod(pt.Namespace, pt.Pod)
		if !ok {
			t.Errorf("pod %s/%s held a GPU but is not in the hourly report", pt.Namespace, pt.Pod)
			continue
		}
		if faulty[p.Devices[0]] || shared[p.Key()] {
			continue
		}
		checked++
		for _, r := range []*usage.Report{raw, hourly} {
			p, _ := r.Pod(pt.Namespace, pt.Pod)
			if !close(float64(p.AllocatedGPUSeconds), float64(pt.AllocatedGPUSeconds)) || !p.ActiveGPUSeconds.Known() || !close(p.ActiveGPUSeconds.Value(), float64(pt.ActiveGPUSeconds)) {
				t.Errorf("pod %s: allocated %v active %+v GPU-seconds; truth %v, %v", p.Key(), p.AllocatedGPUSeconds, p.ActiveGPUSeconds, pt.AllocatedGPUSeconds, pt.ActiveGPUSeconds)
			}
		}
	}
	if checked < len(truth.Pods)/2 {
		t.Errorf("only %d of %d pods checked against the truth", checked, len(truth.Pods))
	}
}

func close(got, want float64) bool { return math.Abs(got-want) <= 0.01*math.Abs(want)+1e-6 }
