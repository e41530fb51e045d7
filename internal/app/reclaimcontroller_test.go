package app

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/reclaim"
)

// countingReclaim is memReclaim counting its ledger reads.
type countingReclaim struct {
	*memReclaim
	reads int
}

func (m *countingReclaim) Records(ctx context.Context) ([]reclaim.Record, error) {
	m.reads++
	return m.memReclaim.Records(ctx)
}

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestReclaimControllerRound: a round notifies the new candidates, acts
// on the due ones that the approvals name (refusing one the re-check
// finds busy), leaves the unapproved waiting, counts each record by kind
// and outcome, and never tries a failed candidate again.
func TestReclaimControllerRound(t *testing.T) {
	ctx := context.Background()
	a := newMemReclaim()
	a.failOn = "broken"
	clk := &clock{t: time.Date(2026, 12, 5, 22, 0, 0, 0, time.UTC)}
	set := &reclaim.Set{Hash: "h1", At: clk.t, Candidates: []reclaim.Candidate{
		candidate("a-new", "new", reclaim.ScaleToZero, reclaim.StateToNotify, false),
		candidate("b-unapproved", "unapproved", reclaim.ScaleToZero, reclaim.StateDue, false),
		candidate("c-approved", "approved", reclaim.ScaleToZero, reclaim.StateDue, false),
		candidate("d-broken", "broken", reclaim.ScaleToZero, reclaim.StateDue, false),
		candidate("e-woke", "woke", reclaim.ScaleToZero, reclaim.StateDue, false),
	}}
	counted := map[string]int{}
	c := &ReclaimController{
		Detect: func(context.Context) (*Detection, error) {
			return &Detection{Set: set, Policy: reclaim.DefaultPolicy()}, nil
		},
		Approvals: func(context.Context) (map[string]string, error) {
			return map[string]string{"c-approved": "alice", "d-broken": "bob", "e-woke": "carol"}, nil
		},
		Actuator: a,
		Options: ReclaimOptions{Now: clk.now, Recheck: func(_ context.Context, c reclaim.Candidate) error {
			if c.ID == "e-woke" {
				return errors.New("re-check: ml/woke-0 is 40.0% active")
			}
			return nil
		}},
		Interval: time.Minute, LedgerEvery: 5 * time.Minute,
		Observe: func(kind reclaim.Kind, outcome string) { counted[string(kind)+" "+outcome]++ },
	}
	c.Once(ctx)
	st := c.Status()
	if d := cmp.Diff([]string{"a-new"}, a.notified); d != "" {
		t.Errorf("notified (-want +got):\n%s", d)
	}
	outcomes := map[string]string{}
	for _, r := range st.Outcome.Records {
		outcomes[r.ID] = r.Outcome + " by " + r.ApprovedBy
	}
	want := map[string]string{"c-approved": "reclaimed by alice", "d-broken": "failed by bob", "e-woke": "refused by carol"}
	if d := cmp.Diff(want, outcomes); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
	if len(st.Outcome.Waiting) != 1 || st.Outcome.Waiting[0].ID != "b-unapproved" || !strings.Contains(st.Outcome.Waiting[0].Reason, "awaiting approval") {
		t.Errorf("waiting: %+v, want b-unapproved awaiting approval", st.Outcome.Waiting)
	}
	if !strings.Contains(st.Error, "refused by the apiserver") {
		t.Errorf("status error %q, want the failed pause", st.Error)
	}
	if d := cmp.Diff(map[string]int{"Deployment reclaimed": 1, "Deployment failed": 1, "Deployment refused": 1}, counted); d != "" {
		t.Errorf("observed (-want +got):\n%s", d)
	}
	if len(st.Ledger) != 3 || st.Totals.ByOutcome[reclaim.OutcomeReclaimed] != 1 {
		t.Errorf("ledger: %d entries, totals %+v; want the round's 3 records, 1 reclaimed", len(st.Ledger), st.Totals)
	}

	clk.t = clk.t.Add(time.Minute)
	c.Once(ctx)
	st = c.Status()
	if d := cmp.Diff([]string{"Deployment ml/approved", "Deployment ml/approved"}, a.paused); d != "" {
		t.Errorf("paused over two rounds (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"Deployment reclaimed": 2, "Deployment failed": 1, "Deployment refused": 2}, counted); d != "" {
		t.Errorf("observed over two rounds (-want +got): d-broken's failure must not be tried again\n%s", d)
	}
	held := false
	for _, w := range st.Outcome.Waiting {
		held = held || w.ID == "d-broken" && strings.Contains(w.Reason, "failed in this process")
	}
	if !held {
		t.Errorf("waiting %+v: want d-broken held back as failed", st.Outcome.Waiting)
	}
}

// TestReclaimControllerLedgerEvery: the ledger is read at the first round
// and then at most once per LedgerEvery, however often the rounds come.
func TestReclaimControllerLedgerEvery(t *testing.T) {
	a := &countingReclaim{memReclaim: newMemReclaim()}
	clk := &clock{t: time.Date(2026, 12, 5, 22, 0, 0, 0, time.UTC)}
	c := &ReclaimController{
		Detect: func(context.Context) (*Detection, error) {
			return &Detection{Set: &reclaim.Set{At: clk.t}, Policy: reclaim.DefaultPolicy()}, nil
		},
		Approvals:   func(context.Context) (map[string]string, error) { return nil, nil },
		Actuator:    a,
		Options:     ReclaimOptions{Now: clk.now},
		Interval:    time.Minute,
		LedgerEvery: 5 * time.Minute,
	}
	var reads []int
	for range 7 {
		c.Once(context.Background())
		reads = append(reads, a.reads)
		clk.t = clk.t.Add(time.Minute)
	}
	if d := cmp.Diff([]int{1, 1, 1, 1, 1, 2, 2}, reads); d != "" {
		t.Errorf("ledger reads after each of 7 one-minute rounds (-want +got):\n%s", d)
	}
}

// TestReclaimControllerCounts: restores read in the ledger are counted
// once each, and only those since the controller started; the freed
// GPU-hours count only their growth, so that a record measured less (or
// not at all) in a later read never takes the counter down.
func TestReclaimControllerCounts(t *testing.T) {
	start := time.Date(2026, 12, 5, 22, 0, 0, 0, time.UTC)
	before, after := start.Add(-time.Hour), start.Add(time.Hour)
	entry := func(id, outcome string, restored *time.Time, freed *float64) LedgerEntry {
		e := LedgerEntry{Record: reclaim.Record{ID: id, Owner: reclaim.Ref{Kind: reclaim.Notebook}, Outcome: outcome, Restored: restored}}
		if freed != nil {
			e.Measured = &reclaim.Measured{FreedGPUHours: *freed}
		}
		return e
	}
	f := func(v float64) *float64 { return &v }
	counted := map[string]int{}
	var freed []float64
	c := &ReclaimController{Options: ReclaimOptions{Now: func() time.Time { return start }},
		Observe:      func(kind reclaim.Kind, outcome string) { counted[string(kind)+" "+outcome]++ },
		ObserveFreed: func(h float64) { freed = append(freed, h) }}
	c.init()
	reads := [][]LedgerEntry{
		{entry("old", reclaim.OutcomeRestored, &before, f(3)), entry("new", reclaim.OutcomeRestored, &after, f(2)), entry("open", reclaim.OutcomeReclaimed, nil, f(1))},
		{entry("old", reclaim.OutcomeRestored, &before, nil), entry("new", reclaim.OutcomeRestored, &after, f(2)), entry("open", reclaim.OutcomeReclaimed, nil, f(1.5))},
		{entry("open", reclaim.OutcomeReclaimed, nil, f(0.5))},
	}
	for _, r := range reads {
		c.countLedger(r)
	}
	if d := cmp.Diff(map[string]int{"Notebook restored": 1}, counted); d != "" {
		t.Errorf("restores counted (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]float64{6, 0.5}, freed); d != "" {
		t.Errorf("freed GPU-hours added per read (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]float64{"open": 1.5}, c.freed); d != "" {
		t.Errorf("what is remembered once old and new left the ledger (-want +got):\n%s", d)
	}
}

// TestReclaimStatusJSONLists: the status of a round with nothing to do,
// and the controller's before its first round, show their lists as [],
// never null.
func TestReclaimStatusJSONLists(t *testing.T) {
	a := newMemReclaim()
	c := &ReclaimController{
		Detect: func(context.Context) (*Detection, error) {
			return &Detection{Set: &reclaim.Set{}, Policy: reclaim.DefaultPolicy()}, nil
		},
		Approvals: func(context.Context) (map[string]string, error) { return nil, nil },
		Actuator:  a, Interval: time.Minute,
	}
	for _, when := range []string{"before the first round", "after a round"} {
		b, err := json.Marshal(c.Status())
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{`"ledger":[]`, `"notified":[]`, `"records":[]`, `"waiting":[]`, `"approvals":{}`}
		if when == "after a round" {
			keys = append(keys, `"candidates":[]`, `"skipped":[]`)
		}
		for _, key := range keys {
			if !strings.Contains(string(b), key) {
				t.Errorf("%s: %s lacks %s", when, b, key)
			}
		}
		c.Once(context.Background())
	}
}

// TestReclaimControllerDetectError: a failed detection keeps the last
// set and says why.
func TestReclaimControllerDetectError(t *testing.T) {
	fail := false
	set := &reclaim.Set{Hash: "kept", Candidates: []reclaim.Candidate{candidate("x", "x", reclaim.ScaleToZero, reclaim.StateDue, false)}}
	c := &ReclaimController{
		Detect: func(context.Context) (*Detection, error) {
			if fail {
				return nil, errors.New("Prometheus: connection refused")
			}
			return &Detection{Set: set, Policy: reclaim.DefaultPolicy()}, nil
		},
		Approvals: func(context.Context) (map[string]string, error) { return nil, nil },
		Actuator:  newMemReclaim(), Interval: time.Minute,
	}
	c.Once(context.Background())
	fail = true
	c.Once(context.Background())
	st := c.Status()
	if st.Set == nil || st.Set.Hash != "kept" || !strings.Contains(st.Error, "connection refused") {
		t.Errorf("after a failed detection: set %+v, error %q; want the last set and the error", st.Set, st.Error)
	}
}
