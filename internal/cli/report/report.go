// Package report is the `gpupack report` verb: GPU-seconds allocated next
// to GPU-seconds active, idle cost and cost per active GPU-hour, from a
// Prometheus that scrapes dcgm-exporter or from the embedded demo.
// (gpupack serve keeps the same figures current as a service.)
//
// It only wires flags to app.Measure and formats the report; the hidden
// --serve flag answers scripts that still pass it with where the counters
// are served now.
package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/source/promql"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/cli/clio/sourceflag"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/usage"
)

type options struct {
	prometheus string
	maxAnswer  int64
	access     promql.Access
	selector   promql.Selector
	window     time.Duration
	step       time.Duration
	// windowSet and stepSet say that --window and --step were given, so
	// that a 0 given is refused rather than taken for the default.
	windowSet, stepSet bool
	end                string
	prices             string
	format             string
	demo               bool
	top                int
	app                []string
	serve              string
	kubeconfig         string
	live               bool
	accounting         string
	stderr             io.Writer
}

// NewCommand returns the report command.
func NewCommand(ctx context.Context) *cobra.Command {
	opts := &options{}
	cmd := &cobra.Command{
		Use:   "report",
		Short: "GPU-seconds allocated vs active, idle cost and cost per active GPU-hour",
		Long: `report accounts every GPU, MIG slice, pod, namespace and node over a window:
GPU-seconds allocated, active and idle while allocated, VRAM, power, cost per
allocated and per active GPU-hour, a usage pattern per pod, and start-up by
phase (scheduling, image pull, init, to first GPU use, first use to ready,
with the GPU time held meanwhile and its cost) per workload and per storage
path of the model weights (image, emptyDir download, PVC class, host path,
image volume, CSI driver).

With --prometheus it reads dcgm-exporter's DCGM_FI_* series (and
kube-state-metrics' pod times where present) with query_range; without it,
it runs on the embedded demo world's week in-process (a 7-day window at the
step that a week allows, unless --window or --step say otherwise).

With --kubeconfig or --live it also reads the live cluster: node labels for
--prices' nodeRules, and its GPU pods' start-ups (conditions, container
starts, the kubelet's image pulls, where model weights come from), which
win over kube-state-metrics' pod times.

The same figures as Prometheus counters, kept current, and a dashboard:
gpupack serve --prometheus URL.

--accounting says how Prometheus data is accounted: raw reads every sample
at --step (exact, for windows of hours); hourly has Prometheus sum each hour
with subqueries at --step and reads a few numbers per device-hour (windows
of whole hours, days to months); auto (the default) reads hourly for
windows longer than 6h or of more than 11000 steps. The JSON's
"accounting" says which ran.`,
		Example: `  gpupack report --demo
  gpupack report --prometheus http://prometheus:9090 --window 24h --format json
  gpupack report --prometheus http://prometheus:9090 --window 720h --accounting hourly
  gpupack report --prometheus http://prometheus:9090 --app-metric tokens='sum by (namespace, pod) (rate(vllm:generation_tokens_total[5m]))'
  gpupack report --prometheus http://prometheus:9090 --kubeconfig ~/.kube/config --prices prices.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.stderr = cmd.ErrOrStderr()
			opts.windowSet, opts.stepSet = cmd.Flags().Changed("window"), cmd.Flags().Changed("step")
			return run(ctx, opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.prometheus, "prometheus", "", "Prometheus URL; empty runs the embedded demo")
	sourceflag.AddMaxAnswer(f, &opts.maxAnswer)
	sourceflag.AddAccess(f, &opts.access)
	sourceflag.AddSelector(f, &opts.selector)
	f.DurationVar(&opts.window, "window", 0, "length of the window accounted, ending at --end (default 24h; the demo's week, 168h, for --demo)")
	f.DurationVar(&opts.step, "step", 0, "query step; each sample stands for one step (default 30s; for --demo the shortest that the window allows and that divides an hour: 60s for the week)")
	f.StringVar(&opts.end, "end", "", "end of the window, RFC 3339; default now (the demo's end for --demo)")
	f.StringVar(&opts.prices, "prices", "", "price file (YAML: currency, prices per model, nodeRules per node label)")
	f.StringVar(&opts.format, "format", "table", "output format: table, json, csv, or podusage (the usage file of gpupack diagnose --usage)")
	f.BoolVar(&opts.demo, "demo", false, "run on the embedded demo scenario (the default without --prometheus)")
	f.IntVar(&opts.top, "top", 10, "number of worst offenders listed per namespace and per pod (0 lists none)")
	f.StringArrayVar(&opts.app, "app-metric", nil, "NAME=PROMQL application metric shown beside the pods it names (repeatable)")
	f.StringVar(&opts.serve, "serve", "", "moved: gpupack serve --prometheus URL --listen ADDR serves the dashboard and the counters")
	_ = f.MarkHidden("serve")
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", clio.KubeconfigUsage+"; its node labels then select --prices' nodeRules, and its GPU pods' start-ups (image pulls, model storage) join kube-state-metrics'")
	f.StringVar(&opts.accounting, "accounting", string(app.AccountingAuto), "raw (every sample at --step), hourly (Prometheus sums each hour; whole hours) or auto (hourly beyond 6h or 11000 steps)")
	f.BoolVar(&opts.live, "live", false, "read node labels and GPU pods' start-ups from the live cluster, found as --kubeconfig says when it is not given")
	return cmd
}

func run(ctx context.Context, opts *options, out io.Writer) error {
	if opts.serve != "" {
		return fmt.Errorf("--serve %s: the counters moved to gpupack serve, which also serves the dashboard and reads each hour once: gpupack serve --prometheus URL --listen %s", opts.serve, opts.serve)
	}
	if opts.demo && opts.prometheus != "" {
		return errors.New("--demo and --prometheus exclude each other; drop one")
	}
	if err := sourceflag.CheckAccess(opts.access, opts.prometheus); err != nil {
		return err
	}
	if err := sourceflag.CheckSelector(opts.selector, opts.prometheus); err != nil {
		return err
	}
	if err := clio.CheckFormat(opts.format, "table", "json", "csv", "podusage"); err != nil {
		return err
	}
	opts.defaults()
	hourly, err := opts.hourly()
	if err != nil {
		return err
	}
	if err := opts.checkWindow(hourly); err != nil {
		return err
	}
	if opts.top < 0 {
		return fmt.Errorf("--top %d: want 0 or more worst offenders to list", opts.top)
	}
	pricing, err := app.LoadPricing(opts.prices)
	if err != nil {
		return err
	}
	var livePods []usage.PodEvents
	var live *kube.State
	if opts.live || opts.kubeconfig != "" {
		if opts.prometheus == "" {
			return errors.New("--kubeconfig/--live read the node labels and pod start-ups of the cluster that --prometheus measures; give --prometheus too")
		}
		if live, livePods, err = app.LoadLive(ctx, opts.kubeconfig, opts.stderr); err != nil {
			return err
		}
		pricing = app.PricedNodes(pricing, live.Snapshot)
	}
	apps, err := sourceflag.AppMetrics(opts.app)
	if err != nil {
		return err
	}
	if len(apps) > 0 && opts.prometheus == "" {
		return errors.New("--app-metric queries the Prometheus that --prometheus names; the demo has its own application metric: give --prometheus or drop --app-metric")
	}
	w := app.LatestWindow(time.Now(), opts.window, opts.step, hourly)
	source := "demo scenario (embedded)"
	if opts.prometheus == "" {
		w = usage.Window{Start: demo.End().Add(-opts.window), End: demo.End(), Step: opts.step}
	} else {
		source = "Prometheus " + promql.Redacted(opts.prometheus)
	}
	if opts.end != "" {
		end, err := time.Parse(time.RFC3339, opts.end)
		if err != nil {
			return fmt.Errorf("--end %q: %v; write a time such as 2026-01-05T00:00:00Z", opts.end, err)
		}
		if hourly && !end.Equal(end.Truncate(app.Bucket)) {
			return fmt.Errorf("--end %s with --accounting hourly: want a whole hour such as %s, or --accounting raw", opts.end, end.Truncate(app.Bucket).Format(time.RFC3339))
		}
		w = usage.Window{Start: end.Add(-opts.window), End: end, Step: opts.step}
	}
	if opts.prometheus == "" {
		if err := inDemoWeek(w); err != nil {
			return err
		}
	}
	r, err := app.Measure(ctx, app.Measurement{Prometheus: opts.prometheus, MaxAnswer: opts.maxAnswer, Access: opts.access, Selector: opts.selector, Window: w, Hourly: hourly, Pricing: pricing, Apps: apps, Live: livePods})
	if err != nil {
		if _, unpriced := errors.AsType[*usage.UnpricedError](err); unpriced {
			return fmt.Errorf("--prices %s: %w", opts.prices, err)
		}
		return err
	}
	if live != nil {
		r.WarnUnattributedClaims(usage.ClaimHolds(live.Snapshot, livePods))
		r.WarnPodsNotInCluster(live.Snapshot)
	}
	if r.QueueWait, err = app.ReportQueueWait(ctx, r, opts.prometheus != "", live, time.Now()); err != nil {
		return fmt.Errorf("queue wait: %w", err)
	}
	return write(out, r, opts.format, source, opts.top)
}

// defaults fills in --window and --step where not given: a day at 30 s
// from Prometheus; the demo's week at the shortest step that it allows.
func (o *options) defaults() {
	if !o.windowSet && o.window == 0 {
		o.window = 24 * time.Hour
		if o.prometheus == "" {
			o.window = demo.Window
		}
	}
	if !o.stepSet && o.step == 0 {
		o.step = 30 * time.Second
		if o.prometheus == "" {
			o.step = demo.Step(o.window)
		}
	}
}

// inDemoWeek refuses a window that reaches beyond the demo's week: the
// demo holds no data outside it, and a longer window would only stretch
// the step (demo.Step) and change the same week's figures.
func inDemoWeek(w usage.Window) error {
	const day = "2006-01-02"
	week := fmt.Sprintf("the demo holds one week, %s..%s", demo.Start.Format(day), demo.End().Format(day))
	switch {
	case w.End.Sub(w.Start) > demo.Window:
		return fmt.Errorf("--window %s: %s; give --window %gh or less", w.End.Sub(w.Start), week, demo.Window.Hours())
	case w.Start.Before(demo.Start) || w.End.After(demo.End()):
		return fmt.Errorf("--end %s --window %s: %s; give an --end and --window within it", w.End.Format(time.RFC3339), w.End.Sub(w.Start), week)
	}
	return nil
}

// hourly decides --accounting: whether the window is read in hourly
// buckets.
func (o *options) hourly() (bool, error) {
	return app.Accounting(o.accounting).Hourly(o.prometheus != "", o.window, o.step)
}

// checkWindow refuses a window and step that cannot be accounted, for
// every source, the demo included, before anything is read or allocated.
// The hourly path reads a day of buckets per query, at most 24 points, so
// it has no step limit; its window must be whole hours that the step divides.
func (o *options) checkWindow(hourly bool) error {
	switch {
	case o.window <= 0:
		return fmt.Errorf("--window %s: want a positive length such as 24h", o.window)
	case o.step <= 0:
		return fmt.Errorf("--step %s: want a positive step such as 30s", o.step)
	case o.step%time.Millisecond != 0:
		return fmt.Errorf("--step %s: want a whole number of milliseconds (Prometheus' resolution), such as 30s", o.step)
	case o.step > o.window:
		return fmt.Errorf("--step %s is longer than --window %s; want a step no longer than the window", o.step, o.window)
	}
	if hourly {
		if o.window%app.Bucket != 0 || app.Bucket%o.step != 0 {
			return fmt.Errorf("--window %s at --step %s with --accounting hourly: want a window of whole hours and a step that divides an hour, such as --window 168h --step 30s", o.window, o.step)
		}
		return nil
	}
	if steps := o.window / o.step; steps >= usage.MaxSteps && (steps > usage.MaxSteps || o.window%o.step != 0) {
		return fmt.Errorf("--window %s at --step %s is more than %d steps per series, the most that report accounts (and that one Prometheus query returns); use --step %s or more, or a shorter --window", o.window, o.step, usage.MaxSteps, usage.MinStep(o.window))
	}
	return nil
}
