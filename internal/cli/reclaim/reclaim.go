// Package reclaim is the `gpupack reclaim` verb: it lists the workloads
// that hold GPUs without work, with the evidence and the reversible
// action each owner allows (a dry run, the default), notifies their
// owners (--notify), acts on those whose notice has run out when approved
// (--approve HASH, or the policy's standing approval), and prints the
// ledger of actions with the saving measured since (--show-ledger). The
// use cases are internal/app's; detection is package reclaim's.
package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/cli/clio/reclaimflag"
	"github.com/gpupack/gpupack/internal/cli/clio/sourceflag"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/source/promql"
)

type options struct {
	cluster    app.Cluster
	prometheus string
	maxAnswer  int64
	access     promql.Access
	selector   promql.Selector
	apps       []string
	policy     string
	format     string
	only       []string
	notify     bool
	approve    string
	showLedger bool
	flags      reclaimflag.Flags
}

// NewCommand returns the reclaim command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "reclaim",
		Short: "Reclaim GPUs held without work: owner-aware, reversible, noticed and approved, with a ledger of what it saved",
		Long: `reclaim finds the workloads whose every GPU pod has been idle-held for its class's window: each hour
of GPU activity under the policy's floor (default 5%), the application metric (--app-metric) at zero,
not busy on its CPU, ready (not still starting) and older than its grace period. Missing data is
never idleness: a pod whose activity is unknown for part of its GPU time is left alone.

For each it names the owner and the reversible action its kind allows:
  Deployment, StatefulSet, ReplicaSet   scale to 0 through the scale subresource (an HPA pauses at 0)
  KEDA-scaled workload                  autoscaling.keda.sh/paused-replicas: "0" on the ScaledObject
  Kubeflow Notebook                     the kubeflow-resource-stopped annotation (its PVCs stay)
  Job                                   spec.suspend: true
  Kueue Workload                        spec.active: false
  bare pod                              eviction through the Eviction API; not restorable, never
                                        approved by policy alone
with the evidence (idle GPU-hours, cost a day, last active time, keep-alive bursts) and an ID that
hashes the objects and evidence an approval binds to.

Without flags that write it is a dry run. --notify writes a notice on each new candidate's owner
(an annotation and an Event, and a JSON POST to --notify-webhook) with the deadline after which
gpupack may act; the owner snoozes it with gpupack.io/reclaim-snooze-until=<time> or exempts it
with the label gpupack.io/reclaim=never. --approve HASH (the set's hash that the dry run printed)
acts on the candidates whose notice has run out, outside the policy's business hours, after
re-checking each one's last 10 minutes of GPU activity; the policy's autoApprove acts on a class
without a person. Every action is recorded in the ledger ConfigMap and on the owner;
gpupack restore ID puts it back.

--show-ledger prints the ledger: per action, the saving predicted and the saving measured since,
from the same accounting (GPU-hours freed, how many of them other pods took, and their cost).

With no flags it runs on the embedded demo.`,
		Example: `  gpupack reclaim
  gpupack reclaim --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --policy reclaim-policy.yaml
  gpupack reclaim --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --policy reclaim-policy.yaml --notify
  gpupack reclaim --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --policy reclaim-policy.yaml --approve 3f2a9c0d1e2b4a5f
  gpupack reclaim --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --show-ledger`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	sourceflag.AddCluster(f, &o.cluster, "reclaim GPUs of")
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus URL holding dcgm-exporter's series (and cAdvisor's, for CPU use); required with a live cluster")
	sourceflag.AddMaxAnswer(f, &o.maxAnswer)
	sourceflag.AddAccess(f, &o.access)
	sourceflag.AddSelector(f, &o.selector)
	f.StringArrayVar(&o.apps, "app-metric", nil, "NAME=PROMQL application metric by namespace and pod (repeatable); a pod whose metric is not zero is not idle")
	f.StringVar(&o.policy, "policy", "", "reclaim policy file (kind ReclaimPolicy): opt-in namespaces, per-class windows, business hours, caps, auto-approval (default: no namespace opted in; the demo's policy with the demo)")
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	f.StringSliceVar(&o.only, "only", nil, "act only on these candidate IDs (repeat or comma-separate); the hash covers only them")
	f.BoolVar(&o.notify, "notify", false, "write a notice (annotation, Event, webhook) on each candidate's owner not yet notified")
	f.StringVar(&o.approve, "approve", "", "act on the due candidates of the set with this hash (printed by the dry run); without it nothing is paused")
	f.BoolVar(&o.showLedger, "show-ledger", false, "print the ledger of actions with the saving measured since each one, and nothing else")
	reclaimflag.Add(f, &o.flags, "approved-by")
	reclaimflag.AddWebhook(f, &o.flags)
	return cmd
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	writes := o.notify || o.approve != "" || o.showLedger
	if writes && !o.cluster.IsLive() {
		return errors.New("--notify, --approve and --show-ledger work on a live cluster: name it with --kubeconfig or --live (the demo is a dry run)")
	}
	if err := sourceflag.CheckAccess(o.access, o.prometheus); err != nil {
		return err
	}
	apps, err := sourceflag.AppMetrics(o.apps)
	if err != nil {
		return err
	}
	m := app.Measurement{Prometheus: o.prometheus, MaxAnswer: o.maxAnswer, Access: o.access, Selector: o.selector, Apps: apps}
	if o.showLedger {
		return o.ledger(ctx, m, stdout)
	}
	d, err := app.DetectReclaim(ctx, app.ReclaimRequest{Cluster: o.cluster, From: m, Policy: o.policy}, stderr)
	if err != nil {
		return err
	}
	if len(o.only) > 0 {
		if d.Set, err = d.Set.Only(o.only); err != nil {
			return err
		}
	}
	if !writes {
		return printSet(stdout, o.format, d.Set)
	}
	if o.approve != "" && o.approve != d.Set.Hash {
		return fmt.Errorf("--approve %s, but the set is now %s: its candidates or their evidence changed since the dry run (a pod recreated, another pod idle, one active again); review the new dry run and approve its hash", o.approve, d.Set.Hash)
	}
	return o.act(ctx, d, m, stdout, stderr)
}

// act notifies and, with --approve, pauses the due candidates.
func (o *options) act(ctx context.Context, d *app.Detection, m app.Measurement, stdout, stderr io.Writer) error {
	client, err := kube.NewClient(o.cluster.Kubeconfig)
	if err != nil {
		return err
	}
	a, err := o.flags.Actuator(client, "gpupack-reclaim")
	if err != nil {
		return err
	}
	webhook, err := o.flags.Notifier()
	if err != nil {
		return err
	}
	ro := app.ReclaimOptions{Notify: o.notify, Webhook: webhook, Recheck: app.Recheck(m, d.Policy.ActivityFloor, time.Now)}
	if o.approve != "" {
		ro.ApprovedBy = o.flags.Who()
	}
	out, runErr := app.Reclaim(ctx, d, a, ro)
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"set": d.Set, "outcome": out}); err != nil {
			return err
		}
	} else {
		printOutcome(stdout, out)
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "error:", runErr)
	}
	return runErr
}

func (o *options) ledger(ctx context.Context, m app.Measurement, stdout io.Writer) error {
	client, err := kube.NewClient(o.cluster.Kubeconfig)
	if err != nil {
		return err
	}
	a, err := o.flags.Actuator(client, "gpupack-reclaim")
	if err != nil {
		return err
	}
	entries, totals, err := app.Ledger(ctx, a, &m, time.Now())
	if err != nil {
		return err
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"entries": entries, "totals": totals})
	}
	printLedger(stdout, entries, totals)
	return nil
}
