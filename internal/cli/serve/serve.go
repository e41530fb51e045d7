// Package serve is the `gpupack serve` verb: the dashboard, the JSON API
// and the health endpoints of internal/serve, on the embedded demo
// (app.DemoView) or on the live cluster and Prometheus (internal/serve/live).
// It only wires flags and the provider.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/cli/clio/applyflag"
	"github.com/gpupack/gpupack/internal/cli/clio/reclaimflag"
	"github.com/gpupack/gpupack/internal/cli/clio/sourceflag"
	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/internal/serve/kubeauth"
	"github.com/gpupack/gpupack/internal/serve/live"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/plan"
)

type options struct {
	demo       bool
	listen     string
	prometheus string
	maxAnswer  int64
	access     promql.Access
	selector   promql.Selector
	kubeconfig string
	live       bool
	window     time.Duration
	step       time.Duration
	refresh    time.Duration
	prices     string
	// The apply controller (off unless applyController).
	applyController bool
	approvals       string
	applyEvery      time.Duration
	apply           applyflag.Flags
	// The reclaim controller (off unless reclaimController).
	reclaimController bool
	reclaimApprovals  string
	reclaimEvery      time.Duration
	reclaimPolicy     string
	reclaim           reclaimflag.Flags
	auth              string
	// authService is NAMESPACE/NAME of the Service whose services/proxy
	// a caller must be allowed to get, with --auth kubernetes.
	authService string
	// metricsPerPod serves the pods' counters per pod (--metrics-per-pod).
	metricsPerPod bool
}

// The values of --auth.
const (
	authNone       = "none"
	authKubernetes = "kubernetes"
)

