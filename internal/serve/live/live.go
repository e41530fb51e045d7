// Package live is the engine of `gpupack serve` on a real cluster: it keeps
// the cluster's snapshot current with informers, reads each new hour of
// DCGM accounting from Prometheus once (pushed down to PromQL, a few
// numbers per device-hour) and the current partial hour at every refresh,
// keeps a sliding window of those buckets, and from them gives the report,
// the pending pods' diagnoses, the plan and the counters that /metrics
// serves. Its memory and its cost per refresh are bounded by the window,
// not by how long it has run.
//
// It is an edge: it talks to Prometheus and the apiserver.
package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// Source reads pushed-down accounting and kube-state-metrics' pod
// life-cycle times, both by bucket, and the XIDs each GPU reported in a
// window (promql.Source does).
type Source interface {
	LoadBuckets(ctx context.Context, w usage.Window, bucket time.Duration) ([]usage.Bucket, error)
	LoadPodTimes(ctx context.Context, w usage.Window, bucket time.Duration) ([]*promql.PodTimes, error)
	LoadHealth(ctx context.Context, w usage.Window) ([]usage.DeviceHealth, error)
	// LoadEvidence reads what limits each running pod over the window
	// (promql.Source.LoadEvidence).
	LoadEvidence(ctx context.Context, w usage.Window) ([]usage.Evidence, error)
}

// Options configure an Engine.
type Options struct {
	// Window is the sliding window accounted (default 7 days); Bucket the
	// length of one bucket (default 1 h); Step the evaluation step of the
	// pushed-down queries (default 30 s); Refresh how often the engine
	// reads again (default 1 min). Each read from the Source must answer
	// within readTimeout (four fifths of Refresh), and the data goes
	// stale, for Ready, after staleAfter.
	Window, Bucket, Step, Refresh time.Duration
	// Pricing prices devices; its NodeLabels are filled from the cluster.
	Pricing usage.Pricing
	// Plan are the planner's options; zero is plan.DefaultOptions.
	Plan plan.Options
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Log receives progress and errors, one line each; nil discards.
	Log io.Writer
	// Source names the data's origin on the page, such as "Prometheus
	// http://prometheus:9090 and the cluster at https://...".
	Source string
	// MetricsPerPod serves the pods' GPU-second and cost counters with a
	// series per pod; otherwise a series per namespace and workload, so
	// that the series do not grow with every pod seen in the window.
	MetricsPerPod bool
}

