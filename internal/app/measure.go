package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/util/mempolicy"
	"github.com/gpupack/gpupack/usage"
)

// Accounting says how a window of Prometheus data is accounted: raw reads
// every sample at the step (exact, for windows of hours); hourly has the
// query engine sum each hour and reads a few numbers per device-hour
// (windows of whole hours, days to months); auto chooses hourly for
// windows longer than AutoHourlyAbove or of more than usage.MaxSteps steps.
type Accounting string

// The accountings.
const (
	AccountingRaw    Accounting = "raw"
	AccountingHourly Accounting = "hourly"
	AccountingAuto   Accounting = "auto"
)

// AutoHourlyAbove is the window beyond which auto reads hourly buckets: a
// few hours of raw samples are exact and cheap; longer windows would pull
// every sample of every GPU into the process.
const AutoHourlyAbove = 6 * time.Hour

// Bucket is the span that the hourly path reads at once.
const Bucket = time.Hour

// Hourly decides, for report, plan and every other reader of a window,
// whether a window of this length and step is read in hourly buckets.
// Only Prometheus (or another PromQL store) sums hours; the demo is
// accounted from its samples.
func (a Accounting) Hourly(fromPrometheus bool, window, step time.Duration) (bool, error) {
	switch a {
	case AccountingRaw, "":
		return false, nil
	case AccountingHourly:
		if !fromPrometheus {
			return false, errors.New("--accounting hourly has Prometheus sum the hours; the demo is accounted from its samples: give --prometheus or use --accounting raw")
		}
		return true, nil
	case AccountingAuto:
		long := window > AutoHourlyAbove || step > 0 && window/step > usage.MaxSteps
		return fromPrometheus && long && window%Bucket == 0, nil
	}
	return false, fmt.Errorf("--accounting %q: want raw, hourly or auto", string(a))
}

// LatestWindow is the window of this length that ends at the last whole
// step before now, or at the last whole hour when read hourly (the current
// partial hour is left out).
func LatestWindow(now time.Time, length, step time.Duration, hourly bool) usage.Window {
	end := now.UTC().Truncate(step)
	if hourly {
		end = now.UTC().Truncate(Bucket)
	}
	return usage.Window{Start: end.Add(-length), End: end, Step: step}
}

// Measurement names a window to account and where to read it.
type Measurement struct {
	// Prometheus is the URL of the PromQL store holding dcgm-exporter's
	// series; "" accounts the embedded demo's scenario over Window.
	Prometheus string
	// MaxAnswer is the most bytes of one Prometheus answer that are
	// read (promql.Source.MaxAnswer); 0 is promql.DefaultMaxAnswer.
	MaxAnswer int64
	// Access is what each request to Prometheus carries besides its
	// query: credentials, headers, the CA (promql.Access).
	Access promql.Access
	// Selector narrows every query of dcgm-exporter's series
	// (promql.Source.Selector).
	Selector promql.Selector
	Window   usage.Window
	// Hourly reads the window in hourly buckets that the query engine
	// sums (Accounting.Hourly decides it); otherwise every sample.
	Hourly  bool
	Pricing usage.Pricing
	// Apps are application metrics by name (PromQL), shown beside the
	// pods they name.
	Apps map[string]string
	// Live holds pods' start-ups read from the live cluster
	// (kube.LoadStartup), merged over kube-state-metrics' pod times; nil
	// when none.
	Live []usage.PodEvents
}

// Measure accounts the window: the one path from a PromQL store, raw or
// hourly, or from the demo's scenario, to a usage.Report.
func Measure(ctx context.Context, m Measurement) (*usage.Report, error) {
	switch {
	case m.Prometheus == "":
		s, err := demo.Scenario(gpu.Default())
		if err != nil {
			return nil, err
		}
		return demo.Account(s, m.Window, m.Pricing)
	case m.Hourly:
		return measureHourly(ctx, m)
	}
	return measureRaw(ctx, m)
}

// open connects to m's PromQL store with its access, answer limit and
// selector.
func (m Measurement) open() (*promql.Source, error) {
	src, err := promql.Open(m.Prometheus, m.Access)
	if err != nil {
		return nil, err
	}
	src.MaxAnswer, src.Selector = m.MaxAnswer, m.Selector
	return src, nil
}

