package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/reclaim"
	"github.com/gpupack/gpupack/usage"
)

// memReclaim is an in-memory reclaim.Actuator: it records what it is told
// and keeps the ledger.
type memReclaim struct {
	notified []string
	paused   []string
	restored map[string]*int32
	ledger   map[string]reclaim.Record
	order    []string
	failOn   string
}

func newMemReclaim() *memReclaim {
	return &memReclaim{ledger: map[string]reclaim.Record{}, restored: map[string]*int32{}}
}

func (m *memReclaim) Notify(_ context.Context, c reclaim.Candidate, _ reclaim.Notice) error {
	m.notified = append(m.notified, c.ID)
	return nil
}

func (m *memReclaim) Pause(_ context.Context, c reclaim.Candidate, rec *reclaim.Record) error {
	if c.Owner.Name == m.failOn {
		return errors.New("refused by the apiserver")
	}
	m.paused = append(m.paused, c.Owner.String())
	rec.Before.Replicas = c.Replicas
	return nil
}

func (m *memReclaim) Restore(_ context.Context, rec reclaim.Record, cooldown *int32) error {
	m.restored[rec.ID] = cooldown
	return nil
}

func (m *memReclaim) Records(context.Context) ([]reclaim.Record, error) {
	var out []reclaim.Record
	for _, id := range m.order {
		out = append(out, m.ledger[id])
	}
	return out, nil
}

func (m *memReclaim) Save(_ context.Context, rec reclaim.Record) error {
	if _, ok := m.ledger[rec.ID]; !ok {
		m.order = append(m.order, rec.ID)
	}
	m.ledger[rec.ID] = rec
	return nil
}

func candidate(id, name string, action reclaim.Action, state string, auto bool) reclaim.Candidate {
	one := int32(1)
	return reclaim.Candidate{ID: id, Owner: reclaim.Ref{Kind: reclaim.Deployment, Namespace: "ml", Name: name}, Class: reclaim.ClassInference,
		Action: action, Restorable: action != reclaim.Evict, Replicas: &one, State: state, AutoApproved: auto,
		Pods: []reclaim.PodRef{{Namespace: "ml", Name: name + "-0", GPUs: 1}}}
}

func detection(cands ...reclaim.Candidate) *Detection {
	return &Detection{Set: &reclaim.Set{Candidates: cands}, Policy: reclaim.DefaultPolicy(), Report: &usage.Report{}}
}

func TestReclaimRun(t *testing.T) {
	at := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	cases := map[string]struct {
		d         *Detection
		o         ReclaimOptions
		notified  int
		outcomes  map[string]string
		waiting   []string
		wantError bool
	}{
		"dry of approval, nothing acts": {
			d: detection(candidate("a", "chat", reclaim.ScaleToZero, reclaim.StateDue, false)),
			o: ReclaimOptions{}, waiting: []string{"a: awaiting approval"},
		},
		"the set's approval acts on due candidates only": {
			d: detection(candidate("a", "chat", reclaim.ScaleToZero, reclaim.StateDue, false), candidate("b", "nb", reclaim.StopNotebook, reclaim.StateNoticed, false),
				candidate("c", "new", reclaim.ScaleToZero, reclaim.StateToNotify, false)),
			o: ReclaimOptions{ApprovedBy: "alice"}, outcomes: map[string]string{"a": reclaim.OutcomeReclaimed},
			waiting: []string{"b: its notice runs", "c: not notified yet"},
		},
		"notify tells the new ones": {
			d: detection(candidate("c", "new", reclaim.ScaleToZero, reclaim.StateToNotify, false)),
			o: ReclaimOptions{Notify: true}, notified: 1,
		},
		"policy approves, never an eviction": {
			d: detection(candidate("a", "chat", reclaim.ScaleToZero, reclaim.StateDue, true), candidate("e", "dev", reclaim.Evict, reclaim.StateDue, true)),
			o: ReclaimOptions{}, outcomes: map[string]string{"a": reclaim.OutcomeReclaimed}, waiting: []string{"e: awaiting approval"},
		},
		"an approval by ID": {
			d: detection(candidate("e", "dev", reclaim.Evict, reclaim.StateDue, false)),
			o: ReclaimOptions{Approvals: map[string]string{"e": "bob"}}, outcomes: map[string]string{"e": reclaim.OutcomeReclaimed},
		},
		"the re-check refuses one that woke up": {
			d:        detection(candidate("a", "chat", reclaim.ScaleToZero, reclaim.StateDue, false)),
			o:        ReclaimOptions{ApprovedBy: "alice", Recheck: func(context.Context, reclaim.Candidate) error { return errors.New("it woke up") }},
			outcomes: map[string]string{"a": reclaim.OutcomeRefused},
		},
		"a failed pause is recorded and reported": {
			d: detection(candidate("a", "broken", reclaim.ScaleToZero, reclaim.StateDue, false)),
			o: ReclaimOptions{ApprovedBy: "alice"}, outcomes: map[string]string{"a": reclaim.OutcomeFailed}, wantError: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMemReclaim()
			m.failOn = "broken"
			tc.o.Now = now
			out, err := Reclaim(context.Background(), tc.d, m, tc.o)
			if (err != nil) != tc.wantError {
				t.Fatalf("error %v, want one: %t", err, tc.wantError)
			}
			got := map[string]string{}
			for _, r := range out.Records {
				got[r.ID] = r.Outcome
				if m.ledger[r.ID].Outcome != r.Outcome {
					t.Errorf("%s: the ledger has %q, the run %q", r.ID, m.ledger[r.ID].Outcome, r.Outcome)
				}
			}
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tc.outcomes, got); diff != "" {
				t.Errorf("outcomes (-want +got)\n%s", diff)
			}
			var waiting []string
			for _, w := range out.Waiting {
				waiting = append(waiting, w.ID+": "+w.Reason)
			}
			if len(waiting) != len(tc.waiting) {
				t.Fatalf("waiting %v, want %v", waiting, tc.waiting)
			}
			for i, w := range tc.waiting {
				if !strings.HasPrefix(waiting[i], w) {
					t.Errorf("waiting[%d] %q, want %q...", i, waiting[i], w)
				}
			}
			if len(m.notified) != tc.notified {
				t.Errorf("notified %v, want %d", m.notified, tc.notified)
			}
		})
	}
}

