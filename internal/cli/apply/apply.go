// Package apply is the `gpupack apply` verb: it turns a plan into a change
// set, prints it as a dry-run (the default, which writes nothing), and,
// given --approve with the set's hash, carries it out node by node through
// app.Apply with the Kubernetes actuator. The use cases are internal/app's;
// the change set is package change's.
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/cli/clio/applyflag"
	"github.com/gpupack/gpupack/internal/cli/clio/sourceflag"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/plan"
)

type options struct {
	cluster    app.Cluster
	usage      string
	prometheus string
	maxAnswer  int64
	window     string
	format     string
	nodes      []string
	outage     time.Duration
	approve    string
	auditLog   string
	flags      applyflag.Flags
}

// NewCommand returns the apply command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Apply a plan's node changes safely: dry-run by default, approval by hash, drain through the Eviction API, verify, roll back",
		Long: `apply turns the plan of the cluster (what gpupack plan prints) into a change set: per node, the
operator labels that change (nvidia.com/mig.config, nvidia.com/device-plugin.config), the GPUs
whose configuration changes, the pods that must stop first and whether each one's
PodDisruptionBudget allows it now, where the plan's proof places each afterwards, the allocatable
the node must show after, the GPU-hours the stop costs and the plan's expected gain. The set has a
content hash.

Without --approve it is a dry run: it prints the change set and writes nothing.

With --approve HASH (the hash a dry run printed) it builds the change set again from the live
cluster, refuses if the hash differs (the cluster drifted: new pods, other labels), and then,
node by node (at most --max-per-pool nodes of a pool at once):
  1. checks the preconditions: the maintenance window, mig-manager deployed and at rest in
     state success, no GPU pods the set does not stop;
  2. fences: cordons the node (only if it was schedulable), or on DRA taints just the changed GPUs;
  3. drains the pods through the Eviction API, one at a time, retrying while a
     PodDisruptionBudget refuses, until --drain-timeout; a pod that cannot be evicted aborts the
     node's change (unfenced, nothing switched); no pod is ever deleted directly;
  4. refuses the switch while more of a resource is allocated than the new config offers;
  5. switches: merges the configs into the ConfigMaps mig-manager and the device plugin read
     (other entries kept), sets the labels and records their old values in an annotation;
  6. waits for mig-manager (pending, rebooting, success; failed or a wedged pending roll back)
     and for the allocatable the change promised, until --switch-timeout;
  7. unfences what it fenced and checks that the pending pods the change was for fit.
A failure after the switch rolls back: the old labels restored, waited for and verified, then
unfenced; if the rollback fails too the node stays cordoned, with a Warning Event.
Each step is an Event on the node; --audit-log appends one JSON line per node.

With no flags it prints the dry run of the embedded demo's plan.`,
		Example: `  gpupack apply
  gpupack apply --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --window 7d
  gpupack apply --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --window 7d --node gpu-7 --approve 3f2a9c0d1e2b4a5f --audit-log changes.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	sourceflag.AddCluster(f, &o.cluster, "apply a plan to")
	f.StringVar(&o.usage, "usage", "", "usage file of per-pod facts (kind PodUsage, written by gpupack report --format podusage) to plan from; with the demo, the demo's usage")
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus URL to measure usage from over --window (instead of --usage)")
	sourceflag.AddMaxAnswer(f, &o.maxAnswer)
	f.StringVar(&o.window, "window", "", "the usage window the plan is for, such as 7d; must match the usage file's (default: the file's)")
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	f.StringSliceVar(&o.nodes, "node", nil, "change only these nodes (repeat or comma-separate); the hash covers only them")
	f.DurationVar(&o.outage, "outage", time.Duration(change.DefaultOptions().OutageHours*float64(time.Hour)), "expected time a stopped pod is down, to estimate the GPU-hours a change loses")
	f.StringVar(&o.approve, "approve", "", "apply the change set with this hash (printed by the dry run); without it nothing is written")
	f.StringVar(&o.flags.ApprovedBy, "approved-by", "", "who approved, for the audit log and Events (default: the local user)")
	f.StringVar(&o.auditLog, "audit-log", "", "append one JSON line per node change (who approved, hash, allocatable before and after, pods evicted, durations, GPU-hours lost, outcome) to this file")
	applyflag.Add(f, &o.flags)
	return cmd
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	if o.approve != "" && !o.cluster.IsLive() {
		return errors.New("--approve changes a live cluster: name it with --kubeconfig or --live (the demo and snapshot files are dry runs only)")
	}
	set, err := o.changeSet(ctx, stderr)
	if err != nil {
		return err
	}
	if o.approve == "" {
		return printDryRun(stdout, o.format, set)
	}
	if o.approve != set.Hash {
		return fmt.Errorf("--approve %s, but the change set is now %s: the cluster or the plan changed since the dry run (new pods, other labels, other usage); review the new dry run and approve its hash", o.approve, set.Hash)
	}
	return o.apply(ctx, set, stdout, stderr)
}

// changeSet builds the change set the flags name, cut to --node.
func (o *options) changeSet(ctx context.Context, stderr io.Writer) (*change.Set, error) {
	req := app.ChangeSetRequest{
		Plan:   app.PlanRequest{Cluster: o.cluster, Usage: o.usage, Prometheus: o.prometheus, MaxAnswer: o.maxAnswer, Window: o.window, Options: plan.DefaultOptions()},
		Change: change.Options{OutageHours: o.outage.Hours()},
	}
	set, _, _, err := app.BuildChangeSet(ctx, req, stderr)
	if err != nil || len(o.nodes) == 0 {
		return set, err
	}
	return set.Only(o.nodes)
}

// apply carries out the approved set with the Kubernetes actuator.
func (o *options) apply(ctx context.Context, set *change.Set, stdout, stderr io.Writer) error {
	ao, err := o.flags.Options(stderr)
	if err != nil {
		return err
	}
	if o.auditLog != "" {
		f, err := os.OpenFile(o.auditLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
		if err != nil {
			return fmt.Errorf("--audit-log: %w", err)
		}
		defer f.Close()
		ao.Audit = f
	}
	client, err := kube.NewClient(o.cluster.Kubeconfig)
	if err != nil {
		return err
	}
	cat, err := app.LoadCatalogue(o.cluster.Catalogue)
	if err != nil {
		return err
	}
	a, err := o.flags.Actuator(client, cat, "gpupack-apply")
	if err != nil {
		return err
	}
	results, applyErr := app.Apply(ctx, set, a, ao)
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"changeSet": set, "results": results}); err != nil {
			return err
		}
	} else {
		printResults(stdout, results)
	}
	return applyErr
}
