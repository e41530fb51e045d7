package app

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gpupack/gpupack/reclaim"
	"github.com/gpupack/gpupack/usage"
)

// RecheckWindow is how far back the re-check before an action looks.
const RecheckWindow = 10 * time.Minute

// Recheck returns the re-check that runs just before an action: it
// accounts the last RecheckWindow of the candidate's pods from m's store
// and refuses when one of them is active at or over the floor, serves
// requests (a non-zero application metric), or has no series (its
// idleness is then unknown).
func Recheck(m Measurement, floor float64, now func() time.Time) func(ctx context.Context, c reclaim.Candidate) error {
	return func(ctx context.Context, c reclaim.Candidate) error {
		mm := m
		mm.Window = LatestWindow(now(), RecheckWindow, usage.DefaultStep(RecheckWindow), false)
		mm.Hourly = false
		r, err := Measure(ctx, mm)
		if err != nil {
			return fmt.Errorf("re-check of %s: %w", c.Owner, err)
		}
		return recheck(r, c, floor)
	}
}

func recheck(r *usage.Report, c reclaim.Candidate, floor float64) error {
	pods := map[string]*usage.PodUsage{}
	for i := range r.Pods {
		pods[r.Pods[i].Key()] = &r.Pods[i]
	}
	for _, p := range c.Pods {
		u := pods[p.Key()]
		if u == nil || !u.Pattern.MeanActivity.Known() {
			return fmt.Errorf("re-check: %s has no GPU activity in the last %s, so its idleness is unknown; acting waits for data", p.Key(), RecheckWindow)
		}
		if a := u.Pattern.MeanActivity.Value(); a >= floor {
			return fmt.Errorf("re-check: %s is %.1f%% active in the last %s, at or over the %.1f%% floor: it woke up", p.Key(), 100*a, RecheckWindow, 100*floor)
		}
		for _, app := range u.App {
			if !app.Mean.Known() || app.Mean.Value() > 0 {
				return fmt.Errorf("re-check: %s's %s is not zero in the last %s", p.Key(), app.Name, RecheckWindow)
			}
		}
	}
	return nil
}

// RestoreRequest names the record to restore.
type RestoreRequest struct {
	ID string
	By string
	// From, when it names a Prometheus, is where the workload's p95 load
	// time is measured (over the last week) for a KEDA-paused record;
	// otherwise the evidence's, when known.
	From Measurement
	Now  time.Time
}

// Restore puts back what a reclaim record replaced: the replicas, the
// ScaledObject's paused-replicas (with its initialCooldownPeriod at least
// the workload's p95 load time), the Notebook's stop annotation, the
// Job's suspend and the Workload's active flag. It updates the record in
// the ledger.
func Restore(ctx context.Context, a reclaim.Actuator, req RestoreRequest) (reclaim.Record, error) {
	recs, err := a.Records(ctx)
	if err != nil {
		return reclaim.Record{}, err
	}
	var rec *reclaim.Record
	for i := range recs {
		if recs[i].ID == req.ID {
			rec = &recs[i]
		}
	}
	switch {
	case rec == nil:
		return reclaim.Record{}, fmt.Errorf("no record %s in the ledger: `gpupack reclaim --ledger` lists them", req.ID)
	case rec.Outcome == reclaim.OutcomeRestored:
		return *rec, fmt.Errorf("record %s was restored at %s by %s", rec.ID, rec.Restored.UTC().Format(time.RFC3339), rec.RestoredBy)
	case rec.Outcome != reclaim.OutcomeReclaimed:
		return *rec, fmt.Errorf("record %s is %s (%s): nothing was changed to put back", rec.ID, rec.Outcome, rec.Reason)
	case !rec.Restorable:
		return *rec, fmt.Errorf("record %s: %s of a bare pod cannot be undone: %w; recreate the pod from its manifest", rec.ID, rec.Action, reclaim.ErrNotRestorable)
	}
	var cooldown *int32
	if rec.Action == reclaim.PauseKEDA {
		cooldown = loadCooldown(ctx, *rec, req)
	}
	if err := a.Restore(ctx, *rec, cooldown); err != nil {
		rec.Reason = "restore failed: " + err.Error()
		return *rec, errors.Join(err, a.Save(context.WithoutCancel(ctx), *rec))
	}
	at := req.Now.UTC()
	rec.Outcome, rec.Restored, rec.RestoredBy, rec.Reason, rec.InitialCooldownSeconds = reclaim.OutcomeRestored, &at, req.By, "", cooldown
	return *rec, a.Save(context.WithoutCancel(ctx), *rec)
}

// loadCooldown is the workload's p95 load time, rounded up to a second:
// measured over the last week when a store is given, else the
// evidence's; nil when neither knows it.
func loadCooldown(ctx context.Context, rec reclaim.Record, req RestoreRequest) *int32 {
	p95 := rec.Evidence.LoadP95Seconds
	if req.From.Prometheus != "" {
		m := req.From
		m.Window = LatestWindow(req.Now, 7*24*time.Hour, usage.DefaultStep(7*24*time.Hour), false)
		if r, err := Measure(ctx, m); err == nil {
			if v := LoadP95(r, rec.Pods); v != nil {
				p95 = v
			}
		}
	}
	if p95 == nil {
		return nil
	}
	s := int32(math.Ceil(*p95))
	return &s
}

