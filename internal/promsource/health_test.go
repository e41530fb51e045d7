package promsource

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/fakedcgm"
	"github.com/gpupack/gpupack/internal/testcluster"
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
	fleet, err := fakedcgm.Fleet(8, 1, 7, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	fleet.Nodes[0].XIDs = map[string]int{"1": 79, "3": 13}
	prom := testcluster.FleetHistory(t, fleet, start, scrape, fakedcgm.Faults{})
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
}
