package serve

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	clireclaim "github.com/gpupack/gpupack/internal/cli/reclaim"
	"github.com/gpupack/gpupack/internal/serve"
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
