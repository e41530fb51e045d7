package promql

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// forgedScenario is three hours of two H100s: a busy trainer on one for
// the whole time, an inference pod on the other for two hours.
const forgedScenario = `duration: 3h
nodes:
  - {name: node-a, model: H100-80GB, gpus: 2}
pods:
  - {namespace: train, name: busy, node: node-a, gpu: 0, from: 0s, to: 3h, memoryMiB: 60000, activity: {pattern: constant, level: 0.6}}
  - {namespace: serve, name: chat, node: node-a, gpu: 1, from: 30m, to: 150m, memoryMiB: 20000, activity: {pattern: square, level: 0.8, low: 0.1, on: 5m, off: 10m}}
`

// TestSelectorKeepsForgedSeriesOut backfills a real Prometheus with the
// simulator's series as the job dcgm-exporter, and beside them a second
// job, "forged", that emits the same DCGM series for train/busy's GPU
// under another pod's labels (forged/phantom), with activity above 1 and
// negative VRAM. It reads the window raw, hourly computed from the series,
// and hourly from gpupack's recording rules (recorded once with the
// selector and once without). With --prometheus-selector job="dcgm-exporter"
// every path's pods equal the simulator's truth and nothing warns of
// values out of range; without it the phantom appears, takes half of
// busy's GPU-seconds, and its values are named in the warnings.
func TestSelectorKeepsForgedSeriesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const step = time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sc, err := gpusim.Parse([]byte(forgedScenario), "forged scenario", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	prom := forgedHistory(t, sc, start, step)
	w := usage.Window{Start: start, End: start.Add(sc.Duration.D()), Step: step}
	sel, err := ParseSelector(`job="dcgm-exporter"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Selector{sel, {}} {
		levels, err := RulesYAMLByLevel(step, s)
		if err != nil {
			t.Fatal(err)
		}
		for i, rules := range levels {
			file := filepath.Join(t.TempDir(), "gpupack-rules-"+string(rune('0'+i))+".yaml")
			if err := os.WriteFile(file, rules, 0o644); err != nil {
				t.Fatal(err)
			}
			prom.BackfillRules(file, w.Start, w.End)
		}
	}
	truth := sc.Truth(start, sc.Duration.D())
	for _, path := range []string{"raw", "computed", "recorded"} {
		for _, s := range []Selector{sel, {}} {
			name := path + " with " + s.String()
			if s.IsZero() {
				name = path + " without a selector"
			}
			t.Run(name, func(t *testing.T) {
				r, recorded := forgedReport(t, prom.URL, s, w, path)
				if path == "recorded" && recorded == 0 || path != "recorded" && recorded > 0 {
					t.Fatalf("%d hours read from the rules; want them all on the recorded path and none elsewhere", recorded)
				}
				// A recorded window's totals may miss up to a 5-minute
				// window at each of its ends (see recordedQuery).
				slack := 0.0
				if path == "recorded" {
					slack = 2 * RecordWindow.Seconds()
				}
				checkForged(t, r, truth, s.IsZero(), slack)
			})
		}
	}
}

// forgedReport reads w from the Prometheus at url with selector sel on
// path (raw, computed or recorded), and says how many hours came from
// the recording rules.
func forgedReport(t *testing.T, url string, sel Selector, w usage.Window, path string) (*usage.Report, int) {
	t.Helper()
	src, err := New(url)
	if err != nil {
		t.Fatal(err)
	}
	src.Selector = sel
	pricing := usage.Pricing{Catalogue: gpu.Default()}
	ctx := context.Background()
	if path == "raw" {
		d, err := src.Load(ctx, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := usage.Account(usage.Input{Window: w, Series: d.Series, Pricing: pricing})
		if err != nil {
			t.Fatal(err)
		}
		return r, 0
	}
	if path == "computed" {
		src = src.readingBy(referencePaths{fastest: pathComputed})
	}
	acct, err := usage.NewBucketAccount(w.Start, w.End)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.StreamBuckets(ctx, w, time.Hour, acct.Add); err != nil {
		t.Fatal(err)
	}
	r, err := acct.Report(pricing, nil, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return r, src.BucketProvenance().RecordedHours
}

// checkForged compares r's pods with the truth: equal (GPU-seconds within
// 0.5%, activity within 1%, and slack GPU-seconds more) and nothing out of
// range where the forged series were left out; where they were read
// (forged), the phantom holds half of busy's GPU and the warnings name
// its values.
func checkForged(t *testing.T, r *usage.Report, truth gpusim.Truth, forged bool, slack float64) {
	t.Helper()
	got := map[string]usage.PodUsage{}
	for _, p := range r.Pods {
		got[p.Namespace+"/"+p.Pod] = p
	}
	var outOfRange []string
	for _, l := range r.Quality.Warnings {
		if strings.Contains(l, "outside its range") {
			outOfRange = append(outOfRange, l)
		}
	}
	phantom, seen := got["forged/phantom"]
	if !forged {
		if seen || len(got) != len(truth.Pods) {
			t.Errorf("pods %v; want the truth's %d and no forged/phantom", keys(got), len(truth.Pods))
		}
		if len(outOfRange) > 0 {
			t.Errorf("warnings of values out of range %q; want none, the forged job's were not read", outOfRange)
		}
		for _, pt := range truth.Pods {
			p := got[pt.Namespace+"/"+pt.Pod]
			alloc, active := float64(p.Totals.AllocatedGPUSeconds), p.Totals.ActiveGPUSeconds.Value()
			if !within(alloc, float64(pt.AllocatedGPUSeconds), 0.005, slack) || !within(active, float64(pt.ActiveGPUSeconds), 0.01, slack) {
				t.Errorf("%s/%s: allocated %.0f, active %.0f GPU-seconds; the truth is %.0f and %.0f", pt.Namespace, pt.Pod, alloc, active, pt.AllocatedGPUSeconds, pt.ActiveGPUSeconds)
			}
		}
		return
	}
	busy, want := got["train/busy"], float64(truth.Pods[indexOfPod(truth, "train/busy")].AllocatedGPUSeconds)
	if !seen || !within(float64(phantom.Totals.AllocatedGPUSeconds), want/2, 0.01, slack/2) || !within(float64(busy.Totals.AllocatedGPUSeconds), want/2, 0.01, slack/2) {
		t.Errorf("forged/phantom (read: %v) holds %.0f and train/busy %.0f GPU-seconds; want the forged job to take half of busy's %.0f", seen,
			phantom.Totals.AllocatedGPUSeconds, busy.Totals.AllocatedGPUSeconds, want)
	}
	for _, m := range []string{usage.GREngineActive, usage.FBUsed} {
		if !slicesContainPrefix(outOfRange, m+" of GPU GPU-") {
			t.Errorf("warnings of values out of range %q; want the forged %s named", outOfRange, m)
		}
	}
}

func keys(m map[string]usage.PodUsage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// within says whether got is want to within rel of it and slack more.
func within(got, want, rel, slack float64) bool {
	return math.Abs(got-want) <= rel*math.Max(want, 1)+slack
}

func indexOfPod(tr gpusim.Truth, key string) int {
	for i, p := range tr.Pods {
		if p.Namespace+"/"+p.Pod == key {
			return i
		}
	}
	return -1
}

func slicesContainPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// forgedHistory backfills the scenario's history, scraped every step as
// the job dcgm-exporter, and the forged job's copies of train/busy's
// series, into a new Prometheus and starts it (with the lookback just
// under the step, as testcluster.FleetHistory does for backfilled data).
func forgedHistory(t *testing.T, sc *gpusim.Scenario, start time.Time, step time.Duration) *testcluster.Prometheus {
	t.Helper()
	var sim bytes.Buffer
	if err := sc.WriteOpenMetrics(&sim, start, 0, sc.Duration.D(), step, gpusim.Faults{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "history.om")
	if err := os.WriteFile(file, forge(sim.Bytes()), 0o644); err != nil {
		t.Fatal(err)
	}
	testcluster.Backfill(t, filepath.Join(dir, "data"), file, 0)
	return testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir, Args: []string{"--query.lookback-delta=" + (step - time.Second).String()}})
}

// forge labels every series of the simulator's OpenMetrics text with the
// job that a scrape of dcgm-exporter gives it, and adds, at the end of
// each metric family, the forged job's copy of each train/busy series:
// pod forged/phantom, activity 1.5 and VRAM -100 MiB.
func forge(sim []byte) []byte {
	const real, fake = `job="dcgm-exporter",instance="dcgm-exporter:9400",`, `job="forged",instance="forger:9400",`
	var out, forged bytes.Buffer
	flush := func() {
		out.Write(forged.Bytes())
		forged.Reset()
	}
	lines := bufio.NewScanner(bytes.NewReader(sim))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		l := lines.Text()
		if strings.HasPrefix(l, "#") {
			flush()
			out.WriteString(l + "\n")
			continue
		}
		name, rest, _ := strings.Cut(l, "{")
		out.WriteString(name + "{" + real + rest + "\n")
		if !strings.Contains(rest, `namespace="train",pod="busy"`) {
			continue
		}
		labels, sample, _ := strings.Cut(rest, "} ")
		_, ts, _ := strings.Cut(sample, " ")
		value := map[string]string{usage.GREngineActive: "1.5", usage.FBUsed: "-100"}[name]
		if value == "" {
			value, _, _ = strings.Cut(sample, " ")
		}
		labels = strings.Replace(labels, `namespace="train",pod="busy"`, `namespace="forged",pod="phantom"`, 1)
		forged.WriteString(name + "{" + fake + labels + "} " + value + " " + ts + "\n")
	}
	flush()
	return out.Bytes()
}