// LoadP95 is the p95 load time (containers started to app ready) of the
// workload the pods belong to, from the report's start-up groups; nil when
// none of them started in the window.
func LoadP95(r *usage.Report, pods []reclaim.PodRef) *float64 {
	want := map[string]bool{}
	for i := range r.Pods {
		p := &r.Pods[i]
		for _, mine := range pods {
			if p.Key() == mine.Key() && p.Startup.Workload != "" {
				want[p.Namespace+"/"+p.Startup.Workload] = true
			}
		}
	}
	for _, g := range r.Startup.Workloads {
		if want[g.Key] && g.Load.P95.Known() {
			v := g.Load.P95.Value()
			return &v
		}
	}
	return nil
}

// LedgerEntry is a record with what it saved, measured from the
// accounting of the hours after it; Measured is nil with MeasureError
// when it could not be (no Prometheus, or a failed query).
type LedgerEntry struct {
	reclaim.Record
	Measured     *reclaim.Measured `json:"measured"`
	MeasureError string            `json:"measureError,omitempty"`
}

// LedgerTotals add up the ledger's entries: predicted GPU-hours (over the
// same spans) against measured, by outcome.
type LedgerTotals struct {
	Records         int            `json:"records"`
	ByOutcome       map[string]int `json:"byOutcome"`
	Measured        int            `json:"measured"`
	PredictedGPUHrs float64        `json:"predictedGPUHours"`
	FreedGPUHours   float64        `json:"freedGPUHours"`
	ReusedGPUHours  float64        `json:"reusedGPUHours"`
	UnusedGPUHours  float64        `json:"unusedGPUHours"`
	// FreedCost sums the entries whose cost is known (CostKnown of
	// Measured of them).
	FreedCost float64 `json:"freedCost"`
	CostKnown int     `json:"costKnown"`
}

// MaxMeasured bounds how many of the newest records a ledger read
// measures (one accounting query each); older ones keep Measured nil.
const MaxMeasured = 50

// Ledger reads the ledger and measures each record that acted (reclaimed
// or restored) over [At, restore or now] from m's store, the newest
// MaxMeasured of them.
func Ledger(ctx context.Context, a reclaim.Actuator, m *Measurement, now time.Time) ([]LedgerEntry, LedgerTotals, error) {
	recs, err := a.Records(ctx)
	if err != nil {
		return nil, LedgerTotals{}, err
	}
	out := make([]LedgerEntry, len(recs))
	t := LedgerTotals{Records: len(recs), ByOutcome: map[string]int{}}
	measured := 0
	for i := len(recs) - 1; i >= 0; i-- {
		e := LedgerEntry{Record: recs[i]}
		t.ByOutcome[e.Outcome]++
		acted := e.Outcome == reclaim.OutcomeReclaimed || e.Outcome == reclaim.OutcomeRestored
		switch {
		case !acted:
		case m == nil || m.Prometheus == "":
			e.MeasureError = "no Prometheus given: the saving is not measured"
		case measured >= MaxMeasured:
			e.MeasureError = fmt.Sprintf("older than the newest %d actions: not measured in this read", MaxMeasured)
		default:
			measured++
			mm, err := measureRecord(ctx, *m, e.Record, now)
			if err != nil {
				e.MeasureError = err.Error()
			} else {
				e.Measured = mm
				t.add(mm)
			}
		}
		out[i] = e
	}
	t.round()
	return out, t, nil
}

// measureRecord accounts [At, End] and measures the record's saving.
func measureRecord(ctx context.Context, m Measurement, rec reclaim.Record, now time.Time) (*reclaim.Measured, error) {
	end := rec.End(now)
	span := end.Sub(rec.At)
	if span <= 0 {
		return nil, fmt.Errorf("no time has passed since the action")
	}
	if span > 90*24*time.Hour {
		span = 90 * 24 * time.Hour
	}
	m.Window = usage.Window{Start: end.Add(-span), End: end, Step: usage.DefaultStep(span)}
	m.Hourly = false
	r, err := Measure(ctx, m)
	if err != nil {
		return nil, err
	}
	mm := reclaim.Measure(rec, r)
	return &mm, nil
}

func (t *LedgerTotals) add(m *reclaim.Measured) {
	t.Measured++
	t.PredictedGPUHrs += m.PredictedGPUHrs
	t.FreedGPUHours += m.FreedGPUHours
	t.ReusedGPUHours += m.ReusedGPUHours
	t.UnusedGPUHours += m.UnusedGPUHours
	if m.FreedCost != nil {
		t.FreedCost += *m.FreedCost
		t.CostKnown++
	}
}

func (t *LedgerTotals) round() {
	r := func(x float64) float64 { return math.Round(x*1e4) / 1e4 }
	t.PredictedGPUHrs, t.FreedGPUHours, t.ReusedGPUHours, t.UnusedGPUHours = r(t.PredictedGPUHrs), r(t.FreedGPUHours), r(t.ReusedGPUHours), r(t.UnusedGPUHours)
	t.FreedCost = math.Round(t.FreedCost*100) / 100
}
