package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/reclaim"
	"github.com/gpupack/gpupack/usage"
)

// ReclaimRequest names where reclaim reads the cluster, its usage and
// its policy.
type ReclaimRequest struct {
	// Cluster is the live cluster or the demo (a snapshot file has no
	// owners to act on).
	Cluster Cluster
	// From is where usage is measured (its Window is set here); no
	// Prometheus with the demo.
	From Measurement
	// Policy is the policy file; "" takes the demo's with the demo and
	// reclaim.DefaultPolicy with a live cluster.
	Policy string
	// Now is the detection's time (time.Now when zero; the demo's end
	// with the demo).
	Now time.Time
}

// Detection is a reclaim detection with the accounting it read.
type Detection struct {
	Set    *reclaim.Set
	Policy *reclaim.Policy
	Report *usage.Report
}

// LoadReclaimPolicy reads a policy file, or gives the demo's or the
// default.
func LoadReclaimPolicy(path string, isDemo bool) (*reclaim.Policy, error) {
	switch {
	case path != "":
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		return reclaim.ParsePolicy(data, path)
	case isDemo:
		return reclaim.ParsePolicy(demo.ReclaimPolicy(), demo.ReclaimPolicyName)
	}
	return reclaim.DefaultPolicy(), nil
}

// DetectReclaim measures the window the policy's longest idle window
// needs (and one hour more, so that a pod held for all of it shows), reads
// the running GPU pods with their owners, and detects the candidates.
// Warnings go to stderr.
func DetectReclaim(ctx context.Context, req ReclaimRequest, stderr io.Writer) (*Detection, error) {
	if req.Cluster.Snapshot != "" {
		return nil, errors.New("--snapshot: a snapshot file has no owners to reclaim from; give --kubeconfig or --live (or nothing, for the demo)")
	}
	pol, err := LoadReclaimPolicy(req.Policy, req.Cluster.IsDemo())
	if err != nil {
		return nil, err
	}
	in, err := reclaimInput(ctx, req, pol, stderr)
	if err != nil {
		return nil, err
	}
	set := reclaim.Detect(*in, pol)
	for i := range set.Candidates {
		set.Candidates[i].Evidence.LoadP95Seconds = LoadP95(in.Report, set.Candidates[i].Pods)
	}
	for _, w := range set.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return &Detection{Set: set, Policy: pol, Report: in.Report}, nil
}