func (o *Options) defaults() {
	if o.Window <= 0 {
		o.Window = 7 * 24 * time.Hour
	}
	if o.Bucket <= 0 {
		o.Bucket = time.Hour
	}
	if o.Step <= 0 {
		o.Step = 30 * time.Second
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Plan == (plan.Options{}) {
		o.Plan = plan.DefaultOptions()
	}
	if o.Pricing.Catalogue == nil {
		o.Pricing.Catalogue = gpu.Default()
	}
}

// Check refuses options that cannot run, before anything starts.
func (o Options) Check() error {
	o.defaults()
	switch {
	case o.Bucket%o.Step != 0:
		return fmt.Errorf("bucket %s is not a whole number of steps of %s; use a step that divides it, such as 30s", o.Bucket, o.Step)
	case o.Window%o.Bucket != 0:
		return fmt.Errorf("window %s is not a whole number of %s buckets; use a window such as 168h", o.Window, o.Bucket)
	case o.Window < o.Bucket:
		return fmt.Errorf("window %s is shorter than one bucket of %s", o.Window, o.Bucket)
	}
	return nil
}

// partialStart is the start of the partial bucket at now: the complete
// buckets end there.
func (o Options) partialStart(now time.Time) time.Time {
	return now.Add(-o.settle()).Truncate(o.Bucket)
}

// settle is how long after a bucket ends its last scrapes may still be
// arriving: until then it is read again as the partial one.
func (o Options) settle() time.Duration { return 2 * o.Step }

// readTimeout is how long one refresh's reads may take once the window is
// read: four fifths of the refresh interval, so that a hung Prometheus
// fails the refresh (and Ready says so) before the next tick is due,
// rather than after the HTTP client's own timeout. The first read of the
// window (or a catch-up after a long outage) reads up to a week a day at a
// time and keeps each day it read: there each read from the Source gets
// this deadline of its own instead, so that a slow but working Prometheus
// still gets through, while a hung one still fails at the first read.
func (o Options) readTimeout() time.Duration { return o.Refresh * 4 / 5 }

// staleAfter is how old the data may be before Ready says the engine is
// not ready: three refresh intervals, plus one step because the data's end
// is the last whole step.
func (o Options) staleAfter() time.Duration { return 3*o.Refresh + o.Step }

// loadChunk is how much history one read asks for: a day.
const loadChunk = 24 * time.Hour

// forgetAfter is how long a pod or node keeps its counters after the last
// hour that named it left the window: long enough for Prometheus to scrape
// their last values.
const forgetAfter = time.Hour

// Engine is one running serve engine. Its methods are safe for concurrent
// use once New has returned.
type Engine struct {
	o       Options
	src     Source
	watcher *kube.Watcher

	// refreshMu serialises refreshes; mu guards what they publish.
	refreshMu sync.Mutex
	store     *store

	mu      sync.Mutex
	state   State
	current *app.View
}

// State is what the engine knows as of its last refresh.
type State struct {
	// AsOf is the end of the last good refresh of usage; zero before the
	// first. Err is the last refresh's error ("" when it went well) and
	// ErrAt when it happened.
	AsOf  time.Time
	Err   string
	ErrAt time.Time
	// KubeAsOf is when the cluster's snapshot was last taken.
	KubeAsOf time.Time
	// Report is the accounting of the window, from the buckets, with
	// Health in it.
	Report *usage.Report
	// Health is, per GPU that reported XIDs in the window, its XIDs: nil
	// before the first good read, empty when no GPU reported any.
	Health []usage.DeviceHealth
	// Hours are the fleet's totals per bucket, oldest first, the current
	// partial bucket last.
	Hours []app.Hour
	// Snapshot is the cluster as the informers see it, with its
	// warnings.
	Snapshot *cluster.Snapshot
	Warnings []string
	// Diagnosis explains the pending GPU pods; Created and Failures have,
	// by pod key, when each pending pod was created and the scheduler's
	// last word on it.
	Diagnosis *diagnose.Report
	Created   map[string]time.Time
	Failures  map[string]kube.SchedulingFailure
	// Startup is the bound GPU pods' start-up as the live cluster shows it
	// (conditions, the kubelet's Pulled events, model storage), merged
	// over kube-state-metrics' times in the report.
	Startup []usage.PodEvents
	// Plan is the plan for the cluster and its measured usage.
	Plan *plan.Plan
	// Counters are what /metrics serves.
	counters counters
}

// New makes an engine on a Prometheus source and a Kubernetes client;
// Start begins it.
func New(o Options, src Source, client kubernetes.Interface) (*Engine, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	o.defaults()
	e := &Engine{o: o, src: timedSource{src, o.readTimeout()}, store: newStore(o.Bucket, o.Window, o.MetricsPerPod)}
	if client != nil {
		e.watcher = kube.NewWatcher(client, o.Pricing.Catalogue)
	}
	return e, nil
}

// Start syncs the informers (failing if the apiserver does not answer or
// refuses gpupack the list and watch it needs), then starts, in the
// background, the first refresh, which reads the whole window, and the
// refresh loop, until ctx ends; Ready says when the first is done. A refresh that fails leaves the last good state in place, with its
// error beside it, and is tried again at the next tick; the informers
// resume their watches by themselves when the apiserver comes back.
func (e *Engine) Start(ctx context.Context) error {
	if e.watcher != nil {
		if err := e.watcher.Start(ctx); err != nil {
			return err
		}
	}
	go func() {
		fmt.Fprintf(e.o.Log, "serve: reading %s of accounting from Prometheus in %s buckets\n", e.o.Window, e.o.Bucket)
		begun := time.Now()
		e.Refresh(ctx)
		if st := e.State(); st.Err == "" {
			fmt.Fprintf(e.o.Log, "serve: read the window in %s; refreshing every %s\n", time.Since(begun).Round(time.Millisecond), e.o.Refresh)
		}
		t := time.NewTicker(e.o.Refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				e.Refresh(ctx)
			}
		}
	}()
	return nil
}

