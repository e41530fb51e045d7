package app

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/gpupack/gpupack/reclaim"
)

// ReclaimController is reclaim as a loop, for `serve --reclaim-controller`:
// every Interval it detects the idle-held workloads of the live cluster,
// notifies their owners, and acts on those whose notice has run out when
// the approvals ConfigMap names their ID or the policy approves their
// class (Reclaim, re-checking each just before acting). It publishes the
// set, the round's outcome and the ledger with the saving measured since
// each action (Status). A candidate whose action failed is not tried
// again by this process while its ID stays the same, as the apply
// controller does with a change set.
type ReclaimController struct {
	// Detect measures and detects the candidates of the cluster now.
	Detect func(ctx context.Context) (*Detection, error)
	// Approvals reads the approved candidate IDs, each with who approved
	// it; read-only for the controller.
	Approvals func(ctx context.Context) (map[string]string, error)
	Actuator  reclaim.Actuator
	// Options are Reclaim's; the controller sets Approvals and Notify.
	Options ReclaimOptions
	// Measurement is where the ledger's savings are measured; nil leaves
	// them unmeasured.
	Measurement *Measurement
	Interval    time.Duration
	// LedgerEvery bounds how often the ledger is read and measured (one
	// accounting query per record): at most once per LedgerEvery, however
	// short Interval is.
	LedgerEvery time.Duration
	// Observe is told of each record this process sees end: the actions
	// of its rounds (reclaimed, refused, failed) and the restores read in
	// the ledger since it started; nil for none.
	Observe func(kind reclaim.Kind, outcome string)
	// ObserveFreed is told how many GPU-hours the ledger's measured
	// savings grew by since the last read (never negative); nil for none.
	ObserveFreed func(gpuHours float64)

	mu      sync.Mutex
	status  ReclaimStatus
	started time.Time
	// failed are the candidate IDs whose action failed in this process.
	failed map[string]bool
	// restored are the record IDs whose restore was observed.
	restored map[string]bool
	// freed is each record's largest measured freed GPU-hours seen.
	freed map[string]float64
	// ledgerRead is when the ledger was last read.
	ledgerRead time.Time
}

// ReclaimStatus is what the controller shows: the set it detected last
// (candidates with their evidence, the owners left alone), the approvals
// read, the last round's outcome, and the ledger with its totals.
type ReclaimStatus struct {
	Set       *reclaim.Set      `json:"set"`
	Detected  time.Time         `json:"detected"`
	Error     string            `json:"error,omitempty"`
	Approvals map[string]string `json:"approvals"`
	Outcome   *ReclaimOutcome   `json:"outcome"`
	Ledger    []LedgerEntry     `json:"ledger"`
	Totals    LedgerTotals      `json:"totals"`
	// LedgerRead is when the ledger was last read and measured; zero
	// before the first read.
	LedgerRead  time.Time `json:"ledgerRead"`
	LedgerError string    `json:"ledgerError,omitempty"`
}

// NewReclaimStatus is a status with empty lists, which JSON shows as []
// rather than null: the demo's, and the controller's before its first
// round.
func NewReclaimStatus(set *reclaim.Set) ReclaimStatus {
	s := ReclaimStatus{Set: set, Approvals: map[string]string{}, Ledger: []LedgerEntry{},
		Outcome: &ReclaimOutcome{Notified: []string{}, Records: []reclaim.Record{}, Waiting: []Waiting{}},
		Totals:  LedgerTotals{ByOutcome: map[string]int{}}}
	if set != nil {
		cp := *set
		s.Set, s.Detected = &cp, set.At
		if s.Set.Candidates == nil {
			s.Set.Candidates = []reclaim.Candidate{}
		}
		if s.Set.Skipped == nil {
			s.Set.Skipped = []reclaim.Skip{}
		}
	}
	return s
}

// Status returns a copy of the current status.
func (c *ReclaimController) Status() ReclaimStatus {
	c.init()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Ledger = append([]LedgerEntry{}, s.Ledger...)
	return s
}

// Run loops until ctx ends.
func (c *ReclaimController) Run(ctx context.Context) error {
	return runEvery(ctx, "reclaim", c.Interval, c.Once)
}

// Once is one round of the loop: detect, read the approvals, notify and
// act, then read the ledger when LedgerEvery has passed since the last
// read.
func (c *ReclaimController) Once(ctx context.Context) {
	c.init()
	now := c.now()
	d, err := c.Detect(ctx)
	if err != nil {
		c.update(func(s *ReclaimStatus) { s.Error = "detecting: " + err.Error() })
		c.readLedger(ctx, now)
		return
	}
	approvals, aerr := c.Approvals(ctx)
	if approvals == nil {
		approvals = map[string]string{}
	}
	out, rerr := c.reclaim(ctx, d, approvals)
	c.update(func(s *ReclaimStatus) {
		st := NewReclaimStatus(d.Set)
		s.Set, s.Detected, s.Approvals, s.Outcome, s.Error = st.Set, st.Detected, approvals, out, ""
		if aerr != nil {
			s.Error = "reading approvals: " + aerr.Error()
		}
		if rerr != nil {
			s.Error = joinErr(s.Error, rerr.Error())
		}
	})
	c.readLedger(ctx, now)
}

