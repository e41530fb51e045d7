package promql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// TestHealthAgreesWithRaw backfills a day of an 8-GPU fleet whose GPU 1
// reported XID 79 and GPU 3 XID 13 into a real Prometheus, and checks that
// the hourly path's LoadHealth finds the XIDs the raw path's Account does,
// on those two GPUs only.
func TestHealthAgreesWithRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet, err := gpusim.Fleet(8, 1, 7, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	fleet.Nodes[0].XIDs = map[string]int{"1": 79, "3": 13}
	prom := testcluster.FleetHistory(t, fleet, start, scrape, gpusim.Faults{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	w := usage.Window{Start: start, End: start.Add(fleet.Duration.D()), Step: scrape}
	hourly, err := s.LoadHealth(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Load(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := usage.Account(usage.Input{Window: w, Series: d.Series, Pricing: usage.Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Health) != 2 || r.Health[0].GPU != "1" || r.Health[1].GPU != "3" {
		t.Errorf("raw health %+v; want GPU 1 (XID 79) and GPU 3 (XID 13) of %s", r.Health, fleet.Nodes[0].Name)
	}
	if diff := cmp.Diff(r.Health, hourly); diff != "" {
		t.Errorf("hourly health differs from raw (-raw +hourly):\n%s", diff)
	}

	// With gpupack's rules recorded over the history, a window that starts
	// two hours into it (the rules' XID maxima cover its hour of margin)
	// is found from the recorded maxima, and finds what the raw gauge does;
	// it ends half an hour after the history, so that the raw gauge's last
	// minutes, which the find also reads, hold nothing. The whole day,
	// whose margin precedes the rules, still reads the raw gauge.
	recordLevels(t, prom, scrape, start, w.End.Add(time.Hour))
	later := usage.Window{Start: start.Add(2 * time.Hour), End: w.End.Add(30 * time.Minute), Step: scrape}
	for _, tc := range []struct {
		w        usage.Window
		recorded bool
	}{{later, true}, {w, false}} {
		find, err := s.xidFind(ctx, tc.w, tc.w.End.Add(-time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(find, recordedXID) != tc.recorded {
			t.Errorf("window from %s: first query %s; want it to read %s: %t", tc.w.Start.Format(time.TimeOnly), find, recordedXID, tc.recorded)
		}
	}
	fromRules, err := s.LoadHealth(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	rawSource, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	rawSource = rawSource.readingBy(referencePaths{fastest: pathComputed})
	fromRaw, err := rawSource.LoadHealth(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromRaw) != 2 {
		t.Errorf("raw gauge's health from 02:00 to 00:30 %+v; want GPUs 1 and 3", fromRaw)
	}
	if diff := cmp.Diff(fromRaw, fromRules); diff != "" {
		t.Errorf("health found from the recorded XID maxima differs from the raw gauge's (-raw +recorded):\n%s", diff)
	}
}

// TestXIDSelectors checks the matchers LoadHealth's subquery runs with: the
// GPUs found by UUID (or uuid), quoted, in chunks, and every series where a
// GPU has neither label.
func TestXIDSelectors(t *testing.T) {
	gpuWith := func(labels ...string) *model.Sample {
		m := model.Metric{"Hostname": "n1"}
		for i := 0; i < len(labels); i += 2 {
			m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
		}
		return &model.Sample{Metric: m}
	}
	if got := xidSelectors(nil); len(got) != 0 {
		t.Errorf("no GPU found: selectors %q, want none (no subquery)", got)
	}
	got := xidSelectors(model.Vector{gpuWith("UUID", "GPU-b"), gpuWith("UUID", "GPU-a"), gpuWith("uuid", "GPU-(c)"), gpuWith("UUID", "GPU-a")})
	want := []string{`UUID=~"GPU-a|GPU-b"`, `uuid=~"GPU-\\(c\\)"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selectors (-want +got):\n%s", diff)
	}
	if got := xidSelectors(model.Vector{gpuWith("UUID", "GPU-a"), gpuWith("gpu", "0")}); !cmp.Equal(got, []string{""}) {
		t.Errorf("a GPU without a UUID: selectors %q, want one that selects every series", got)
	}
	var many model.Vector
	for i := range 2*xidSelectorChunk + 1 {
		many = append(many, gpuWith("UUID", fmt.Sprintf("GPU-%04d", i)))
	}
	got = xidSelectors(many)
	if len(got) != 3 || strings.Count(got[0], "|") != xidSelectorChunk-1 || strings.Count(got[2], "|") != 0 {
		t.Errorf("%d GPUs: %d selectors, want 3 chunks of at most %d", len(many), len(got), xidSelectorChunk)
	}
}