func TestReclaimBusinessHours(t *testing.T) {
	d := detection(candidate("a", "chat", reclaim.ScaleToZero, reclaim.StateDue, true))
	d.Set.BusinessHours = true
	m := newMemReclaim()
	out, err := Reclaim(context.Background(), d, m, ReclaimOptions{ApprovedBy: "alice"})
	if err != nil || len(out.Records) != 0 || len(out.Waiting) != 1 || !strings.Contains(out.Waiting[0].Reason, "business hours") {
		t.Errorf("in business hours nothing acts: %v %+v", err, out)
	}
}

func TestRestore(t *testing.T) {
	p95 := 95.2
	m := newMemReclaim()
	keda := reclaim.Record{ID: "k", Action: reclaim.PauseKEDA, Restorable: true, Outcome: reclaim.OutcomeReclaimed, Evidence: reclaim.Evidence{LoadP95Seconds: &p95}}
	evicted := reclaim.Record{ID: "e", Action: reclaim.Evict, Outcome: reclaim.OutcomeReclaimed}
	refused := reclaim.Record{ID: "r", Action: reclaim.ScaleToZero, Restorable: true, Outcome: reclaim.OutcomeRefused}
	for _, r := range []reclaim.Record{keda, evicted, refused} {
		_ = m.Save(context.Background(), r)
	}
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	rec, err := Restore(context.Background(), m, RestoreRequest{ID: "k", By: "bob", Now: at})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.restored["k"]; c == nil || *c != 96 {
		t.Errorf("KEDA's initialCooldownPeriod: %v, want the p95 load time rounded up, 96", c)
	}
	if rec.Outcome != reclaim.OutcomeRestored || !rec.Restored.Equal(at) || rec.RestoredBy != "bob" || m.ledger["k"].Outcome != reclaim.OutcomeRestored {
		t.Errorf("record after restore: %+v", rec)
	}
	for id, want := range map[string]string{"k": "was restored", "e": "cannot be undone", "r": "nothing was changed", "x": "no record"} {
		if _, err := Restore(context.Background(), m, RestoreRequest{ID: id, Now: at}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("restore %s: %v, want %q", id, err, want)
		}
	}
}

func TestRecheck(t *testing.T) {
	c := candidate("a", "chat", reclaim.ScaleToZero, reclaim.StateDue, false)
	pod := func(mean usage.Amount, app ...usage.AppUsage) *usage.Report {
		return &usage.Report{Pods: []usage.PodUsage{{Namespace: "ml", Pod: "chat-0", Pattern: usage.Pattern{MeanActivity: mean}, App: app}}}
	}
	for name, tc := range map[string]struct {
		r    *usage.Report
		want string
	}{
		"still idle":     {pod(usage.Known(0.01)), ""},
		"woke up":        {pod(usage.Known(0.3)), "woke up"},
		"no data":        {&usage.Report{}, "unknown"},
		"unknown mean":   {pod(usage.Unknown), "unknown"},
		"serving":        {pod(usage.Known(0), usage.AppUsage{Name: "tokens", Mean: usage.Known(2)}), "not zero"},
		"metric missing": {pod(usage.Known(0), usage.AppUsage{Name: "tokens", Mean: usage.Unknown}), "not zero"},
	} {
		err := recheck(tc.r, c, 0.05)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

func TestDemoReclaim(t *testing.T) {
	d, err := DetectReclaim(context.Background(), ReclaimRequest{}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]reclaim.Action{}
	for _, c := range d.Set.Candidates {
		got[c.Owner.String()] = c.Action
	}
	want := map[string]reclaim.Action{"Notebook ml/notebook-bo": reclaim.StopNotebook, "Workload ml/job-sweep-4f2a1": reclaim.DeactivateWorkload, "Job ml/finetune-nightly": reclaim.SuspendJob}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("demo candidates (-want +got)\n%s", diff)
	}
}

func TestLoadP95(t *testing.T) {
	r := &usage.Report{
		Pods: []usage.PodUsage{{Namespace: "ml", Pod: "serve-0", Startup: usage.Startup{Workload: "serve"}}, {Namespace: "ml", Pod: "other-0", Startup: usage.Startup{Workload: "other"}}},
		Startup: usage.StartupSummary{Workloads: []usage.StartupGroup{
			{Key: "ml/other", Load: usage.Percentiles{P95: usage.Known(10)}},
			{Key: "ml/serve", Load: usage.Percentiles{P95: usage.Known(95.2)}},
		}},
	}
	if got := LoadP95(r, []reclaim.PodRef{{Namespace: "ml", Name: "serve-0"}}); got == nil || *got != 95.2 {
		t.Errorf("p95 load of serve: %v", got)
	}
	if got := LoadP95(r, []reclaim.PodRef{{Namespace: "ml", Name: "gone-0"}}); got != nil {
		t.Errorf("a pod with no start-up in the window has no load time: %v", *got)
	}
}
