package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
)

// ChangeController is apply as a loop, for `serve --apply-controller`:
// every Interval it builds the change set of the live cluster and
// publishes it (Status), applies it when an approval names its hash, and
// releases the startup taints of nodes whose MIG config mig-manager has
// applied. It applies a hash at most once per process: a set that failed
// is not retried until the cluster changes its hash or the process
// restarts.
type ChangeController struct {
	// Build makes the change set of the cluster now.
	Build func(ctx context.Context) (*change.Set, error)
	// Approvals reads the approved hashes, each with who approved it.
	Approvals func(ctx context.Context) (map[string]string, error)
	// ReleaseStartupTaints removes the mig-pending startup taint of the
	// nodes whose MIG config is applied, and names them.
	ReleaseStartupTaints func(ctx context.Context) ([]string, error)
	Actuator             change.Actuator
	Options              ApplyOptions
	Interval             time.Duration
	// Observe is told of each node's result (the metrics); nil for none.
	Observe func(NodeResult)
	// Measurement is where the applied changes are measured since they
	// ended (MeasureChange), at most once per MeasureEvery; nil leaves
	// them unmeasured.
	Measurement  *Measurement
	MeasureEvery time.Duration

	mu       sync.Mutex
	status   ChangeStatus
	attempts map[string]bool
	// fits are the pending pods each applied node change was for, by
	// hash and node.
	fits     map[string][]cluster.PodKey
	measured time.Time
}

// ChangeStatus is what the controller shows: the change set it built
// last, whether it is approved and being applied, the steps of the
// current run and the results of the last ones.
type ChangeStatus struct {
	Set      *change.Set  `json:"changeSet"`
	Built    time.Time    `json:"built"`
	Error    string       `json:"error,omitempty"`
	Approved string       `json:"approvedBy,omitempty"`
	Applying bool         `json:"applying"`
	Steps    []Step       `json:"steps"`
	Results  []NodeResult `json:"results"`
	Released []string     `json:"startupTaintsReleased,omitempty"`
	// Measured are the newest applied results (MaxChangesMeasured) as
	// measured since they ended, newest first; the expected gain is
	// Set.Gain's and each one's ExpectedFits.
	Measured []ChangeMeasured `json:"measured"`
}

// keepSteps and keepResults bound what the status remembers.
const (
	keepSteps   = 200
	keepResults = 100
)

// Status returns a copy of the current status.
func (c *ChangeController) Status() ChangeStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Steps = append([]Step(nil), s.Steps...)
	s.Results = append([]NodeResult(nil), s.Results...)
	s.Measured = append([]ChangeMeasured{}, s.Measured...)
	return s
}

// Run loops until ctx ends.
func (c *ChangeController) Run(ctx context.Context) error {
	return runEvery(ctx, "apply", c.Interval, c.Once)
}

// runEvery runs once now and then every interval until ctx ends: the
// loop of the apply and reclaim controllers, named by what in errors.
func runEvery(ctx context.Context, what string, interval time.Duration, once func(context.Context)) error {
	if interval <= 0 {
		return fmt.Errorf("the %s controller's interval %s must be positive", what, interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		once(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Once is one round of the loop.
func (c *ChangeController) Once(ctx context.Context) {
	if c.attempts == nil {
		c.attempts, c.fits = map[string]bool{}, map[string][]cluster.PodKey{}
	}
	if c.ReleaseStartupTaints != nil {
		released, err := c.ReleaseStartupTaints(ctx)
		c.update(func(s *ChangeStatus) {
			for _, n := range released {
				s.Released = appendBounded(s.Released, n, keepResults)
			}
			if err != nil {
				s.Error = "releasing startup taints: " + err.Error()
			}
		})
	}
	set, err := c.Build(ctx)
	now := c.Options.now()
	if err != nil {
		c.update(func(s *ChangeStatus) { s.Error, s.Built = err.Error(), now })
		c.measure(ctx, now)
		return
	}
	approvals, err := c.Approvals(ctx)
	by, approved := approvals[set.Hash]
	c.update(func(s *ChangeStatus) {
		s.Set, s.Built, s.Error, s.Approved = set, now, "", ""
		if err != nil {
			s.Error = "reading approvals: " + err.Error()
		}
		if approved {
			s.Approved = by
		}
	})
	if approved && len(set.Nodes) > 0 && !c.attempts[set.Hash] {
		c.attempts[set.Hash] = true
		c.apply(ctx, set, by)
	}
	c.measure(ctx, now)
}

// measure measures the newest applied results since they ended, when
// MeasureEvery has passed since the last time.
func (c *ChangeController) measure(ctx context.Context, now time.Time) {
	if c.Measurement == nil || !c.measured.IsZero() && now.Sub(c.measured) < c.MeasureEvery {
		return
	}
	c.measured = now
	results := c.Status().Results
	var out []ChangeMeasured
	for i := len(results) - 1; i >= 0 && len(out) < MaxChangesMeasured; i-- {
		if r := results[i]; r.Outcome == OutcomeApplied {
			out = append(out, MeasureChange(ctx, *c.Measurement, r, c.fits[r.Hash+"/"+r.Node], now))
		}
	}
	c.update(func(s *ChangeStatus) { s.Measured = out })
}

func (c *ChangeController) apply(ctx context.Context, set *change.Set, by string) {
	for _, n := range set.Nodes {
		c.fits[set.Hash+"/"+n.Name] = n.Fits
	}
	o := c.Options
	o.ApprovedBy = by
	progress := o.Progress
	o.Progress = func(st Step) {
		c.update(func(s *ChangeStatus) { s.Steps = appendBounded(s.Steps, st, keepSteps) })
		if progress != nil {
			progress(st)
		}
	}
	c.update(func(s *ChangeStatus) { s.Applying, s.Steps = true, nil })
	results, err := Apply(ctx, set, c.Actuator, o)
	c.update(func(s *ChangeStatus) {
		s.Applying = false
		for _, r := range results {
			s.Results = appendBounded(s.Results, r, keepResults)
		}
		if err != nil {
			s.Error = err.Error()
		}
	})
	if c.Observe != nil {
		for _, r := range results {
			c.Observe(r)
		}
	}
}

func (c *ChangeController) update(f func(*ChangeStatus)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.status)
}

func appendBounded[T any](xs []T, x T, limit int) []T {
	xs = append(xs, x)
	if len(xs) > limit {
		xs = xs[len(xs)-limit:]
	}
	return xs
}

func (o ApplyOptions) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}