// Refresh reads what is new and publishes the new state. It is called by
// the loop; tests call it to step the engine. Its reads from the Source
// end by readTimeout (see there); diagnosing and planning do not read
// Prometheus and run on ctx alone.
func (e *Engine) Refresh(ctx context.Context) {
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	now := e.o.Now().UTC()
	next := e.snapshotState(now)
	readCtx := ctx
	if e.store.caughtUp(e.o.partialStart(now)) {
		var cancel context.CancelFunc
		readCtx, cancel = context.WithTimeout(ctx, e.o.readTimeout())
		defer cancel()
	}
	err := e.readUsage(readCtx, now, &next)
	if err != nil {
		next.Err, next.ErrAt = err.Error(), now
		fmt.Fprintf(e.o.Log, "serve: refresh at %s: %v\n", now.Format(time.RFC3339), err)
	} else if err := e.readHealth(readCtx, &next); err != nil {
		// After a usage read that failed, health is not asked again: the
		// error is the same.
		next.Err, next.ErrAt = "GPU health: "+err.Error(), now
		fmt.Fprintf(e.o.Log, "serve: refresh at %s: GPU health: %v\n", now.Format(time.RFC3339), err)
	}
	next.Report = withHealth(next.Report, next.Health)
	e.diagnoseAndPlan(ctx, &next)
	if next.Err != "" {
		next.ErrAt = now
	}
	v := e.view(next, now)
	e.mu.Lock()
	e.state, e.current = next, v
	e.mu.Unlock()
}

// View is the dashboard's view as of the last refresh; nil before the
// first. It implements serve.Provider.
func (e *Engine) View() *app.View {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current
}

// view builds the immutable view of a state.
func (e *Engine) view(st State, now time.Time) *app.View {
	v := &app.View{Source: e.o.Source, AsOf: st.AsOf, Err: st.Err, Report: st.Report, Hours: st.Hours, Plan: st.Plan, Warnings: st.Warnings}
	if st.Err != "" {
		at := st.ErrAt
		v.ErrAt = &at
	}
	if st.Report != nil {
		v.Start, v.End = st.Report.Start, st.Report.End
	}
	if d := st.Diagnosis; d != nil {
		v.Nodes, v.GPUs = d.Nodes, d.GPUs
		v.Warnings = append(append([]string(nil), v.Warnings...), d.Warnings...)
		v.Pending = app.PendingPods(d.Findings, st.Created, st.Failures, now)
		v.Failed = d.Failures
		v.QueueWait = app.QueueWait(st.Report, st.Snapshot, d, st.Created, now)
	}
	if st.Health != nil {
		v.Health = planout.HealthOf(st.Health, st.Plan)
	}
	if st.Plan != nil && st.Snapshot != nil {
		files, err := planout.Files(st.Plan, st.Snapshot)
		if err != nil {
			v.Err = joinErr(v.Err, fmt.Sprintf("plan files: %v", err))
		}
		for _, f := range files {
			v.PlanFiles = append(v.PlanFiles, app.PlanFile{Name: f.Name, Data: f.Data})
		}
	}
	return v
}

// snapshotState starts the next state from the last one, so that what a
// failed read leaves alone stays as it was.
func (e *Engine) snapshotState(now time.Time) State {
	e.mu.Lock()
	next := e.state
	e.mu.Unlock()
	next.Err, next.ErrAt = "", time.Time{}
	if e.watcher == nil {
		return next
	}
	st, err := e.watcher.State()
	if err == nil {
		next.Snapshot, next.Warnings = st.Snapshot, st.Warnings
		next.Failures, next.Created = st.SchedulingFailures, st.Created
		next.KubeAsOf = now
		if startup, warnings, err := e.watcher.Startup(); err == nil {
			next.Startup = startup
			next.Warnings = append(slices.Clip(next.Warnings), warnings...)
		}
	}
	return next
}