// NewCommand returns the serve command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a web dashboard and a JSON API: GPU-hours allocated vs active, idle cost, pending pods, the plan",
		Long: `serve runs gpupack as a service: a web dashboard at / (fleet GPU-hours
allocated against active per hour, idle cost and cost per active GPU-hour,
a sortable and filterable table of pods with their pattern and
recommendation, the pending GPU pods with cause, fix and wait, start-up
phases, the GPUs that reported XID errors with the fix, the plan with its
configs to download, and the simulator's curve), the same data as JSON
under /api/v1/ (report, pending, plan, hours, health, view: the
structures the CLI prints), /healthz and /readyz.

It is read-only and listens on loopback unless --listen says otherwise;
the page loads nothing from outside the server. With --auth kubernetes
every route but /healthz and /readyz asks for a bearer token that the
apiserver accepts (a TokenReview) and whose user RBAC allows to read it
(a SubjectAccessReview, as kube-rbac-proxy asks): get on the
services/proxy subresource of the Service --auth-service names for the
page, the API and the plan's files; get on the nonResourceURL /metrics
for /metrics. It answers 401 without a valid token and 403 without the
right; serve's own identity needs system:auth-delegator.

With --prometheus it serves the live cluster: it watches nodes and pods
(found as --kubeconfig says, in a pod its in-cluster config), reads the
accounting of the last --window from Prometheus in hourly buckets that
the query engine sums (a few numbers per device-hour, never raw samples),
then each new hour once and the current hour at every --refresh (GPU
health, dcgm-exporter's XID gauge, likewise), and keeps only the window
in memory. /metrics serves the counters
gpupack_gpu_allocated_seconds_total, ..._active_seconds_total,
..._idle_allocated_seconds_total and gpupack_gpu_cost_total by namespace
and workload (by pod too with --metrics-per-pod), and
..._unallocated_seconds_total and ..._unsampled_seconds_total by node
(GPU time without a DCGM sample: dcgm-exporter or Prometheus down), which
count from the start of the window read at start-up and grow by each
hour read since (a restart starts them again, which rate() reads as a
counter reset), and the gauges
gpupack_pending_pods, gpupack_pending_wait_seconds and
gpupack_gpus_unhealthy. When Prometheus
or the apiserver is down the page shows the last good data, as of when,
with the error; /metrics keeps its last values and /readyz says why.

--reclaim-controller (live only) runs gpupack reclaim as a loop: at every
--reclaim-interval it detects the workloads that hold GPUs idle by
--reclaim-policy, notifies their owners (and --notify-webhook or
--notify-webhook-file), acts on those whose notice has run out when
--reclaim-approvals holds their ID or the policy approves their class,
re-checking each first, and records every action in --ledger. The page's
Reclaim section and /api/v1/reclaims show the candidates, the owners left
alone, the last round and the ledger with the GPU-hours measured since
each action; /metrics adds gpupack_reclaims_total{kind,outcome} and
gpupack_reclaimed_gpu_hours_total.

--demo (the default without --prometheus) serves the embedded demos of
report, diagnose, plan, simulate and reclaim (its dry run), with no
cluster.`,
		Example: `  gpupack serve
  gpupack serve --demo --listen 127.0.0.1:9400
  gpupack serve --prometheus http://prometheus:9090 --kubeconfig ~/.kube/config
  gpupack serve --prometheus http://prometheus:9090 --live --listen 0.0.0.0:9400 --window 168h --prices prices.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(ctx, o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.demo, "demo", false, "serve the embedded demo (the default without --prometheus)")
	f.StringVar(&o.listen, "listen", serve.DefaultAddr, "address to serve on; a port of 0 picks a free one; give 0.0.0.0:PORT to serve beyond this machine")
	sourceflag.AddMaxAnswer(f, &o.maxAnswer)
	sourceflag.AddAccess(f, &o.access)
	sourceflag.AddSelector(f, &o.selector)
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus (or Thanos, Mimir, Cortex, VictoriaMetrics) URL holding dcgm-exporter's DCGM_FI_* series; serves the live cluster")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", clio.KubeconfigUsage)
	f.BoolVar(&o.live, "live", false, "watch the live cluster, found as --kubeconfig says when it is not given (the default with --prometheus)")
	f.DurationVar(&o.window, "window", 7*24*time.Hour, "sliding window accounted and kept, a whole number of hours")
	f.DurationVar(&o.step, "step", 30*time.Second, "evaluation step of the pushed-down queries (the scrape resolution accounted); divides an hour")
	f.DurationVar(&o.refresh, "refresh", time.Minute, "how often to read the current hour and the cluster again")
	f.StringVar(&o.prices, "prices", "", "price file (YAML: currency, prices per model, nodeRules per node label), as gpupack report --prices")
	f.BoolVar(&o.applyController, "apply-controller", false, "run the apply controller: build the plan's change set at every --apply-interval, show it on the page and at /api/v1/changes, apply it when --apply-approvals holds its hash (as gpupack apply does), and remove the gpupack.io/mig-pending startup taint of nodes mig-manager has partitioned")
	f.StringVar(&o.approvals, "apply-approvals", "gpupack/gpupack-approvals", "NAMESPACE/NAME of the ConfigMap whose keys are the approved change set hashes (each value: who approved); only the approver role may write it")
	f.DurationVar(&o.applyEvery, "apply-interval", 10*time.Minute, "how often the apply controller builds the change set again")
	applyflag.Add(f, &o.apply)
	f.BoolVar(&o.reclaimController, "reclaim-controller", false, "run the reclaim controller: detect the workloads that hold GPUs idle at every --reclaim-interval, notify their owners, act on those whose notice has run out when --reclaim-approvals holds their ID or the policy approves their class (as gpupack reclaim does), and show the candidates and the ledger with its measured savings on the page and at /api/v1/reclaims")
	f.StringVar(&o.reclaimApprovals, "reclaim-approvals", "gpupack/gpupack-reclaim-approvals", "NAMESPACE/NAME of the ConfigMap whose keys are approved reclaim candidate IDs (each value: who approved); only the approver role may write it")
	f.DurationVar(&o.reclaimEvery, "reclaim-interval", 10*time.Minute, "how often the reclaim controller detects, notifies and acts")
	f.StringVar(&o.reclaimPolicy, "reclaim-policy", "", "reclaim policy file (kind ReclaimPolicy), read again at every round: opt-in namespaces, per-class windows, business hours, caps, auto-approval (default: no namespace opted in)")
	reclaimflag.Add(f, &o.reclaim, "")
	reclaimflag.AddWebhook(f, &o.reclaim)
	f.StringVar(&o.auth, "auth", authNone, "who may read the page, the API and /metrics: none (anyone who reaches --listen) or kubernetes (a bearer token that the apiserver found as --kubeconfig says authenticates, whose user RBAC allows get on --auth-service's services/proxy, or on the nonResourceURL /metrics for /metrics)")
	f.StringVar(&o.authService, "auth-service", "", "with --auth kubernetes: NAMESPACE/NAME of serve's Service, whose services/proxy subresource a caller must be allowed to get to read the page and the API")
	f.BoolVar(&o.metricsPerPod, "metrics-per-pod", false, "serve the GPU-second and cost counters on /metrics with a series per pod (a pod label) instead of per namespace and workload; the series then grow with every pod seen in the window")
	return cmd
}

func run(ctx context.Context, o *options, stderr io.Writer) error {
	if o.demo && o.prometheus != "" {
		return errors.New("--demo and --prometheus exclude each other; drop one")
	}
	if err := sourceflag.CheckAccess(o.access, o.prometheus); err != nil {
		return err
	}
	if err := sourceflag.CheckSelector(o.selector, o.prometheus); err != nil {
		return err
	}
	if err := o.checkAuth(); err != nil {
		return err
	}
	if o.prometheus != "" {
		return runLive(ctx, o, stderr)
	}
	if o.live || (o.kubeconfig != "" && o.auth != authKubernetes) {
		return errors.New("--kubeconfig/--live need --prometheus, which holds the GPU metrics to account; give --prometheus too, or drop them for the demo")
	}
	if o.applyController {
		return errors.New("--apply-controller changes the live cluster: give --prometheus (and --kubeconfig or --live); the demo shows its change set without it")
	}
	if o.reclaimController {
		return errors.New("--reclaim-controller changes the live cluster: give --prometheus (and --kubeconfig or --live); the demo shows its reclaim dry run without it")
	}
	guard, err := o.guard(stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "serve: building the demo view (report, diagnose, plan, its change set, then a simulator run) while serving")
	d := newDemoProvider(ctx)
	return serve.Serve(ctx, serve.Options{Addr: o.listen, Provider: d, Guard: guard, Changes: d.Changes, Reclaims: d.Reclaims, Metrics: demoMetrics(d)}, stderr)
}

// checkAuth refuses an --auth that cannot work.
func (o *options) checkAuth() error {
	switch {
	case o.auth != authNone && o.auth != authKubernetes:
		return fmt.Errorf("--auth %q: want none or kubernetes", o.auth)
	case o.auth == authNone && o.authService != "":
		return errors.New("--auth-service applies to --auth kubernetes only: add --auth kubernetes, or drop --auth-service")
	case o.auth == authKubernetes:
		ns, name, ok := strings.Cut(o.authService, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--auth kubernetes needs --auth-service NAMESPACE/NAME, serve's Service (e.g. gpupack-system/gpupack), have %q", o.authService)
		}
	}
	return nil
}

// guard is what --auth puts in front of the routes that show data: nil
// for none, kubeauth.Guard against the apiserver of --kubeconfig for
// kubernetes.
func (o *options) guard(stderr io.Writer) (func(http.Handler) http.Handler, error) {
	if o.auth != authKubernetes {
		return nil, nil
	}
	cfg, err := kube.RESTConfig(o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--auth kubernetes asks the apiserver about each caller: %w", err)
	}
	ns, name, _ := strings.Cut(o.authService, "/")
	g, err := kubeauth.Guard(cfg, kubeauth.Service{Namespace: ns, Name: name}, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return nil, fmt.Errorf("--auth kubernetes: %w", err)
	}
	return g, nil
}

// fixed is a provider of one view that never changes: the demo's.
type fixed struct{ v *app.View }

func (f fixed) View() *app.View { return f.v }
func (f fixed) Ready() error    { return nil }

// liveSource is the live view's Source: the Prometheus URL, Redacted,
// and the apiserver's host.
func liveSource(prometheus, apiserver string) string {
	return fmt.Sprintf("Prometheus %s and the cluster at %s", promql.Redacted(prometheus), apiserver)
}

// runLive serves the live cluster from Prometheus and the apiserver.
func runLive(ctx context.Context, o *options, stderr io.Writer) error {
	pricing, err := app.LoadPricing(o.prices)
	if err != nil {
		return err
	}
	opts := live.Options{Window: o.window, Step: o.step, Refresh: o.refresh, Pricing: pricing, Plan: plan.DefaultOptions(), Log: stderr, MetricsPerPod: o.metricsPerPod}
	if err := opts.Check(); err != nil {
		return fmt.Errorf("--window/--step: %w", err)
	}
	src, err := promql.Open(o.prometheus, o.access)
	if err != nil {
		return fmt.Errorf("--prometheus: %w", err)
	}
	src.MaxAnswer, src.Selector = o.maxAnswer, o.selector
	cfg, err := kube.RESTConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kube.NewClient(o.kubeconfig)
	if err != nil {
		return err
	}
	opts.Source = liveSource(o.prometheus, cfg.Host)
	e, err := live.New(opts, src, client)
	if err != nil {
		return err
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.Collector())
	so := serve.Options{Addr: o.listen, Provider: e}
	// The reclaim controller's flags are checked before anything starts.
	var reclaimer *app.ReclaimController
	if o.reclaimController {
		if reclaimer, err = o.reclaimer(client, pricing, reg, stderr); err != nil {
			return err
		}
		so.Reclaims = func() *app.ReclaimStatus { s := reclaimer.Status(); return &s }
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	if o.applyController {
		c, err := o.controller(e, client, reg, stderr)
		if err != nil {
			return err
		}
		go func() { _ = c.Run(ctx) }()
		so.Changes = func() *app.ChangeStatus { s := c.Status(); return &s }
	}
	if reclaimer != nil {
		go func() { _ = reclaimer.Run(ctx) }()
	}
	so.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	if so.Guard, err = o.guard(stderr); err != nil {
		return err
	}
	return serve.Serve(ctx, so, stderr)
}
