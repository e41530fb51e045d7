// Package plan is the `gpupack plan` verb: which workloads to reclaim and
// share, by which method, with which MIG layouts and time-slice or MPS
// counts; the device plugin and mig-parted configs that do it; and the
// proof by simulation. It turns flags into an app.PlanRequest, writes the
// files and formats the plan; the use case is internal/app's, the planning
// the plan package's.
package plan

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/cli/clio/sourceflag"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/plan"
)

type options struct {
	cluster     app.Cluster
	usage       string
	autoscaling string
	prometheus  string
	maxAnswer   int64
	access      promql.Access
	selector    promql.Selector
	window      string
	out         string
	format      string
	reclaim     float64
	headroom    float64
	reserveOff  float64
	spotOff     float64
}

// NewCommand returns the plan command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	def := plan.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Plan GPU sharing (MIG, time-slicing, MPS), emit the configs, and prove the saving by simulation",
		Long: `plan groups GPU pods into workloads by owner label and decides for each:
  reclaim   idle-held most of the window: scale it down, or keep it on the smallest share
  share     right-sized from VRAM p95 and activity (plus headroom) onto a MIG slice (production
            inference, isolation none, a tenant alone), MPS clients (steady replicas of one owner)
            or time slices (bursty and interactive work within one tenant)
  keep      multi-GPU and training work unless usage shows it fits a share; no usage measured

Per node pool it lays out MIG on the fewest GPUs (reporting the gap to the lower bound),
sizes time-slice replicas and MPS clients, writes the NVIDIA device plugin ConfigMap,
the mig-parted config and the node labels that select them, and replays the changed
cluster through the simulator's placement step: GPUs and nodes freed, money saved at
catalogue prices, pods still pending, risks, the baseline worth reserving and the work
that suits spot capacity.

With --autoscaling it also writes KEDA ScaledObjects that scale the named inference
workloads on their application metric (queue depth, latency or tokens/s, never GPU
utilisation), with min/max replicas from the busy replicas measured per hour; and,
with or without it, Karpenter NodePools for the node pools the plan uses, whose GPU
limits hold every replica KEDA may add, spot ones for the Jobs that suit spot.

With no flags it runs on an embedded demo cluster and a week of its usage.`,
		Example: `  gpupack plan
  gpupack plan --snapshot cluster.yaml --usage usage.yaml --window 7d --out ./plan-out
  gpupack plan --snapshot cluster.yaml --usage usage.yaml --autoscaling autoscaling.yaml --out ./plan-out
  gpupack plan --snapshot cluster.yaml --usage usage.yaml --format json
  gpupack plan --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --window 7d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	sourceflag.AddCluster(f, &o.cluster, "plan")
	f.StringVar(&o.usage, "usage", "", "usage file of per-pod facts (kind PodUsage, written by gpupack report --format podusage); with the demo, the demo's usage")
	f.StringVar(&o.autoscaling, "autoscaling", "", "autoscaling file (kind Autoscaling): the Prometheus KEDA queries, the Karpenter node class, and each inference workload's application metric; with the demo, the demo's")
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus URL to measure usage from over --window (instead of --usage)")
	sourceflag.AddMaxAnswer(f, &o.maxAnswer)
	sourceflag.AddAccess(f, &o.access)
	sourceflag.AddSelector(f, &o.selector)
	f.StringVar(&o.window, "window", "", "the usage window the plan is for, such as 7d or 24h; must match the usage file's (default: the file's)")
	f.StringVar(&o.out, "out", "", "directory to write the device plugin ConfigMap, mig-parted config, node labels, workload requests, KEDA ScaledObjects, Karpenter NodePools, the DRA objects (when some GPUs are offered through DRA) and plan.md to")
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	f.Float64Var(&o.reclaim, "reclaim-idle", def.ReclaimIdleRatio, "reclaim workloads idle-held at least this share of the window (0..1)")
	f.Float64Var(&o.headroom, "headroom", def.Headroom, "headroom over measured VRAM p95 and activity when sizing a share (0.2 = 20%)")
	f.Float64Var(&o.reserveOff, "reserve-discount", def.ReserveDiscount, "discount (0..1) of committed capacity (reservations, savings plans) off the catalogue price, to price the reservation baseline")
	f.Float64Var(&o.spotOff, "spot-discount", def.SpotDiscount, "discount (0..1) of spot capacity off the catalogue price, to price the spot candidates")
	return cmd
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	if err := sourceflag.CheckAccess(o.access, o.prometheus); err != nil {
		return err
	}
	if err := sourceflag.CheckSelector(o.selector, o.prometheus); err != nil {
		return err
	}
	p, s, err := app.MakePlan(ctx, o.request(), stderr)
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := writeOut(o.out, p, s); err != nil {
			return err
		}
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	planout.WriteTable(stdout, p, s)
	return nil
}

// request is the plan the flags ask for.
func (o *options) request() app.PlanRequest {
	return app.PlanRequest{Cluster: o.cluster, Usage: o.usage, Prometheus: o.prometheus, MaxAnswer: o.maxAnswer, Access: o.access, Selector: o.selector, Window: o.window, Autoscaling: o.autoscaling,
		Options: plan.Options{ReclaimIdleRatio: o.reclaim, Headroom: o.headroom, ReserveDiscount: o.reserveOff, SpotDiscount: o.spotOff}}
}

func writeOut(dir string, p *plan.Plan, s *cluster.Snapshot) error {
	files, err := planout.Files(p, s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}
