package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/reclaim"
)

// testReclaims is a reclaim controller's status with every part filled,
// its names made of text: two candidates (one approved in the ConfigMap,
// one awaiting), an owner left alone, a round's outcome, and a ledger of
// a measured action and a refused one.
func testReclaims(text string) *app.ReclaimStatus {
	at := time.Date(2026, 12, 5, 22, 0, 0, 0, time.UTC)
	cost, freedCost := 48.0, 12.5
	last := at.Add(-30 * time.Hour)
	cand := func(id, name string, gpus float64) reclaim.Candidate {
		return reclaim.Candidate{ID: id, Owner: reclaim.Ref{Kind: reclaim.Deployment, Namespace: "ml", Name: name},
			Class: reclaim.ClassInference, Action: reclaim.ScaleToZero, Restorable: true, State: reclaim.StateDue,
			Pods:     []reclaim.PodRef{{Namespace: "ml", Name: name + "-0", GPUs: gpus}},
			Evidence: reclaim.Evidence{IdleFor: reclaim.Duration(6 * time.Hour), IdleGPUHours: 30 * gpus, CostPerDay: &cost, LastActive: &last}}
	}
	set := &reclaim.Set{Hash: "feedc0de00112233", At: at, GPUs: 3, Candidates: []reclaim.Candidate{cand("aaaaaaaaaaaa", "owner-"+text, 2), cand("bbbbbbbbbbbb", "idle-b", 1)},
		Skipped: []reclaim.Skip{{Owner: reclaim.Ref{Kind: reclaim.Job, Namespace: "ml", Name: "busy"}, Reason: reclaim.SkipActive, Detail: "skip-" + text}}}
	s := app.NewReclaimStatus(set)
	s.Approvals = map[string]string{"aaaaaaaaaaaa": "alice"}
	rec := reclaim.NewRecord(set.Candidates[0], "alice", at.Add(-48*time.Hour), nil)
	rec.Outcome = reclaim.OutcomeReclaimed
	refused := reclaim.NewRecord(set.Candidates[1], "bob", at, nil)
	refused.Outcome, refused.Reason = reclaim.OutcomeRefused, "re-check: it woke up"
	s.Outcome.Records = []reclaim.Record{refused}
	s.Outcome.Waiting = []app.Waiting{{ID: "cccccccccccc", Owner: "Deployment ml/late", Reason: "its notice runs until tomorrow"}}
	s.Ledger = []app.LedgerEntry{
		{Record: rec, Measured: &reclaim.Measured{Hours: 48, PredictedGPUHrs: 96, FreedGPUHours: 90, ReusedGPUHours: 60, UnusedGPUHours: 30, FreedCost: &freedCost}},
		{Record: refused},
	}
	s.Totals = app.LedgerTotals{Records: 2, ByOutcome: map[string]int{reclaim.OutcomeReclaimed: 1, reclaim.OutcomeRefused: 1}, Measured: 1,
		PredictedGPUHrs: 96, FreedGPUHours: 90, ReusedGPUHours: 60, UnusedGPUHours: 30, FreedCost: 12.5, CostKnown: 1}
	return &s
}

// TestReclaims: the reclaim controller's status is on the page (the
// candidates with their approval, the owners left alone, the round, the
// ledger with predicted against measured and its totals) and at
// /api/v1/reclaims, which is 404 without a controller.
func TestReclaims(t *testing.T) {
	v := testView("x")
	if resp := get(t, Handler(Options{Provider: &provider{v: v}}), http.MethodGet, "/api/v1/reclaims"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/api/v1/reclaims without a controller: %d, want 404", resp.StatusCode)
	}
	if page := body(t, get(t, Handler(Options{Provider: &provider{v: v}}), http.MethodGet, "/")); strings.Contains(page, `id="reclaim"`) {
		t.Error("the page has a reclaim section without a controller")
	}
	st := testReclaims("x")
	h := Handler(Options{Provider: &provider{v: v}, Reclaims: func() *app.ReclaimStatus { return st }})
	page := body(t, get(t, h, http.MethodGet, "/"))
	for _, want := range []string{
		`id="reclaim-hash">feedc0de00112233<`, "Deployment ml/owner-x", "approved by alice",
		"awaiting approval: add the key bbbbbbbbbbbb to the approvals ConfigMap", "scale-to-zero", "48.00", "2026-12-04 16:00 UTC",
		"left alone: 1 owners", "skip-x", "refused: Deployment ml/idle-b (scale-to-zero, approved by bob): re-check: it woke up",
		"waiting: Deployment ml/late", `class="unmeasured">nothing acted on<`,
		"90.00 GPU-hours freed</b> of 96.00 predicted, 60.00 reused by other pods, 30.00 unused; 12.50 freed (1 priced)",
		`<td data-v="96">96.00</td><td data-v="90">90.00</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// reclaim.Duration is written, never read back: decode what is checked.
	var got struct {
		Set struct {
			Candidates []struct{ ID string }
		}
		Ledger []struct {
			ID       string
			Measured *struct{ FreedGPUHours float64 }
		}
		Totals app.LedgerTotals
	}
	if err := json.Unmarshal([]byte(body(t, get(t, h, http.MethodGet, "/api/v1/reclaims"))), &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(st.Totals, got.Totals); d != "" || len(got.Set.Candidates) != 2 || len(got.Ledger) != 2 || got.Ledger[0].Measured.FreedGPUHours != 90 {
		t.Errorf("/api/v1/reclaims: totals (-want +got):\n%s\ncandidates %d, ledger %+v", d, len(got.Set.Candidates), got.Ledger)
	}
}