// reclaim runs Reclaim on the candidates not failed before, and counts
// the records it makes.
func (c *ReclaimController) reclaim(ctx context.Context, d *Detection, approvals map[string]string) (*ReclaimOutcome, error) {
	o := c.Options
	o.Notify, o.Approvals = true, approvals
	try := *d
	set := *d.Set
	set.Candidates = nil
	var held []Waiting
	for _, cand := range d.Set.Candidates {
		if c.failed[cand.ID] {
			held = append(held, Waiting{ID: cand.ID, Owner: cand.Owner.String(), Reason: "its action failed in this process: see the ledger; fix the cause and restart serve, or wait for its evidence to change"})
			continue
		}
		set.Candidates = append(set.Candidates, cand)
	}
	try.Set = &set
	out, err := Reclaim(ctx, &try, c.Actuator, o)
	if out == nil {
		out = &ReclaimOutcome{}
	}
	out.Waiting = append(out.Waiting, held...)
	for _, r := range out.Records {
		if r.Outcome == reclaim.OutcomeFailed {
			c.failed[r.ID] = true
		}
		c.observe(r.Owner.Kind, r.Outcome)
	}
	norm := NewReclaimStatus(nil).Outcome
	if out.Notified == nil {
		out.Notified = norm.Notified
	}
	if out.Records == nil {
		out.Records = norm.Records
	}
	if out.Waiting == nil {
		out.Waiting = norm.Waiting
	}
	return out, err
}

// readLedger reads and measures the ledger when LedgerEvery has passed
// since the last read, counts the restores and the growth of the freed
// GPU-hours, and publishes it.
func (c *ReclaimController) readLedger(ctx context.Context, now time.Time) {
	if !c.ledgerRead.IsZero() && now.Sub(c.ledgerRead) < c.LedgerEvery {
		return
	}
	c.ledgerRead = now
	entries, totals, err := Ledger(ctx, c.Actuator, c.Measurement, now)
	if err != nil {
		c.update(func(s *ReclaimStatus) { s.LedgerRead, s.LedgerError = now, err.Error() })
		return
	}
	c.countLedger(entries)
	if entries == nil {
		entries = []LedgerEntry{}
	}
	c.update(func(s *ReclaimStatus) { s.Ledger, s.Totals, s.LedgerRead, s.LedgerError = entries, totals, now, "" })
}

// countLedger tells Observe of the restores since the controller started
// and ObserveFreed of the growth of each record's measured freed
// GPU-hours: a record that is not measured in a read (too old, a failed
// query) keeps what it counted, so the sum never falls; a record gone
// from the ledger (trimmed) is forgotten.
func (c *ReclaimController) countLedger(entries []LedgerEntry) {
	var grown float64
	inLedger := map[string]bool{}
	for _, e := range entries {
		inLedger[e.ID] = true
		if e.Outcome == reclaim.OutcomeRestored && e.Restored != nil && !e.Restored.Before(c.started) && !c.restored[e.ID] {
			c.restored[e.ID] = true
			c.observe(e.Owner.Kind, reclaim.OutcomeRestored)
		}
		if e.Measured != nil && e.Measured.FreedGPUHours > c.freed[e.ID] {
			grown += e.Measured.FreedGPUHours - c.freed[e.ID]
			c.freed[e.ID] = e.Measured.FreedGPUHours
		}
	}
	if grown > 0 && c.ObserveFreed != nil {
		c.ObserveFreed(grown)
	}
	// A record trimmed from the ledger never comes back: forget it.
	maps.DeleteFunc(c.restored, func(id string, _ bool) bool { return !inLedger[id] })
	maps.DeleteFunc(c.freed, func(id string, _ float64) bool { return !inLedger[id] })
}

func (c *ReclaimController) observe(kind reclaim.Kind, outcome string) {
	if c.Observe != nil {
		c.Observe(kind, outcome)
	}
}

func (c *ReclaimController) init() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return
	}
	c.failed, c.restored, c.freed = map[string]bool{}, map[string]bool{}, map[string]float64{}
	c.started = c.now()
	c.status = NewReclaimStatus(nil)
}

func (c *ReclaimController) now() time.Time {
	if c.Options.Now == nil {
		return time.Now()
	}
	return c.Options.Now()
}

func (c *ReclaimController) update(f func(*ReclaimStatus)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.status)
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// ApprovalOf says who approves c, as Reclaim decides it with these
// approvals by ID: the approvals ConfigMap, else the policy (never for a
// bare pod).
func ApprovalOf(c reclaim.Candidate, approvals map[string]string) (string, bool) {
	return approver(c, ReclaimOptions{Approvals: approvals})
}
