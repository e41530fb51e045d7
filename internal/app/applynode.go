package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
)

// nodeRun is one node's change.
type nodeRun struct {
	a   change.Actuator
	o   ApplyOptions
	set *change.Set
	n   change.Node

	res       NodeResult
	cordoned  bool // apply cordoned the node (it was schedulable)
	tainted   bool // apply put its device taint on the node's DRA GPUs
	stopped   map[cluster.PodKey]time.Time
	stepStart time.Time
	step      string
}

// run carries out the node's change:
//  1. preconditions: maintenance window, mig-manager at rest, no drift;
//  2. fence: cordon (unless already cordoned), or on DRA the apply taint
//     on just the touched GPUs;
//  3. drain through the Eviction API, PodDisruptionBudgets retried until
//     the drain's deadline, one pod at a time;
//  4. the excess check: no resource left allocated beyond what the new
//     config offers;
//  5. switch: the configs written, the labels set, their old values
//     recorded in an annotation;
//  6. wait for mig-manager (success, or failed, or pending too long) and
//     the allocatable the change promised;
//  7. unfence, and check that the pods the change was for fit.
//
// A failure before the switch unfences and aborts (the node is as it
// was); a failure after it rolls back: the recorded labels restored,
// waited for and verified, then unfenced. A rollback that fails leaves
// the node fenced, with a Warning Event.
func (r *nodeRun) run(ctx context.Context) NodeResult {
	r.res = NodeResult{Node: r.n.Name, Hash: r.set.Hash, ApprovedBy: r.o.ApprovedBy, Started: r.o.Now(), Labels: r.n.Labels, Durations: map[string]float64{}}
	r.stopped = map[cluster.PodKey]time.Time{}
	now, err := r.a.Node(ctx, r.n.Name)
	if err != nil {
		return r.end(ctx, OutcomeAborted, err)
	}
	r.res.AllocatableBefore = gpuResources(now.Allocatable)
	if err := r.preconditions(now); err != nil {
		return r.end(ctx, OutcomeAborted, err)
	}
	if err := r.fence(ctx, now); err != nil {
		return r.abort(ctx, err)
	}
	if err := r.drain(ctx); err != nil {
		return r.abort(ctx, err)
	}
	if err := r.checkExcess(ctx); err != nil {
		return r.abort(ctx, err)
	}
	previous, err := r.switchLabels(ctx, now)
	if err != nil {
		if previous == nil {
			return r.abort(ctx, err)
		}
		return r.rollback(ctx, previous, err)
	}
	after, err := r.wait(ctx, r.n.Labels, r.n.Allocatable, now.Labels[gpuoperator.MIGConfigStateLabel])
	if err != nil {
		return r.rollback(ctx, previous, err)
	}
	r.res.AllocatableAfter = gpuResources(after.Allocatable)
	if err := r.finish(ctx); err != nil {
		return r.end(ctx, OutcomeRollbackFailed, fmt.Errorf("applied, but unfencing failed: %w", err))
	}
	r.checkFits(ctx)
	return r.end(ctx, OutcomeApplied, nil)
}

// begin starts a named step: progress, an Event, and its duration.
func (r *nodeRun) begin(ctx context.Context, step, detail string) {
	r.closeStep()
	r.step, r.stepStart = step, r.o.Now()
	if r.o.Progress != nil {
		r.o.Progress(Step{Node: r.n.Name, Name: step, Detail: detail, At: r.stepStart})
	}
	msg := fmt.Sprintf("change set %s: %s", r.set.Hash, step)
	if detail != "" {
		msg += ": " + detail
	}
	r.a.Event(ctx, r.n.Name, false, "GPUPack"+eventReason(step), msg)
}

func (r *nodeRun) closeStep() {
	if r.step != "" {
		r.res.Durations[r.step] += r.o.Now().Sub(r.stepStart).Seconds()
		r.step = ""
	}
}

