package promql

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// outageScenario is two H100s, each held by one pod throughout at a
// constant activity.
const outageScenario = `duration: 40s
nodes:
  - {name: node-a, model: H100-80GB, gpus: 2}
pods:
  - {namespace: train, name: busy, node: node-a, gpu: 0, from: 0s, to: 40s, memoryMiB: 60000, activity: {pattern: constant, level: 0.6}}
  - {namespace: lab, name: notebook, node: node-a, gpu: 1, from: 0s, to: 40s, memoryMiB: 900, activity: {pattern: constant, level: 0.05}}
`

// The outages of TestOutagesAgainstTruth, in the scenario's time: the
// exporter answers 503 over [exporterDown, exporterUp), and Prometheus
// is stopped at promDown and started again at promUp (plus its start).
const (
	exporterDown, exporterUp = 8 * time.Second, 14 * time.Second
	promDown, promUp         = 22 * time.Second, 26 * time.Second
)

// TestOutagesAgainstTruth runs a real Prometheus with its default
// lookback delta (5 minutes) scraping the GPU simulator every second,
// through two outages shorter than the lookback, and compares each pod's
// figures, raw and hourly, with the simulator's truth, as
// docs/concepts/accounting.md says they are:
//
//   - the exporter stops (answers 503) while Prometheus runs: the first
//     failed scrape writes staleness markers, and each step until it
//     answers again is unsampled: the pods lose those GPU-seconds, and
//     the GPUs count them as unsampled;
//   - Prometheus stops and starts again: no scrape ran, so no staleness
//     marker, and each step of the hole reads the last sample before it:
//     the pods hold their GPUs through it, at their last activity, as
//     the truth says they did (their activity is constant).
func TestOutagesAgainstTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real Prometheus for 40 s of a live scenario")
	}
	sc, err := gpusim.Parse([]byte(outageScenario), "outage scenario", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var start time.Time // the scenario's clock starts at the first scrape
	failed := 0         // scrapes answered 503
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		if start.IsZero() {
			start = time.Now()
		}
		at := time.Since(start)
		down := at >= exporterDown && at < exporterUp
		if down {
			failed++
		}
		mu.Unlock()
		if down {
			http.Error(w, "dcgm-exporter is down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if err := sc.WriteMetrics(w, at); err != nil {
			t.Error(err)
		}
	}))
	defer exporter.Close()
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Config: fmt.Sprintf(
		"global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n  - job_name: dcgm-exporter\n    honor_labels: true\n    static_configs: [{targets: [%q]}]\n",
		exporter.Listener.Addr().String())})
	began := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return start
	}
	sleepUntil := func(at time.Duration) {
		for began().IsZero() || time.Since(began()) < at {
			select {
			case <-t.Context().Done():
				t.Fatal("the scenario did not run")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	sleepUntil(promDown)
	prom.Stop()
	sleepUntil(promUp)
	prom.Restart()
	sleepUntil(sc.Duration.D() + 3*time.Second)

	mu.Lock()
	t0, down := start, failed
	mu.Unlock()
	truth := sc.Truth(t0, sc.Duration.D())
	src, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Each step reads the last sample at or before it: the window's steps
	// from the first whole second after the scenario's start.
	first := t0.Truncate(time.Second).Add(time.Second)
	raw := usage.Window{Start: first, End: first.Add(sc.Duration.D() - time.Second), Step: time.Second}
	d, err := src.Load(context.Background(), raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	rawReport, err := usage.Account(usage.Input{Window: raw, Series: d.Series, Pricing: usage.Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		t.Fatal(err)
	}
	hours := usage.Window{Start: raw.Start.Truncate(time.Hour), End: raw.End.Truncate(time.Hour).Add(time.Hour), Step: time.Second}
	acct, err := usage.NewBucketAccount(hours.Start, hours.End)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.StreamBuckets(context.Background(), hours, time.Hour, acct.Add); err != nil {
		t.Fatal(err)
	}
	hourly, err := acct.Report(usage.Pricing{Catalogue: gpu.Default()}, nil, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scrapes failed; the scenario started at %s", down, t0.Format(time.RFC3339Nano))
	if down < 4 {
		t.Fatalf("%d scrapes failed while the exporter was down for %s; want about one a second", down, exporterUp-exporterDown)
	}
	for name, r := range map[string]*usage.Report{"raw": rawReport, "hourly": hourly} {
		checkOutages(t, name, r, truth, raw.End.Sub(raw.Start), down)
	}
	unsampled := float64(rawReport.Cluster.UnsampledGPUSeconds)
	if math.Abs(unsampled-2*float64(down)) > 2*3 {
		t.Errorf("raw: %.0f GPU-seconds unsampled; want the exporter's outage on both GPUs, 2 x %d s, and not Prometheus'", unsampled, down)
	}
}

// checkOutages compares each pod of r with the truth over the scenario:
// its GPU-seconds are the truth's over the window (span of it) less the
// exporter's outage (down failed scrapes, a second each), within 3 s,
// and its active ones its constant activity times them, within 1%.
func checkOutages(t *testing.T, path string, r *usage.Report, truth gpusim.Truth, span time.Duration, down int) {
	t.Helper()
	got := map[string]usage.PodUsage{}
	for _, p := range r.Pods {
		got[p.Key()] = p
	}
	level := map[string]float64{"train/busy": 0.6, "lab/notebook": 0.05}
	for _, pt := range truth.Pods {
		key := pt.Namespace + "/" + pt.Pod
		p, ok := got[key]
		if !ok {
			t.Errorf("%s: no %s in the report", path, key)
			continue
		}
		// The truth over the window: the pods hold a GPU from the
		// scenario's start to its end, the window a second less.
		want := math.Min(float64(pt.AllocatedGPUSeconds), span.Seconds()) - float64(down)
		alloc := float64(p.Totals.AllocatedGPUSeconds)
		if math.Abs(alloc-want) > 3 {
			t.Errorf("%s: %s held %.0f GPU-seconds; want the truth's %.0f over the window less the exporter's outage of %d s: %.0f (Prometheus' own outage counts as held)",
				path, key, alloc, math.Min(float64(pt.AllocatedGPUSeconds), span.Seconds()), down, want)
		}
		if a := p.Totals.ActiveGPUSeconds.Value(); math.Abs(a-level[key]*alloc) > 0.01*alloc {
			t.Errorf("%s: %s active %.1f GPU-seconds; want %.2f of its %.0f held", path, key, a, level[key], alloc)
		}
	}
}