// readUsage brings the store up to now: it retires the hours that left the
// window, reads the complete hours not read yet (all of them at the first
// refresh), reads again the recent ones that came back empty while the
// cluster has GPU nodes, reads the partial one, and accounts the window:
// the complete hours once (store.account), the partial hour at every
// refresh.
func (e *Engine) readUsage(ctx context.Context, now time.Time, next *State) error {
	s := e.store
	cur := e.o.partialStart(now)
	from := cur.Add(-e.o.Window)
	s.slide(from, from.Add(-forgetAfter))
	pricing := e.o.Pricing
	if next.Snapshot != nil {
		pricing = app.PricedNodes(pricing, next.Snapshot)
	}
	gpuNodes := gpuNodeCount(next.Snapshot)
	s.nodes = nil
	if next.Snapshot != nil {
		s.nodes = map[string]bool{}
		for _, n := range next.Snapshot.Nodes {
			s.nodes[n.Name] = true
		}
	}
	var errs []error
	if err := e.readHours(ctx, pricing, cur, gpuNodes); err != nil {
		errs = append(errs, err)
	} else if err := e.rereadEmpty(ctx, pricing, now, gpuNodes); err != nil {
		errs = append(errs, err)
	}
	end := now.Truncate(e.o.Step)
	s.partial = nil
	if end.After(cur) && s.loadedTo.Equal(cur) {
		if err := e.readPartial(ctx, pricing, cur, end); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// The state keeps the last good report; the counters too.
		return errors.Join(errs...)
	}
	if len(s.hours) == 0 && s.partial == nil {
		return nil
	}
	// kube-state-metrics' pod times, for the start-up phases, joined
	// from the hours' (read with them, once), over the live cluster's.
	pods := usage.MergePodEvents(s.podTimes(), next.Startup)
	a, err := s.account(from, end)
	if err != nil {
		return fmt.Errorf("accounting %s..%s: %w", from.Format(time.RFC3339), end.Format(time.RFC3339), err)
	}
	r, err := a.Report(pricing, pods, nil, 0)
	if err != nil {
		return err
	}
	// What limits each running pod, over the whole window, as report
	// judges it.
	ev, err := e.src.LoadEvidence(ctx, usage.Window{Start: from, End: end, Step: e.o.Step})
	if err != nil {
		return fmt.Errorf("running pods' evidence %s..%s: %w", from.Format(time.RFC3339), end.Format(time.RFC3339), err)
	}
	r.JudgeBottlenecks(ev)
	r.CompareWithField()
	if next.Snapshot != nil {
		r.WarnUnattributedClaims(usage.ClaimHolds(next.Snapshot, pods))
		r.WarnPodsNotInCluster(next.Snapshot)
	}
	r.Quality.Warnings = append(r.Quality.Warnings, s.emptyHoursWarning()...)
	next.Report = r
	next.AsOf = end
	next.Hours = next.Hours[:0:0]
	for _, h := range s.sorted() {
		next.Hours = append(next.Hours, h.totals.fleet)
	}
	next.counters = s.counters(workloadsOf(r))
	return nil
}

// workloadsOf is each pod's workload as the report knows it from
// kube-state-metrics' owners or the live cluster; a pod whose workload
// is its own name (its owner is not known) has none.
func workloadsOf(r *usage.Report) map[podKey]string {
	out := make(map[podKey]string, len(r.Pods))
	for _, p := range r.Pods {
		if w := p.Startup.Workload; w != "" && w != p.Pod {
			out[podKey{p.Namespace, p.Pod}] = w
		}
	}
	return out
}

// readHours reads the complete hours from the store's loadedTo up to cur,
// a day at a time, so that a long first read says how far it is and keeps
// what it read if it fails. An hour without any DCGM series while the
// cluster has GPU nodes is marked empty, for rereadEmpty.
func (e *Engine) readHours(ctx context.Context, pricing usage.Pricing, cur time.Time, gpuNodes int) error {
	s := e.store
	total := cur.Sub(s.loadedTo)
	for s.loadedTo.Before(cur) {
		w := usage.Window{Start: s.loadedTo, End: s.loadedTo.Add(loadChunk), Step: e.o.Step}
		if w.End.After(cur) {
			w.End = cur
		}
		bs, err := e.src.LoadBuckets(ctx, w, e.o.Bucket)
		if err != nil {
			return err
		}
		times, err := e.src.LoadPodTimes(ctx, w, e.o.Bucket)
		if err != nil {
			return err
		}
		byHour := map[time.Time][]usage.Bucket{}
		for _, b := range bs {
			byHour[b.Start] = append(byHour[b.Start], b)
		}
		timesAt := map[time.Time]*promql.PodTimes{}
		for _, pt := range times {
			timesAt[pt.Start] = pt
		}
		for t := w.Start; t.Before(w.End); t = t.Add(e.o.Bucket) {
			h, err := e.accountHour(pricing, t, t.Add(e.o.Bucket), byHour[t], gpuNodes)
			if err != nil {
				return err
			}
			h.pods = timesAt[t]
			s.hours[t] = h
			s.loadedTo = t.Add(e.o.Bucket)
		}
		if total > loadChunk {
			done := total - cur.Sub(s.loadedTo)
			fmt.Fprintf(e.o.Log, "serve: read %s of %s (%d%%)\n", done, total, int(100*done/total))
		}
	}
	return nil
}

