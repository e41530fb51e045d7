package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
)

// ApplyOptions say how a change set is carried out.
type ApplyOptions struct {
	// ApprovedBy names who approved the set's hash, for the audit log.
	ApprovedBy string
	// MaxPerPool is how many nodes of one pool change at once (>= 1).
	MaxPerPool int
	// DrainTimeout bounds the drain of one node (PodDisruptionBudgets
	// retried with backoff until then); SwitchTimeout bounds the wait for
	// the operator after the switch, and again for a rollback.
	DrainTimeout  time.Duration
	SwitchTimeout time.Duration
	// Poll is how often a wait reads the node again.
	Poll time.Duration
	// LetJobsFinish waits for the pods of Jobs to finish (within the
	// drain's deadline) instead of evicting them.
	LetJobsFinish bool
	// Window, when set, is the maintenance window a node's change must
	// start in.
	Window *MaintenanceWindow
	// RequireMIGManager refuses a re-partition on a node whose labels do
	// not show mig-manager deployed and at rest (MIGManagerReady).
	RequireMIGManager bool
	// Audit receives one JSON line per node change; nil for none.
	Audit io.Writer
	// Progress is told of every step as it starts and ends; nil for none.
	Progress func(Step)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultApplyOptions: one node per pool at a time, a ten-minute drain,
// a fifteen-minute switch, a two-second poll, mig-manager required.
func DefaultApplyOptions() ApplyOptions {
	return ApplyOptions{MaxPerPool: 1, DrainTimeout: 10 * time.Minute, SwitchTimeout: 15 * time.Minute, Poll: 2 * time.Second, RequireMIGManager: true}
}

func (o *ApplyOptions) check() error {
	switch {
	case o.MaxPerPool < 1:
		return fmt.Errorf("--max-per-pool %d: at least one node of a pool must be allowed to change", o.MaxPerPool)
	case o.DrainTimeout <= 0 || o.SwitchTimeout <= 0 || o.Poll <= 0:
		return errors.New("--drain-timeout, --switch-timeout and the poll interval must be positive")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Outcomes of a node's change.
const (
	OutcomeApplied        = "applied"
	OutcomeAborted        = "aborted"     // stopped before the switch; the node is as it was
	OutcomeRolledBack     = "rolled-back" // switched, failed, and restored
	OutcomeRollbackFailed = "rollback-failed"
)

// Step is one step of a node's change, for progress and the dashboard.
type Step struct {
	Node   string    `json:"node"`
	Name   string    `json:"step"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// NodeResult is what happened to one node: the audit log's record.
type NodeResult struct {
	Node       string    `json:"node"`
	Hash       string    `json:"hash"`
	ApprovedBy string    `json:"approvedBy"`
	Outcome    string    `json:"outcome"`
	Reason     string    `json:"reason,omitempty"`
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended"`
	// Durations of the steps that ran, in seconds, by step name.
	Durations         map[string]float64 `json:"durationsSeconds"`
	Labels            []change.Label     `json:"labels"`
	AllocatableBefore map[string]int64   `json:"allocatableBefore"`
	AllocatableAfter  map[string]int64   `json:"allocatableAfter"`
	Evicted           []cluster.PodKey   `json:"evicted"`
	// GPUHoursLost is measured: the GPUs each stopped pod held times the
	// time from its stop to the end of the node's change.
	GPUHoursLost float64 `json:"gpuHoursLost"`
	// StillPending are the pending pods the change was for that do not
	// fit the node after it (empty when all do).
	StillPending []cluster.PodKey `json:"stillPending,omitempty"`
}

// Apply carries out an approved change set node by node: at most
// MaxPerPool nodes of a pool at once, pools side by side. Each node is
// fenced, drained through the Eviction API, switched, waited for,
// verified and unfenced, or rolled back (see applyNode). It returns every
// node's result; the error says how many did not apply.
func Apply(ctx context.Context, set *change.Set, a change.Actuator, o ApplyOptions) ([]NodeResult, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	for _, r := range set.TaintRules {
		if err := a.EnsureTaintRule(ctx, r); err != nil {
			return nil, fmt.Errorf("DeviceTaintRule %s, before any node changes: %w", r.Name, err)
		}
		if o.Progress != nil {
			o.Progress(Step{Node: r.Pool, Name: "taint unhealthy GPU", Detail: fmt.Sprintf("DeviceTaintRule %s on %s/%s/%s (XID %d)", r.Name, r.Driver, r.Pool, r.Device, r.XID), At: o.Now()})
		}
	}
	byPool := map[string][]change.Node{}
	for _, n := range set.Nodes {
		byPool[n.Pool] = append(byPool[n.Pool], n)
	}
	var (
		mu      sync.Mutex
		results []NodeResult
		wg      sync.WaitGroup
	)
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		sem := make(chan struct{}, o.MaxPerPool)
		for _, n := range byPool[pool] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				r := (&nodeRun{a: a, o: o, set: set, n: n}).run(ctx)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	slices.SortFunc(results, func(x, y NodeResult) int { return strings.Compare(x.Node, y.Node) })
	var failed []string
	for _, r := range results {
		if r.Outcome != OutcomeApplied {
			failed = append(failed, fmt.Sprintf("%s %s: %s", r.Node, r.Outcome, r.Reason))
		}
	}
	if len(failed) > 0 {
		return results, fmt.Errorf("%d of %d nodes did not apply: %s", len(failed), len(results), strings.Join(failed, "; "))
	}
	return results, nil
}

// MaintenanceWindow is a daily window, in UTC, such as 22:00-06:00.
type MaintenanceWindow struct {
	Start, End time.Duration // since midnight
}

// ParseMaintenanceWindow reads "HH:MM-HH:MM" (UTC; the end may be past
// midnight).
func ParseMaintenanceWindow(s string) (*MaintenanceWindow, error) {
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return nil, fmt.Errorf("maintenance window %q: want HH:MM-HH:MM in UTC, such as 22:00-06:00", s)
	}
	var w MaintenanceWindow
	for i, part := range []string{from, to} {
		t, err := time.Parse("15:04", strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("maintenance window %q: %q is not HH:MM", s, part)
		}
		d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
		if i == 0 {
			w.Start = d
		} else {
			w.End = d
		}
	}
	if w.Start == w.End {
		return nil, fmt.Errorf("maintenance window %q is empty", s)
	}
	return &w, nil
}

// Contains says whether t falls in the window.
func (w *MaintenanceWindow) Contains(t time.Time) bool {
	t = t.UTC()
	d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second
	if w.Start < w.End {
		return d >= w.Start && d < w.End
	}
	return d >= w.Start || d < w.End
}

func (w *MaintenanceWindow) String() string {
	f := func(d time.Duration) string { return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60) }
	return f(w.Start) + "-" + f(w.End) + " UTC"
}
