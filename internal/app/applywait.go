package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/placement"
)

// maxBackoff caps the wait between two evictions a budget refused.
const maxBackoff = 30 * time.Second

// drain stops the change set's pods of the node, one at a time, through
// the Eviction API (or, with LetJobsFinish, by waiting for a Job's pod to
// finish), within DrainTimeout; a pod that cannot be stopped in time
// fails the drain.
func (r *nodeRun) drain(ctx context.Context) error {
	if len(r.n.Stop) == 0 {
		return nil
	}
	r.begin(ctx, "drain", fmt.Sprintf("%d pods through the Eviction API", len(r.n.Stop)))
	dctx, cancel := context.WithTimeout(ctx, r.o.DrainTimeout)
	defer cancel()
	for _, s := range r.n.Stop {
		if err := r.stop(dctx, s); err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("drain: %s did not stop within %s (%v): %w", s.Pod, r.o.DrainTimeout, err, errTimeout)
			}
			return fmt.Errorf("drain: %s: %w", s.Pod, err)
		}
	}
	return nil
}

// stop evicts one pod (retrying while its budget refuses, with backoff)
// and waits until it has left the node.
func (r *nodeRun) stop(ctx context.Context, s change.Stop) error {
	p, ok, err := r.pod(ctx, s.Pod)
	if err != nil || !ok {
		return err // gone already: nothing to stop
	}
	if s.Job && r.o.LetJobsFinish {
		return r.until(ctx, func() (bool, error) {
			_, there, err := r.pod(ctx, s.Pod)
			return !there, err
		})
	}
	backoff := r.o.Poll
	for {
		err := r.a.Evict(ctx, s.Pod, p.UID)
		if err == nil {
			break
		}
		if !errors.Is(err, change.ErrBudget) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (its PodDisruptionBudget never allowed the eviction)", ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
	r.stopped[s.Pod] = r.o.Now()
	r.res.Evicted = append(r.res.Evicted, s.Pod)
	return r.until(ctx, func() (bool, error) {
		_, there, err := r.pod(ctx, s.Pod)
		return !there, err
	})
}

// pod finds an unfinished pod on the node.
func (r *nodeRun) pod(ctx context.Context, key cluster.PodKey) (change.PodNow, bool, error) {
	now, err := r.a.Node(ctx, r.n.Name)
	if err != nil {
		return change.PodNow{}, false, err
	}
	for _, p := range now.Pods {
		if p.Key == key {
			return p, true, nil
		}
	}
	return change.PodNow{}, false, nil
}

// until polls done every Poll until it says true, fails, or ctx ends.
func (r *nodeRun) until(ctx context.Context, done func() (bool, error)) error {
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	for {
		ok, err := done()
		if err != nil && ctx.Err() != nil {
			return ctx.Err() // a read cut short by the deadline is the deadline
		}
		if d, has := ctx.Deadline(); err != nil && has && time.Until(d) < r.o.Poll {
			// A client's rate limiter refuses a read it could not
			// finish before the deadline: that is the deadline too.
			return fmt.Errorf("%w (the last read: %v)", context.DeadlineExceeded, err)
		}
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// wait waits, within SwitchTimeout, until the operator has taken the
// labels: mig-manager's state success (when nvidia.com/mig.config
// changed) and the node's allocatable showing want. stale is the state
// the label held before the labels changed: until it changes it is the
// previous change's, so neither its failed nor its success counts. A
// fresh failed fails at once; at the timeout a pending with the operands
// paused is named a wedged mig-manager. A change that leaves the state
// and the allocatable as they were (the GPUs already held the config)
// counts at the timeout.
func (r *nodeRun) wait(ctx context.Context, labels []change.Label, want map[string]int64, stale string) (change.NodeNow, error) {
	r.begin(ctx, "wait", "for the operator")
	mig := slices.ContainsFunc(labels, func(l change.Label) bool { return l.Key == gpuoperator.MIGConfigLabel })
	wctx, cancel := context.WithTimeout(ctx, r.o.SwitchTimeout)
	defer cancel()
	var (
		last      change.NodeNow
		moved     bool // a state other than success was seen
		lastError error
	)
	err := r.until(wctx, func() (bool, error) {
		now, err := r.a.Node(wctx, r.n.Name)
		if err != nil {
			return false, err
		}
		last = now
		state := now.Labels[gpuoperator.MIGConfigStateLabel]
		if mig && state != stale {
			moved = true
		}
		if mig && !moved {
			lastError = fmt.Errorf("%s is still %q, the state before the change", gpuoperator.MIGConfigStateLabel, state)
			return false, nil
		}
		if mig && state == gpuoperator.MIGStateFailed {
			return false, fmt.Errorf("mig-manager failed the change (%s=%s)", gpuoperator.MIGConfigStateLabel, state)
		}
		if mig && state != gpuoperator.MIGStateSuccess {
			moved = true
			lastError = fmt.Errorf("%s is %q", gpuoperator.MIGConfigStateLabel, state)
			return false, nil
		}
		if want != nil {
			if lastError = change.Verify(want, now.Allocatable); lastError != nil {
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case err == nil:
		return last, nil
	case ctx.Err() != nil:
		return last, ctx.Err()
	case !errors.Is(err, context.DeadlineExceeded):
		return last, err
	case last.Labels != nil && (!mig || last.Labels[gpuoperator.MIGConfigStateLabel] == gpuoperator.MIGStateSuccess) &&
		(want == nil || change.Verify(want, last.Allocatable) == nil):
		return last, nil // success all along, with want shown: the GPUs already held the config
	}
	if paused := pausedOperands(last.Labels); len(paused) > 0 && last.Labels[gpuoperator.MIGConfigStateLabel] == gpuoperator.MIGStatePending {
		return last, fmt.Errorf("mig-manager wedged: %s still pending after %s with %s=%s left on the node: %w", gpuoperator.MIGConfigStateLabel, r.o.SwitchTimeout, strings.Join(paused, ", "), gpuoperator.DeployPausedForMIGChange, errTimeout)
	}
	return last, fmt.Errorf("the operator did not take the change within %s: %v: %w", r.o.SwitchTimeout, lastError, errTimeout)
}

// pausedOperands lists the nvidia.com/gpu.deploy.* labels that read
// paused-for-mig-change.
func pausedOperands(labels map[string]string) []string {
	var out []string
	for k, v := range labels {
		if strings.HasPrefix(k, gpuoperator.DeployLabelPrefix) && v == gpuoperator.DeployPausedForMIGChange {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// checkFits reads the cluster and notes the pending pods the change was
// for that are neither bound nor fit the changed node: placement.Fit, the
// one fit test of diagnose and the scheduler plugin.
func (r *nodeRun) checkFits(ctx context.Context) {
	if len(r.n.Fits) == 0 {
		return
	}
	s, err := r.a.Snapshot(ctx)
	if err != nil {
		r.res.StillPending = r.n.Fits
		return
	}
	states, _, err := placement.States(s)
	i, ok := s.NodeIndex(r.n.Name)
	if err != nil || !ok {
		r.res.StillPending = r.n.Fits
		return
	}
	for _, key := range r.n.Fits {
		if !pendingAndUnfit(s, states[i], key) {
			continue
		}
		r.res.StillPending = append(r.res.StillPending, key)
	}
}

// pendingAndUnfit says whether the pod is still pending and does not fit
// the node's state.
func pendingAndUnfit(s *cluster.Snapshot, st *placement.NodeState, key cluster.PodKey) bool {
	for _, p := range s.Pods {
		if p.Namespace != key.Namespace || p.Name != key.Name {
			continue
		}
		if p.Bound() {
			return false
		}
		d, err := placement.NewDemand(p, s.Catalogue)
		if err != nil {
			return true
		}
		_, reasons := placement.Fit(d, st)
		return len(reasons) > 0
	}
	return false // gone: nothing waits
}