// emptyRereadFor is how long after its end a complete hour that came back
// without any DCGM series, while the cluster has GPU nodes, is read again
// at each refresh: a store of a federating query layer that answered late,
// or a remote write that caught up, fills it then. After that the hour
// stays as read, its GPU time unsampled, and the report says so.
const emptyRereadFor = time.Hour

// rereadEmpty reads again the complete hours marked empty that ended less
// than emptyRereadFor before now, and keeps each that has series now.
func (e *Engine) rereadEmpty(ctx context.Context, pricing usage.Pricing, now time.Time, gpuNodes int) error {
	s := e.store
	for _, h := range s.sorted() {
		if h == s.partial || !h.empty || !now.Before(h.end.Add(emptyRereadFor)) {
			continue
		}
		w := usage.Window{Start: h.start, End: h.end, Step: e.o.Step}
		bs, err := e.src.LoadBuckets(ctx, w, e.o.Bucket)
		if err != nil || len(bs) == 0 {
			return err
		}
		times, err := e.src.LoadPodTimes(ctx, w, e.o.Bucket)
		if err != nil {
			return err
		}
		again, err := e.accountHour(pricing, h.start, h.end, bs, gpuNodes)
		if err != nil {
			return err
		}
		if len(times) == 1 {
			again.pods = times[0]
		}
		s.replace(again)
	}
	return nil
}

// readPartial reads and accounts the partial hour [cur, end).
func (e *Engine) readPartial(ctx context.Context, pricing usage.Pricing, cur, end time.Time) error {
	s := e.store
	w := usage.Window{Start: cur, End: end, Step: e.o.Step}
	bs, err := e.src.LoadBuckets(ctx, w, end.Sub(cur))
	if err != nil {
		return err
	}
	times, err := e.src.LoadPodTimes(ctx, w, end.Sub(cur))
	if err != nil {
		return err
	}
	h, err := e.account(pricing, cur, end, s.withUnseen(bs, cur, end.Sub(cur), e.o.Step))
	if err != nil {
		return err
	}
	if len(times) == 1 {
		h.pods = times[0]
	}
	s.partial = h
	return nil
}

// accountHour accounts a complete hour as read, with the devices seen
// before and absent from it counted as unsampled (store.withUnseen), and
// marks it empty where it has no series while the cluster has GPU nodes.
func (e *Engine) accountHour(pricing usage.Pricing, start, end time.Time, bs []usage.Bucket, gpuNodes int) (*hour, error) {
	empty := len(bs) == 0 && gpuNodes > 0
	h, err := e.account(pricing, start, end, e.store.withUnseen(bs, start, end.Sub(start), e.o.Step))
	if err != nil {
		return nil, err
	}
	h.empty = empty
	return h, nil
}

// gpuNodeCount is how many nodes of the snapshot have GPUs; 0 without a
// snapshot.
func gpuNodeCount(snap *cluster.Snapshot) int {
	n := 0
	if snap != nil {
		for _, node := range snap.Nodes {
			if len(node.GPUs) > 0 {
				n++
			}
		}
	}
	return n
}

// account accounts one bucket of time once, for the chart and the
// counters.
func (e *Engine) account(pricing usage.Pricing, start, end time.Time, bs []usage.Bucket) (*hour, error) {
	r, err := usage.AccountBuckets(usage.BucketInput{Start: start, End: end, Buckets: bs, Pricing: pricing})
	if err != nil {
		return nil, fmt.Errorf("accounting %s..%s: %w", start.Format(time.RFC3339), end.Format(time.RFC3339), err)
	}
	return &hour{start: start, end: end, buckets: bs, totals: hourTotals{fleet: app.HourOf(start, r), c: fromReport(r)}}, nil
}

