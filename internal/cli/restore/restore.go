// Package restore is the `gpupack restore` verb: it puts back what a
// reclaim record replaced, by the record's ID in the ledger. The use case
// is internal/app's Restore.
package restore

import (
	"context"
	"encoding/json"
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
	kubeconfig string
	prometheus string
	maxAnswer  int64
	access     promql.Access
	format     string
	flags      reclaimflag.Flags
}

// NewCommand returns the restore command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "restore ID",
		Short: "Undo a reclaim: put back the replicas, annotations and suspend flags its ledger record holds",
		Long: `restore puts back what the reclaim record ID (gpupack reclaim --show-ledger lists them) replaced:
  scale-to-zero        the replicas before, through the scale subresource (refused if someone scaled it since)
  pause-keda           the ScaledObject's paused-replicas annotation as it was, and its
                       spec.initialCooldownPeriod raised to at least the workload's p95 load time
                       (measured over the last week with --prometheus, else the record's evidence),
                       so that KEDA never scales it to zero while its model loads
  stop-notebook        the kubeflow-resource-stopped annotation as it was (its PVCs were kept)
  suspend-job          spec.suspend as it was
  deactivate-workload  spec.active as it was
It removes the reclaim record and notice from the owner, records an Event, and marks the record
restored in the ledger. An evicted bare pod cannot be restored: recreate it from its manifest.`,
		Example: `  gpupack restore 3f2a9c0d1e2b --kubeconfig ~/.kube/config
  gpupack restore 3f2a9c0d1e2b --kubeconfig ~/.kube/config --prometheus http://prometheus:9090`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", clio.KubeconfigUsage)
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus URL to measure the workload's p95 load time from (for a KEDA-paused workload)")
	sourceflag.AddMaxAnswer(f, &o.maxAnswer)
	sourceflag.AddAccess(f, &o.access)
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	reclaimflag.Add(f, &o.flags, "restored-by")
	return cmd
}

func run(ctx context.Context, o *options, id string, stdout io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	if err := sourceflag.CheckAccess(o.access, o.prometheus); err != nil {
		return err
	}
	client, err := kube.NewClient(o.kubeconfig)
	if err != nil {
		return err
	}
	a, err := o.flags.Actuator(client, "gpupack-restore")
	if err != nil {
		return err
	}
	rec, err := app.Restore(ctx, a, app.RestoreRequest{ID: id, By: o.flags.Who(), Now: time.Now(),
		From: app.Measurement{Prometheus: o.prometheus, MaxAnswer: o.maxAnswer, Access: o.access}})
	if err != nil {
		return err
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rec)
	}
	line := fmt.Sprintf("restored %s: %s of %s undone", rec.ID, rec.Action, rec.Owner)
	if rec.Before.Replicas != nil {
		line += fmt.Sprintf(" (replicas %d)", *rec.Before.Replicas)
	}
	if rec.InitialCooldownSeconds != nil {
		line += fmt.Sprintf("; initialCooldownPeriod at least %ds (p95 load time)", *rec.InitialCooldownSeconds)
	}
	fmt.Fprintln(stdout, line)
	return nil
}