// eventReason turns a step name into an Event reason's CamelCase.
func eventReason(step string) string {
	var b strings.Builder
	for _, w := range strings.Fields(step) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// end records the outcome, the measured GPU-hours lost, the audit line
// and the last Event.
func (r *nodeRun) end(ctx context.Context, outcome string, err error) NodeResult {
	r.closeStep()
	r.res.Outcome, r.res.Ended = outcome, r.o.Now()
	if err != nil {
		r.res.Reason = err.Error()
	}
	for _, s := range r.n.Stop {
		if at, ok := r.stopped[s.Pod]; ok {
			r.res.GPUHoursLost += s.GPUs * r.res.Ended.Sub(at).Hours()
		}
	}
	if r.o.Progress != nil {
		r.o.Progress(Step{Node: r.n.Name, Name: outcome, Detail: r.res.Reason, At: r.res.Ended})
	}
	warning := outcome != OutcomeApplied
	r.a.Event(ctx, r.n.Name, warning, "GPUPackChange"+eventReason(strings.ReplaceAll(outcome, "-", " ")), fmt.Sprintf("change set %s: %s %s", r.set.Hash, outcome, r.res.Reason))
	if r.o.Audit != nil {
		if b, jerr := json.Marshal(r.res); jerr == nil {
			r.o.Audit.Write(append(b, '\n'))
		}
	}
	return r.res
}

// preconditions refuse a change that must not start now.
func (r *nodeRun) preconditions(now change.NodeNow) error {
	if w := r.o.Window; w != nil && !w.Contains(r.o.Now()) {
		return fmt.Errorf("outside the maintenance window %s", w)
	}
	if h := now.Annotations[wellknown.AnnotationChangeSet]; h != "" {
		return fmt.Errorf("change set %s is already being applied to the node (annotation %s); wait for it, or roll it back", h, wellknown.AnnotationChangeSet)
	}
	for _, l := range r.n.Labels {
		if now.Labels[l.Key] != l.From {
			return fmt.Errorf("drift: label %s is %q, the change set was made when it was %q; build the change set again", l.Key, now.Labels[l.Key], l.From)
		}
	}
	if r.changesMIG() && r.o.RequireMIGManager {
		if err := MIGManagerReady(now.Labels); err != nil {
			return err
		}
	}
	return r.checkDrift(now)
}

// MIGManagerReady says why mig-manager cannot take a change on a node with
// these labels now: not deployed there, or not at rest in success.
func MIGManagerReady(labels map[string]string) error {
	if labels[gpuoperator.MIGManagerDeployLabel] != "true" {
		return fmt.Errorf("mig-manager does not run on the node (label %s is %q, want \"true\"); enable the GPU operator's migManager, or pass --require-mig-manager=false for a node whose MIG is changed otherwise", gpuoperator.MIGManagerDeployLabel, labels[gpuoperator.MIGManagerDeployLabel])
	}
	if s := labels[gpuoperator.MIGConfigStateLabel]; s != gpuoperator.MIGStateSuccess {
		return fmt.Errorf("mig-manager is not at rest: %s is %q, want %q; wait for its current change, or fix it first", gpuoperator.MIGConfigStateLabel, s, gpuoperator.MIGStateSuccess)
	}
	return nil
}

func (r *nodeRun) changesMIG() bool {
	return slices.ContainsFunc(r.n.Labels, func(l change.Label) bool { return l.Key == gpuoperator.MIGConfigLabel })
}

// checkDrift refuses a node that holds pods the change set did not plan to
// stop but that must stop: new pods on the touched GPUs.
func (r *nodeRun) checkDrift(now change.NodeNow) error {
	planned := map[cluster.PodKey]bool{}
	for _, s := range r.n.Stop {
		planned[s.Pod] = true
	}
	var extra []string
	switch {
	case r.n.DRA:
		return nil // DRA pods are matched to devices by the change set only
	case r.n.Repartition:
		for _, p := range now.Pods {
			if p.Resource != "" && !planned[p.Key] && !p.Deleting {
				extra = append(extra, p.Key.String())
			}
		}
	default:
		for r, n := range excessNow(r.n.Allocatable, now.Pods, planned) {
			extra = append(extra, fmt.Sprintf("%d more %s", n, r))
		}
		slices.Sort(extra)
	}
	if len(extra) > 0 {
		return fmt.Errorf("drift: the node holds GPU pods the change set does not stop (%s); build the change set again and approve its new hash", strings.Join(extra, ", "))
	}
	return nil
}

// excessNow is the excess of each resource over what the new config
// offers, counting only the pods that the change set does not stop.
func excessNow(offered map[string]int64, pods []change.PodNow, stopped map[cluster.PodKey]bool) map[string]int64 {
	held := map[string]int64{}
	for _, p := range pods {
		if p.Resource != "" && !stopped[p.Key] && !p.Deleting {
			held[p.Resource] += int64(p.Count)
		}
	}
	out := map[string]int64{}
	for r, n := range held {
		if n > offered[r] {
			out[r] = n - offered[r]
		}
	}
	return out
}

// gpuResources keeps the device plugin's GPU resources of an allocatable.
func gpuResources(alloc map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for r, n := range alloc {
		if cluster.GPUResource(r) {
			out[r] = n
		}
	}
	return out
}

// fence keeps new pods off what changes: the node cordoned (remembered in
// an annotation, and only when it was schedulable), or on DRA the apply
// taint on the touched GPUs.
func (r *nodeRun) fence(ctx context.Context, now change.NodeNow) error {
	if r.n.DRA {
		r.begin(ctx, "fence", "taint the changed GPUs")
		var devices []cluster.DRADeviceID
		for _, g := range r.n.GPUs {
			devices = append(devices, g.Devices...)
		}
		r.tainted = true
		return r.a.TaintDevices(ctx, r.set.Hash, r.n.Name, devices)
	}
	r.begin(ctx, "fence", "cordon")
	hash := r.set.Hash
	p := change.NodePatch{Annotations: map[string]*string{wellknown.AnnotationChangeSet: &hash}}
	if !now.Unschedulable {
		yes := true
		p.Unschedulable, p.Annotations[wellknown.AnnotationCordoned] = &yes, &hash
		r.cordoned = true
	}
	return r.a.PatchNode(ctx, r.n.Name, p)
}

// unfence removes only what fence put there.
func (r *nodeRun) unfence(ctx context.Context) error {
	r.begin(ctx, "unfence", "")
	if r.tainted {
		if err := r.a.UntaintDevices(ctx, r.set.Hash, r.n.Name); err != nil {
			return err
		}
	}
	p := change.NodePatch{Annotations: map[string]*string{wellknown.AnnotationChangeSet: nil}}
	if r.cordoned {
		no := false
		p.Unschedulable, p.Annotations[wellknown.AnnotationCordoned] = &no, nil
	}
	return r.a.PatchNode(ctx, r.n.Name, p)
}

// finish unfences and drops the record of the previous labels.
func (r *nodeRun) finish(ctx context.Context) error {
	if err := r.unfence(ctx); err != nil {
		return err
	}
	return r.a.PatchNode(ctx, r.n.Name, change.NodePatch{Annotations: map[string]*string{wellknown.AnnotationPreviousLabels: nil}})
}

// abort unfences a node whose change stopped before the switch.
func (r *nodeRun) abort(ctx context.Context, cause error) NodeResult {
	cctx, cancel := cleanupContext(ctx, r.o.SwitchTimeout)
	defer cancel()
	if err := r.unfence(cctx); err != nil {
		return r.end(cctx, OutcomeRollbackFailed, fmt.Errorf("%w; unfencing failed too, the node stays fenced: %v", cause, err))
	}
	return r.end(cctx, OutcomeAborted, cause)
}

// cleanupContext is the context that undoing runs in: the run's own while
// it lives, else (interrupted) a fresh one bounded by limit, so that an
// interrupt never leaves a node half changed without trying to restore it.
func cleanupContext(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), limit)
}

