package serve

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	clireclaim "github.com/gpupack/gpupack/internal/cli/reclaim"
	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/reclaim"
)

// TestDemoReclaimsAreTheCLIs: serve --demo's /api/v1/reclaims holds, as
// its set, what gpupack reclaim --format json prints for the demo, and an
// empty ledger.
func TestDemoReclaimsAreTheCLIs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := newDemoProvider(ctx)
	deadline := time.Now().Add(2 * time.Minute)
	for d.Reclaims().Set == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the demo's reclaim dry run was not built within 2 minutes: %v", d.Ready())
		}
		time.Sleep(50 * time.Millisecond)
	}
	h := serve.Handler(serve.Options{Provider: d, Reclaims: d.Reclaims})
	var got struct {
		Set    json.RawMessage `json:"set"`
		Ledger []any           `json:"ledger"`
	}
	if err := json.Unmarshal(fetch(t, h, "/api/v1/reclaims"), &got); err != nil {
		t.Fatal(err)
	}
	var want, have any
	if err := json.Unmarshal(cliJSON(t, clireclaim.NewCommand(ctx), "--format", "json"), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got.Set, &have); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, have); d != "" {
		t.Errorf("/api/v1/reclaims' set differs from gpupack reclaim --format json (-cli +api):\n%s", d)
	}
	if len(want.(map[string]any)["candidates"].([]any)) == 0 {
		t.Error("the demo has no reclaim candidates")
	}
	if got.Ledger == nil || len(got.Ledger) != 0 {
		t.Errorf("ledger %v, want [] (the demo acts on nothing)", got.Ledger)
	}
}

// TestReclaimMetrics: every kind and outcome of gpupack_reclaims_total
// reads 0 before its first (so that increase() sees the first failure),
// each observation counts once, and the freed GPU-hours add up.
func TestReclaimMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	observe, freed, err := reclaimMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	observe(reclaim.Notebook, reclaim.OutcomeFailed)
	observe(reclaim.Deployment, reclaim.OutcomeReclaimed)
	observe(reclaim.Deployment, reclaim.OutcomeReclaimed)
	freed(1.5)
	freed(0.25)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"gpupack_reclaimed_gpu_hours_total": 1.75}
	for _, k := range reclaimKinds {
		for _, o := range reclaimOutcomes {
			want["gpupack_reclaims_total kind="+string(k)+" outcome="+o] = 0
		}
	}
	want["gpupack_reclaims_total kind=Notebook outcome=failed"] = 1
	want["gpupack_reclaims_total kind=Deployment outcome=reclaimed"] = 2
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("/metrics (-want +got):\n%s", d)
	}
}