// measureRaw reads m's window of DCGM (and kube-state-metrics and
// application) series from Prometheus and accounts every sample. Node
// labels for price rules come from m.Pricing.NodeLabels when set (read
// from the live cluster), else from kube-state-metrics' kube_node_labels.
// m.Live holds pods' start-ups read from the live cluster
// (kube.LoadStartup), merged over kube-state-metrics' pod times
// (usage.MergePodEvents); nil when none.
func measureRaw(ctx context.Context, m Measurement) (*usage.Report, error) {
	src, err := m.open()
	if err != nil {
		return nil, err
	}
	d, err := src.Load(ctx, m.Window, m.Apps)
	if err != nil {
		return nil, err
	}
	pricing := m.Pricing
	if pricing.NodeLabels == nil {
		pricing.NodeLabels = d.NodeLabels
	}
	ev, err := src.LoadEvidence(ctx, m.Window)
	if err != nil {
		return nil, err
	}
	r, err := usage.Account(usage.Input{Window: m.Window, Pricing: pricing, Series: d.Series, App: d.App, Pods: withLive(d.Pods, m.Live)})
	if err != nil {
		return nil, err
	}
	judge(r, ev)
	return r, nil
}

// judge sets each pod's bottleneck verdict from the window's cAdvisor and
// DCGM evidence (promql.LoadEvidence, the same queries on the raw and
// hourly paths) and puts the cluster beside the field.
func judge(r *usage.Report, evidence []usage.Evidence) {
	r.JudgeBottlenecks(evidence)
	r.CompareWithField()
}

// measureHourly accounts m's window from hourly buckets that
// Prometheus computes (promql.LoadBuckets), never pulling raw samples:
// for windows of days to months. The window must start and end on whole
// hours. Node labels and live pods are as for measureRaw.
func measureHourly(ctx context.Context, m Measurement) (*usage.Report, error) {
	w, pricing, apps, live := m.Window, m.Pricing, m.Apps, m.Live
	src, err := m.open()
	if err != nil {
		return nil, err
	}
	acct, err := usage.NewBucketAccount(w.Start, w.End)
	if err != nil {
		return nil, err
	}
	// A command that runs once: its phases hand their memory back
	// between them when large, where serve's would take it again.
	src.Memory, acct.Memory = mempolicy.OneShot, mempolicy.OneShot
	// And it reads with the collector's margin lowered: the answers read
	// are garbage at once, and at GOGC's 100 the heap grew to twice the
	// account between collections, above the report's own peak.
	doneReading := acct.Memory.Reading()
	defer doneReading()
	// A day of buckets at a time: a month of a fleet is never held at once.
	// GPU health is read meanwhile: it is its own few queries, and
	// Prometheus answers them beside the buckets' instead of after them.
	var health []usage.DeviceHealth
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return src.StreamBuckets(gctx, w, Bucket, acct.Add) })
	g.Go(func() (err error) {
		health, err = src.LoadHealth(gctx, w)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	// The pods' times and application metrics are read after the
	// buckets, not beside them: they are a record per pod of the window
	// (50 MB for a month of 1,000 GPUs), which read beside the buckets
	// were held through the streaming, where the account is largest and
	// the answers in flight with it, and set gpupack's peak memory. The
	// memory that the streaming's answers took is handed back first:
	// kept, it stays resident, and the pods' answers (tens of MB each
	// for a month of a fleet) were laid beside it instead of in it.
	acct.Memory.HandBack(acct.Owners())
	d, err := src.LoadMeta(ctx, w, apps, Bucket)
	if err != nil {
		return nil, err
	}
	ev, err := src.LoadEvidence(ctx, w)
	if err != nil {
		return nil, err
	}
	doneReading()
	if pricing.NodeLabels == nil {
		pricing.NodeLabels = d.NodeLabels
	}
	r, err := acct.Report(pricing, withLive(d.Pods, live), d.App, Bucket)
	if err != nil {
		return nil, err
	}
	if p := src.BucketProvenance(); p.RecordedHours > 0 {
		r.Quality.Warnings = append(r.Quality.Warnings, fmt.Sprintf(
			"%d of %d hours read from gpupack's recording rules (gpupack:*:5m at step %s), the rest computed from the series; a recorded hour is the %s windows that end in it, up to %s before the hour",
			p.RecordedHours, p.RecordedHours+p.ComputedHours, w.Step, promql.RecordWindow, promql.RecordWindow))
		if p.HourlyWindows > 0 {
			r.Quality.Warnings = append(r.Quality.Warnings, fmt.Sprintf(
				"%d hourly windows read from gpupack's hourly recording rules (gpupack:*:1h) for the inside of the window, its ends from the %s ones: totals are those of the %s windows, but each hourly window counts in the hour it starts in, which it may overrun by up to an hour",
				p.HourlyWindows, promql.RecordWindow, promql.RecordWindow))
		}
	}
	r.Health = health
	judge(r, ev)
	return r, nil
}

// withLive merges the live cluster's pod start-ups over kube-state-metrics'
// pod times; without live ones, the history is taken as it is.
func withLive(history, live []usage.PodEvents) []usage.PodEvents {
	if len(live) == 0 {
		return history
	}
	return usage.MergePodEvents(history, live)
}