// checkExcess refuses the switch while more of a resource is allocated
// than the new config offers.
func (r *nodeRun) checkExcess(ctx context.Context) error {
	now, err := r.a.Node(ctx, r.n.Name)
	if err != nil {
		return err
	}
	var over []string
	for res, n := range excessNow(r.n.Allocatable, now.Pods, nil) {
		over = append(over, fmt.Sprintf("%d %s more than the new config offers", n, res))
	}
	if len(over) > 0 && !r.n.DRA {
		slices.Sort(over)
		return fmt.Errorf("pods still hold %s; drain them first", strings.Join(over, ", "))
	}
	return nil
}

// switchLabels writes the configs, records the labels' old values and
// sets the new ones. previous is nil when nothing was switched yet.
func (r *nodeRun) switchLabels(ctx context.Context, now change.NodeNow) (previous map[string]*string, err error) {
	r.begin(ctx, "switch", describeLabels(r.n.Labels))
	if err := r.a.EnsureConfigs(ctx, r.set, r.n); err != nil {
		return nil, err
	}
	previous = map[string]*string{}
	set := map[string]*string{}
	for _, l := range r.n.Labels {
		if v, ok := now.Labels[l.Key]; ok {
			previous[l.Key] = &v
		} else {
			previous[l.Key] = nil
		}
		set[l.Key] = &l.To
	}
	record, err := json.Marshal(previous)
	if err != nil {
		return nil, err
	}
	rec := string(record)
	return previous, r.a.PatchNode(ctx, r.n.Name, change.NodePatch{Labels: set, Annotations: map[string]*string{wellknown.AnnotationPreviousLabels: &rec}})
}

func describeLabels(ls []change.Label) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s %q -> %q", l.Key, l.From, l.To)
	}
	return strings.Join(parts, ", ")
}

// rollback restores the recorded labels after a failed switch, waits for
// the operator and the allocatable the node had, and unfences; if any of
// that fails the node stays fenced.
func (r *nodeRun) rollback(ctx context.Context, previous map[string]*string, cause error) NodeResult {
	cctx, cancel := cleanupContext(ctx, r.o.SwitchTimeout)
	defer cancel()
	var back []change.Label
	for _, l := range r.n.Labels {
		from := ""
		if v := previous[l.Key]; v != nil {
			from = *v
		}
		back = append(back, change.Label{Key: l.Key, From: l.To, To: from})
	}
	r.begin(cctx, "rollback", describeLabels(back))
	stale := ""
	now, err := r.a.Node(cctx, r.n.Name)
	if err == nil {
		stale = now.Labels[gpuoperator.MIGConfigStateLabel]
		err = r.a.PatchNode(cctx, r.n.Name, change.NodePatch{Labels: previous})
	}
	if err == nil {
		_, err = r.wait(cctx, back, r.res.AllocatableBefore, stale)
	}
	if err == nil {
		err = r.finish(cctx)
	}
	if err != nil {
		r.a.Event(cctx, r.n.Name, true, "GPUPackRollbackFailed", fmt.Sprintf("change set %s: rollback failed, the node stays fenced: %v", r.set.Hash, err))
		return r.end(cctx, OutcomeRollbackFailed, fmt.Errorf("%w; rollback failed, the node stays cordoned for a person to look at: %v", cause, err))
	}
	return r.end(cctx, OutcomeRolledBack, cause)
}

var errTimeout = errors.New("timed out")