// diagnoseAndPlan explains the pending pods of the snapshot with the
// measured usage, and plans; a failure is kept beside the last good ones.
func (e *Engine) diagnoseAndPlan(ctx context.Context, next *State) {
	if next.Snapshot == nil {
		return
	}
	var facts *usage.Facts
	if next.Report != nil {
		facts = next.Report.Facts()
	}
	rep, err := diagnose.DiagnoseContext(ctx, next.Snapshot, facts)
	if err != nil {
		next.Err = joinErr(next.Err, fmt.Sprintf("diagnose: %v", err))
	} else {
		next.Diagnosis = rep
	}
	p, err := plan.Make(ctx, next.Snapshot, facts, e.o.Plan)
	if err != nil {
		next.Err = joinErr(next.Err, fmt.Sprintf("plan: %v", err))
	} else {
		next.Plan = p
	}
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// State returns the state as of the last refresh. Callers must not modify
// it.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// Ready says why the engine cannot serve yet, or nil: it needs one good
// read of the window and, with a cluster, a snapshot; the last refresh
// must have gone well, and its data must be newer than staleAfter.
func (e *Engine) Ready() error {
	st := e.State()
	switch {
	case st.AsOf.IsZero() && st.Err != "":
		return fmt.Errorf("no accounting read yet: %s", st.Err)
	case st.AsOf.IsZero():
		return errors.New("no accounting read yet: the first refresh is running")
	case e.watcher != nil && st.Snapshot == nil:
		return errors.New("no cluster snapshot yet")
	case st.Err != "":
		return fmt.Errorf("last refresh at %s failed (serving data as of %s): %s", st.ErrAt.Format(time.RFC3339), st.AsOf.Format(time.RFC3339), st.Err)
	}
	if age := e.o.Now().Sub(st.AsOf); age > e.o.staleAfter() {
		return fmt.Errorf("the data is %s old (as of %s), older than %s (3 refresh intervals of %s and a step): no refresh has finished since; see the log for the one running",
			age.Round(time.Second), st.AsOf.Format(time.RFC3339), e.o.staleAfter(), e.o.Refresh)
	}
	return nil
}

// timedSource gives each read from a Source a deadline of its own.
type timedSource struct {
	src     Source
	timeout time.Duration
}

func (t timedSource) LoadBuckets(ctx context.Context, w usage.Window, bucket time.Duration) ([]usage.Bucket, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.src.LoadBuckets(ctx, w, bucket)
}

func (t timedSource) LoadPodTimes(ctx context.Context, w usage.Window, bucket time.Duration) ([]*promql.PodTimes, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.src.LoadPodTimes(ctx, w, bucket)
}

func (t timedSource) LoadHealth(ctx context.Context, w usage.Window) ([]usage.DeviceHealth, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.src.LoadHealth(ctx, w)
}

func (t timedSource) LoadEvidence(ctx context.Context, w usage.Window) ([]usage.Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.src.LoadEvidence(ctx, w)
}

// pendingGPUPods counts the pending GPU pods by namespace and cause, with
// the longest wait of each, for /metrics.
func pendingGPUPods(st State, now time.Time) map[[2]string]*pendingStat {
	out := map[[2]string]*pendingStat{}
	if st.Diagnosis == nil {
		return out
	}
	for _, f := range st.Diagnosis.Findings {
		if f.Cause == "" || f.Workload != nil {
			continue // skipped, or a workload without pods
		}
		key, _ := cluster.ParsePodKey(f.Pod)
		k := [2]string{key.Namespace, string(f.Cause)}
		p := out[k]
		if p == nil {
			p = &pendingStat{}
			out[k] = p
		}
		p.pods++
		if c, ok := st.Created[f.Pod]; ok {
			p.maxWait = max(p.maxWait, now.Sub(c).Seconds())
			p.waitKnown = true
		}
	}
	return out
}

type pendingStat struct {
	pods      int
	maxWait   float64
	waitKnown bool
}
