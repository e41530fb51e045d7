// Package simulate is the `gpupack simulate` verb: the FGD paper's trace
// experiment, run for one or more placement policies side by side, and its
// churn replay. It turns flags into an app.Simulation or app.Replay and
// prints the results.
package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/sim"
)

type options struct {
	nodes     string
	pods      string
	policies  []string
	seed      uint64
	inflation float64
	format    string
	out       string
	replay    bool
	speedup   float64
	load      float64
	bounds    bool
	// churn is the offered load of a steady churn (0: none), measured
	// over churnHours after churnWarmupHours.
	churn, churnHours, churnWarmupHours float64
}

// NewCommand returns the simulate command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	def := defaults()
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Replay a GPU trace against a cluster with placement policies and compare GPU allocation",
		Long: `simulate reproduces the experiment of "Beware of Fragmentation" (Weng et al.,
USENIX ATC'23): the cluster of a node list; the workload is every pod of a pod
list plus random copies (with --seed) until GPU demand is --inflation times
the cluster's GPU capacity, shuffled; each pod arrives once, never leaves, and
is placed by the policy or counted as failed. When the list alone asks for
more than that (--inflation below the list's demand), listed pods are dropped
at random until it does not, and simulate says how many.

The "share bound" column bounds what any packing of the shares (pods of less
than a GPU) that a policy placed while a GPU was still idle could allocate,
however they were packed: a scheduler that places every pod that fits must
place those shares, and the GPU they leave beside them stays free.

With --bounds it also computes the workload's bounds (seconds more):
- the place-if-fits cap: no policy that places each pod that fits can
  allocate more, as long as CPU and memory stop no share of a GPU before
  GPU room does (the "capped" column says whether each run kept to that);
  it is taken at the arrival where a run's first share fails;
- the hindsight packing: the GPU pods all known in advance and packed by a
  search (the best of three orders). It is a lower estimate of the offline
  optimum, not a ceiling: an online policy may pass it.

With --replay it follows the pod list's own clock instead (churn): each pod
arrives at its creation_time (divided by --replay-speedup), waits in a FIFO
queue when it fits nowhere and is retried when a pod leaves, and leaves after
its trace run time (deletion_time minus scheduled_time, or minus
creation_time for pods never scheduled). It reports the time-weighted GPU
allocation, GPU pods' queue wait p50/p95/max and the GPU-hours refused to
waiting pods (GPUs asked for x time waited). The pod list alone rarely loads
a cluster (openb default offers 0.2% of its GPU-time); --replay-load L adds
random copies of listed pods (with --seed), each with its source's shape and
run time, arriving uniformly over the same arrival window, until the offered
load is L: the GPU-time pods would hold within the window if none waited,
over capacity x window. Above 1 pods must queue whatever the policy. Raise
--replay-speedup to need fewer copies (the window shrinks, run times stay).

With --churn L it measures scheduling under a stable queue instead: listed
pods drawn at random (with --seed) arrive as a Poisson process at the rate
that offers L (below 1) of the GPU capacity, each running for its trace run
time; after --churn-warmup-hours the waits of the pods that arrive in the
next --churn-hours are measured. It reports the same figures as --replay,
and the waits p50/p95/p99 by GPU shape.

With no flags it runs gpupack's policy and FGD on the embedded openb trace.
Files may be CSV paths or embedded names: ` + strings.Join(embeddedNames(), ", ") + `.
Policies: ` + strings.Join(placement.Policies(), ", ") + `.`,
		Example: `  gpupack simulate
  gpupack simulate --pods openb:gpushare100 --policy gpupack,fgd,bestfit --seed 3
  gpupack simulate --bounds --format json --out ./sim-out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.nodes, "nodes", def.nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
	f.StringVar(&o.pods, "pods", def.pods, "pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec)")
	f.StringSliceVar(&o.policies, "policy", def.policies, "placement policies to compare, comma-separated")
	f.Uint64Var(&o.seed, "seed", def.seed, "seed for the workload's copies, its order and random tie-breaks")
	f.Float64Var(&o.inflation, "inflation", def.inflation, "GPU demand as a multiple of the cluster's GPU capacity")
	f.StringVar(&o.format, "format", "table", "output format: table or json (one object per policy per line)")
	f.StringVar(&o.out, "out", "", "directory to write the allocation curve to (curve.csv and curve.svg; replay.csv with --replay)")
	f.Float64Var(&o.churn, "churn", 0, "measure waits under a steady churn at this offered GPU load (a ratio of capacity below 1): Poisson arrivals of listed pods with their trace run times")
	f.Float64Var(&o.churnHours, "churn-hours", 720, "with --churn, the hours of arrivals measured")
	f.Float64Var(&o.churnWarmupHours, "churn-warmup-hours", 720, "with --churn, the hours of arrivals before the measurement, which fill the cluster")
	f.BoolVar(&o.bounds, "bounds", false, "also compute the workload's bounds: the cap on every policy that places each pod that fits, and the hindsight packing")
	f.BoolVar(&o.replay, "replay", false, "replay the pod list with churn: pods arrive at creation_time, queue when nothing fits and leave after their trace run time")
	f.Float64Var(&o.speedup, "replay-speedup", 1, "with --replay, divide every creation time by this (arrivals this many times as dense; run times kept)")
	f.Float64Var(&o.load, "replay-load", 0, "with --replay, add copies of listed pods until the offered GPU load over the arrival window is this multiple of capacity (0: the list as traced)")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if o.replay && cmd.Flags().Changed("inflation") {
			return fmt.Errorf("--inflation has no meaning with --replay; use --replay-load to add copies of listed pods until the offered GPU load is that multiple of capacity")
		}
		churn := cmd.Flags().Changed("churn")
		if !churn && (cmd.Flags().Changed("churn-hours") || cmd.Flags().Changed("churn-warmup-hours")) {
			return fmt.Errorf("--churn-hours and --churn-warmup-hours need --churn")
		}
		if churn && !(o.churn > 0 && o.churn < 1) {
			return fmt.Errorf("--churn %v: want the offered GPU load as a ratio of capacity in (0, 1), where the queue is stable", o.churn)
		}
		if churn && (o.replay || o.bounds || cmd.Flags().Changed("inflation")) {
			return fmt.Errorf("--churn is an experiment of its own: leave out --replay, --bounds and --inflation")
		}
		if o.replay && o.bounds {
			return fmt.Errorf("--bounds has no meaning with --replay: the bounds are of the fill experiment, where pods never leave")
		}
		if !o.replay && cmd.Flags().Changed("replay-speedup") {
			return fmt.Errorf("--replay-speedup needs --replay")
		}
		if !o.replay && cmd.Flags().Changed("replay-load") {
			return fmt.Errorf("--replay-load needs --replay")
		}
		if cmd.Flags().Changed("replay-load") && !(o.load > 0) {
			return fmt.Errorf("--replay-load %v: want the offered GPU load as a multiple of capacity, above 0 (leave it out to replay the list as traced)", o.load)
		}
		return nil
	}
	return cmd
}

// defaults are the flags' defaults: gpupack's policy and FGD on the
// embedded openb trace, as in the paper.
func defaults() *options {
	d := app.DefaultSimulation()
	return &options{nodes: d.Nodes, pods: d.Pods, policies: d.Policies, seed: d.Seed, inflation: d.Inflation}
}

// simulation is the experiment the flags name; progress lines go to stderr
// where it is a terminal.
func (o *options) simulation(stderr io.Writer) app.Simulation {
	s := app.Simulation{Nodes: o.nodes, Pods: o.pods, Policies: o.policies, Seed: o.seed, Inflation: o.inflation, Bounds: o.bounds}
	if f, ok := stderr.(*os.File); ok {
		s.Progress = func(policy string) func(done, total int) { return clio.Progress(f, "simulate "+policy) }
	}
	return s
}

func embeddedNames() []string {
	var out []string
	for _, n := range openb.Names() {
		out = append(out, "openb:"+strings.TrimPrefix(strings.TrimPrefix(n, "openb_pod_list_"), "openb_node_list_"))
	}
	return out
}

func run(ctx context.Context, o *options, stdout io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	var each func(any) error
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		each = func(r any) error { return enc.Encode(r) }
	}
	if o.replay || o.churn != 0 {
		return o.runReplay(ctx, stdout, each)
	}
	results, bounds, err := app.Simulate(ctx, o.simulation(os.Stderr), os.Stderr, each)
	if err != nil {
		return err
	}
	if o.format == "table" {
		writeTable(stdout, results, bounds)
	}
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(o.out, "curve.csv"), func(w io.Writer) error { return writeCurveCSV(w, results, bounds) }); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(o.out, "curve.svg"), func(w io.Writer) error { return writeCurveSVG(w, results, bounds) }); err != nil {
			return err
		}
		if o.format == "table" {
			fmt.Fprintf(stdout, "\nwrote %s and %s\n", filepath.Join(o.out, "curve.csv"), filepath.Join(o.out, "curve.svg"))
		}
	}
	return nil
}

// writeTable prints the runs, and bounds when they were computed (nil
// otherwise).
func writeTable(w io.Writer, results []sim.Result, bounds *sim.Bounds) {
	if len(results) == 0 {
		return
	}
	r0 := results[0]
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; workload: %d pods, GPU demand %.2fx capacity (seed %d)\n\n",
		r0.Nodes, r0.GPUs, r0.PodsArrived, float64(r0.GPUMilliArrived)/float64(r0.GPUMilliCapacity), r0.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tGPU alloc at 100%\tGPU alloc at end\tshare bound\tcapped\tscheduled\tfailed GPU pods\tfragmented GPUs\tseconds\t")
	var boundErrs []string
	for _, r := range results {
		atFull := "-"
		if r.GPUAllocRatioAtFull != nil {
			atFull = fmt.Sprintf("%.2f%%", 100**r.GPUAllocRatioAtFull)
		}
		bound := "-"
		if r.GPUAllocShareBound != nil {
			bound = fmt.Sprintf("%.2f%%", 100**r.GPUAllocShareBound)
		} else if r.ShareBoundError != "" {
			boundErrs = append(boundErrs, fmt.Sprintf("%s: no share bound: %s", r.Policy, r.ShareBoundError))
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%s\t%s\t%d\t%d\t%.1f\t%.2f\t\n", r.Policy, atFull, 100*r.GPUAllocRatio, bound, capped(r),
			r.PodsScheduled, r.GPUPodsFailed, r.FragGPUMilli/float64(gpu.WholeGPU), r.WallSeconds)
	}
	tw.Flush()
	for _, e := range boundErrs {
		fmt.Fprintln(w, e)
	}
	if bounds != nil {
		writeBounds(w, bounds)
	}

	// Where each policy's free GPU is at the end (sim.Unallocated): the
	// parts add up to the capacity it left unallocated.
	fmt.Fprintf(w, "\nfree GPUs at the end, by what kept the failed GPU pods from them\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tfree\tCPU or memory short\tidle GPUs\tslivers\tother\t")
	gpus := func(milli int64) string { return fmt.Sprintf("%.1f", float64(milli)/float64(gpu.WholeGPU)) }
	for _, r := range results {
		u := r.Unallocated
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Policy, gpus(r.GPUMilliCapacity-r.GPUMilliAllocated),
			gpus(u.CPUStrandedGPUMilli), gpus(u.IdleGPUMilli), gpus(u.SliverGPUMilli), gpus(u.OtherGPUMilli))
	}
	tw.Flush()
}

// capped says whether the place-if-fits cap covers a run: "yes" when its
// first failed share found no GPU with room (or none failed), "no" when CPU
// or memory stopped it first.
func capped(r sim.Result) string {
	if f := r.FirstFailedShare; f != nil && f.GPURoomLeft {
		return "no"
	}
	return "yes"
}

// writeBounds prints the workload's bounds, or why each is missing.
func writeBounds(w io.Writer, b *sim.Bounds) {
	fmt.Fprintln(w)
	switch cp := b.PlaceIfFitsCap; {
	case cp != nil && cp.FirstShareFailure > 0:
		fmt.Fprintf(w, "place-if-fits cap: %.2f%%: no policy that places each pod that fits allocates more, while CPU and memory\nstop no share before GPU room does (capped: yes); reached by runs whose first share fails at arrival %d\n(%.1f%% of capacity arrived)\n",
			100*cp.Ratio, cp.FirstShareFailure, 100*cp.ArrivedRatio)
	case cp != nil:
		fmt.Fprintf(w, "place-if-fits cap: %.2f%%: no policy that places each pod that fits allocates more, while CPU and memory\nstop no share before GPU room does (capped: yes)\n", 100*cp.Ratio)
	default:
		fmt.Fprintf(w, "place-if-fits cap: none: %s\n", b.PlaceIfFitsCapError)
	}
	if h := b.Hindsight; h != nil {
		fmt.Fprintf(w, "hindsight packing: %.2f%% (%d GPU pods placed, %d failed): a packing found with hindsight, a lower estimate\nof the offline optimum; it turns away pods that fit, and an online policy may pass it\n",
			100*h.GPUAllocRatio, h.GPUPodsPlaced, h.GPUPodsFailed)
	} else {
		fmt.Fprintf(w, "hindsight packing: none: %s\n", b.HindsightError)
	}
	fmt.Fprintf(w, "bounds computed in %.2f s\n", b.WallSeconds)
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