// reclaimInput reads detection's input from the demo or the live cluster.
func reclaimInput(ctx context.Context, req ReclaimRequest, pol *reclaim.Policy, stderr io.Writer) (*reclaim.Input, error) {
	if req.Cluster.IsDemo() {
		return demoReclaimInput(ctx, stderr)
	}
	if req.From.Prometheus == "" {
		return nil, errors.New("--prometheus: reclaim measures idleness on the GPU; give the Prometheus that scrapes dcgm-exporter")
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	s, _, err := req.Cluster.Load(ctx, nil, "", stderr)
	if err != nil {
		return nil, err
	}
	client, err := kube.NewClient(req.Cluster.Kubeconfig)
	if err != nil {
		return nil, err
	}
	world, err := kube.ReadReclaim(ctx, client, isGPUPod)
	if err != nil {
		return nil, err
	}
	setGPUs(world.Pods, s)
	m, err := reclaimWindow(req, pol, now)
	if err != nil {
		return nil, err
	}
	m.Pricing = PricedNodes(m.Pricing, s)
	r, err := Measure(ctx, m)
	if err != nil {
		return nil, err
	}
	in := &reclaim.Input{Now: now, Report: r, Pods: world.Pods, Owners: world.Owners, Namespaces: world.Namespaces, Warnings: world.Warnings}
	if in.CPUCores, err = measureCPU(ctx, m); err != nil {
		in.Warnings = append(in.Warnings, "CPU use unknown, so GPU-idle pods are not told apart from CPU-busy ones: "+err.Error())
	}
	return in, nil
}

// reclaimWindow is the measurement of the policy's longest idle window
// and one hour more, ending now, read raw or in hourly buckets as
// Accounting auto chooses for its length, priced by the catalogue when
// no prices are given.
func reclaimWindow(req ReclaimRequest, pol *reclaim.Policy, now time.Time) (Measurement, error) {
	m := req.From
	if m.Pricing.Catalogue == nil {
		cat, err := LoadCatalogue(req.Cluster.Catalogue)
		if err != nil {
			return m, err
		}
		m.Pricing.Catalogue = cat
	}
	length := pol.MaxIdleFor() + time.Hour
	hourly, err := AccountingAuto.Hourly(true, length, hourlyStep)
	if err != nil {
		return m, err
	}
	step := usage.DefaultStep(length)
	if hourly {
		step = hourlyStep
	}
	m.Window, m.Hourly = LatestWindow(now, length, step, hourly), hourly
	return m, nil
}

// demoReclaimInput is the demo world at the end of its week.
func demoReclaimInput(ctx context.Context, stderr io.Writer) (*reclaim.Input, error) {
	s, _, err := (&Cluster{}).Load(ctx, demo.Cluster(), demo.ClusterName, stderr)
	if err != nil {
		return nil, err
	}
	pods, owners, namespaces, err := demo.ReclaimInput(s)
	if err != nil {
		return nil, err
	}
	m, err := demo.Measure()
	if err != nil {
		return nil, err
	}
	return &reclaim.Input{Now: m.Week.End, Report: m.Week, Pods: pods, Owners: owners, Namespaces: namespaces}, nil
}

// measureCPU reads the pods' mean CPU use over m's window from cAdvisor's
// series in the same store.
func measureCPU(ctx context.Context, m Measurement) (map[string]float64, error) {
	src, err := m.open()
	if err != nil {
		return nil, err
	}
	return src.CPUCores(ctx, m.Window.End, m.Window.End.Sub(m.Window.Start))
}

// isGPUPod says whether a pod asks for a GPU, as the snapshot reads it.
func isGPUPod(p *corev1.Pod) bool {
	cp, _ := kube.ConvertPod(p)
	return cp != nil && cp.WantsGPU()
}

// setGPUs gives each pod the GPUs it holds in the snapshot: its devices'
// shares, else its request.
func setGPUs(pods []reclaim.PodState, s *cluster.Snapshot) {
	byKey := make(map[string]*cluster.Pod, len(s.Pods))
	for _, p := range s.Pods {
		byKey[p.Key()] = p
	}
	for i := range pods {
		if p := byKey[pods[i].Key()]; p != nil {
			pods[i].GPUs = p.HeldGPUs()
		}
	}
}

// ReclaimOptions say what a reclaim run may do.
type ReclaimOptions struct {
	// ApprovedBy, when set, approves every candidate of the set (the CLI's
	// --approve, which names the set's hash): explicit approval, the only
	// one that lets a bare pod be evicted.
	ApprovedBy string
	// Approvals approve single candidates by ID, each with who approved
	// (the controller's approvals ConfigMap): explicit too.
	Approvals map[string]string
	// Notify writes the notices of candidates not yet notified.
	Notify bool
	// Webhook, when set, receives each notice as a JSON POST.
	Webhook func(ctx context.Context, n Notification) error
	// Recheck measures the candidate again just before acting and fails
	// when it is no longer idle-held; nil skips (the demo).
	Recheck func(ctx context.Context, c reclaim.Candidate) error
	Now     func() time.Time
}

// Notification is what the webhook receives: the candidate with its
// evidence, the deadline, and how the owner snoozes or exempts it.
type Notification struct {
	Kind      string            `json:"kind"`
	Candidate reclaim.Candidate `json:"candidate"`
	Deadline  time.Time         `json:"deadline"`
	Snooze    string            `json:"snooze"`
	Exempt    string            `json:"exempt"`
}

// ReclaimOutcome is what a run did: the notices given, the records of
// the actions, and the candidates left waiting with why.
type ReclaimOutcome struct {
	Notified []string         `json:"notified"`
	Records  []reclaim.Record `json:"records"`
	Waiting  []Waiting        `json:"waiting"`
}

// Waiting is a candidate not acted on in this run.
type Waiting struct {
	ID     string `json:"id"`
	Owner  string `json:"owner"`
	Reason string `json:"reason"`
}

// Reclaim runs a detection's candidates: it notifies those not yet told
// (with Notify), and acts on those whose notice has run out, outside
// business hours, when approved — re-checking their idleness first and
// recording every action (and every refusal) in the ledger.
func Reclaim(ctx context.Context, d *Detection, a reclaim.Actuator, o ReclaimOptions) (*ReclaimOutcome, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	out := &ReclaimOutcome{}
	var errs []error
	wait := func(c reclaim.Candidate, why string) {
		out.Waiting = append(out.Waiting, Waiting{ID: c.ID, Owner: c.Owner.String(), Reason: why})
	}
	for _, c := range d.Set.Candidates {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		switch c.State {
		case reclaim.StateToNotify:
			if !o.Notify {
				wait(c, "not notified yet: run with --notify (the controller notifies by itself)")
				continue
			}
			if err := notify(ctx, d, a, o, c, now()); err != nil {
				errs = append(errs, err)
				continue
			}
			out.Notified = append(out.Notified, c.ID)
			continue
		case reclaim.StateNoticed:
			until := "its deadline"
			if c.Deadline != nil {
				until = c.Deadline.UTC().Format(time.RFC3339)
			}
			wait(c, "its notice runs until "+until)
			continue
		}
		by, ok := approver(c, o)
		switch {
		case d.Set.BusinessHours:
			wait(c, "business hours: reclaim acts outside them")
			continue
		case !ok:
			wait(c, "awaiting approval: approve the set's hash, or its ID in the approvals ConfigMap")
			continue
		}
		rec, err := act(ctx, d, a, o, c, by, now())
		if rec != nil {
			out.Records = append(out.Records, *rec)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// approver says who approved c: the set's approver, the approvals by ID,
// or the policy (never for a bare pod).
func approver(c reclaim.Candidate, o ReclaimOptions) (string, bool) {
	switch {
	case o.ApprovedBy != "":
		return o.ApprovedBy, true
	case o.Approvals[c.ID] != "":
		return o.Approvals[c.ID], true
	case c.AutoApproved && c.Restorable:
		return "policy (auto-approved " + string(c.Class) + ")", true
	}
	return "", false
}

func notify(ctx context.Context, d *Detection, a reclaim.Actuator, o ReclaimOptions, c reclaim.Candidate, at time.Time) error {
	deadline := at.Add(d.Policy.Classes[c.Class].Notice.D()).UTC()
	n := reclaim.Notice{ID: c.ID, Given: at.UTC(), Deadline: deadline, Summary: Summary(c)}
	if err := a.Notify(ctx, c, n); err != nil {
		return fmt.Errorf("notifying %s: %w", c.Owner, err)
	}
	if o.Webhook != nil {
		note := Notification{Kind: "gpupack.io/reclaim-notice", Candidate: c, Deadline: deadline,
			Snooze: "annotate it gpupack.io/reclaim-snooze-until=<RFC 3339 time>", Exempt: "label it gpupack.io/reclaim=never"}
		if err := o.Webhook(ctx, note); err != nil {
			return fmt.Errorf("notice webhook for %s (the annotation and Event are written): %w", c.Owner, err)
		}
	}
	return nil
}

// Summary is a candidate's evidence in one line.
func Summary(c reclaim.Candidate) string {
	ev := c.Evidence
	s := fmt.Sprintf("%s %s holds %.2f GPUs idle: %.1f%% mean GPU activity over the last %s, every hour under the floor; %.1f idle GPU-hours",
		c.Class, c.Owner, c.GPUs(), 100*ev.MeanActivity, ev.IdleFor.D(), ev.IdleGPUHours)
	if ev.LastActive != nil {
		s += ", last active " + ev.LastActive.UTC().Format(time.RFC3339)
	} else {
		s += ", not active in the window"
	}
	if ev.CostPerDay != nil {
		s += fmt.Sprintf(", %.2f a day", *ev.CostPerDay)
	}
	if ev.KeepAlive {
		s += fmt.Sprintf("; keep-alive bursts only (%.1f%% of samples)", 100*ev.BurstRatio)
	}
	return s
}

// act re-checks and pauses one candidate, saving its record.
func act(ctx context.Context, d *Detection, a reclaim.Actuator, o ReclaimOptions, c reclaim.Candidate, by string, at time.Time) (*reclaim.Record, error) {
	rec := reclaim.NewRecord(c, by, at, neighbours(d.Report, c))
	if o.Recheck != nil {
		if err := o.Recheck(ctx, c); err != nil {
			rec.Outcome, rec.Reason = reclaim.OutcomeRefused, err.Error()
			return &rec, save(ctx, a, rec)
		}
	}
	if err := a.Pause(ctx, c, &rec); err != nil {
		rec.Outcome, rec.Reason = reclaim.OutcomeFailed, err.Error()
		return &rec, errors.Join(fmt.Errorf("%s: %w", c.Owner, err), save(context.WithoutCancel(ctx), a, rec))
	}
	rec.Outcome = reclaim.OutcomeReclaimed
	return &rec, save(context.WithoutCancel(ctx), a, rec)
}

func save(ctx context.Context, a reclaim.Actuator, rec reclaim.Record) error {
	if err := a.Save(ctx, rec); err != nil {
		return fmt.Errorf("saving record %s in the ledger (the action's record is also on %s): %w", rec.ID, rec.Owner, err)
	}
	return nil
}

// neighbours are the pods that shared the candidate's GPUs in the window.
func neighbours(r *usage.Report, c reclaim.Candidate) []string {
	if r == nil {
		return nil
	}
	mine := map[string]bool{}
	for _, p := range c.Pods {
		mine[p.Key()] = true
	}
	var out []string
	for i := range r.Pods {
		p := &r.Pods[i]
		if !mine[p.Key()] {
			continue
		}
		for _, n := range p.SharedWith {
			if !mine[n] && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}
