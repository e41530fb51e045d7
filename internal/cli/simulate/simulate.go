// Package simulate is the `gpupack simulate` verb: the FGD paper's trace
// experiment, run for one or more placement policies side by side.
package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
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
	loaded    loaded
}

// loaded is the trace that a run loaded, kept for the offline ceiling.
type loaded struct {
	nodes     []*cluster.Node
	pods      []*cluster.Pod
	workload  []*cluster.Pod
	catalogue *gpu.Catalogue
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
is placed by the policy or counted as failed. Beside the policies it reports
the offline ceiling of the same arrivals: the GPU pods all known in advance
and packed largest first, which no online policy can be expected to pass. When the list alone asks for
more than that (--inflation below the list's demand), listed pods are dropped
at random until it does not, and simulate says how many.

The "share bound" column bounds what any packing of the shares (pods of less
than a GPU) that a policy placed while a GPU was still idle could allocate,
however they were packed: a scheduler that places every pod that fits must
place those shares, and the GPU they leave beside them stays free.

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

With no flags it runs gpupack's policy and FGD on the embedded openb trace.
Files may be CSV paths or embedded names: ` + strings.Join(embeddedNames(), ", ") + `.
Policies: ` + strings.Join(placement.Policies(), ", ") + `.`,
		Example: `  gpupack simulate
  gpupack simulate --pods openb:gpushare100 --policy gpupack,fgd,bestfit --seed 3
  gpupack simulate --format json --out ./sim-out`,
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
	f.BoolVar(&o.replay, "replay", false, "replay the pod list with churn: pods arrive at creation_time, queue when nothing fits and leave after their trace run time")
	f.Float64Var(&o.speedup, "replay-speedup", 1, "with --replay, divide every creation time by this (arrivals this many times as dense; run times kept)")
	f.Float64Var(&o.load, "replay-load", 0, "with --replay, add copies of listed pods until the offered GPU load over the arrival window is this multiple of capacity (0: the list as traced)")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if o.replay && cmd.Flags().Changed("inflation") {
			return fmt.Errorf("--inflation has no meaning with --replay; use --replay-load to add copies of listed pods until the offered GPU load is that multiple of capacity")
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
	return &options{nodes: "openb:" + openb.Nodes, pods: "openb:" + openb.DefaultPods,
		policies: []string{placement.DefaultPolicy, "fgd"}, seed: 1, inflation: sim.DefaultInflation}
}

// Demo is the run that `gpupack simulate` makes with no flags, one result
// per policy, each with its allocation curve, and the offline ceiling.
func Demo(ctx context.Context) ([]sim.Result, sim.Ceiling, error) {
	return defaults().simulate(ctx, io.Discard, nil)
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
	if o.replay {
		return o.runReplay(ctx, stdout, each)
	}
	results, ceiling, err := o.simulate(ctx, os.Stderr, each)
	if err != nil {
		return err
	}
	if o.format == "table" {
		writeTable(stdout, results, ceiling)
	}
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(o.out, "curve.csv"), func(w io.Writer) error { return writeCurveCSV(w, results, ceiling) }); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(o.out, "curve.svg"), func(w io.Writer) error { return writeCurveSVG(w, results, &ceiling) }); err != nil {
			return err
		}
		if o.format == "table" {
			fmt.Fprintf(stdout, "\nwrote %s and %s\n", filepath.Join(o.out, "curve.csv"), filepath.Join(o.out, "curve.svg"))
		}
	}
	return nil
}

// simulate runs every policy of the options on their trace, in order, then
// the offline ceiling; warnings go to stderr (progress too, where it is a
// terminal), and each, when set, sees each result (the ceiling last) as
// soon as it is done.
func (o *options) simulate(ctx context.Context, stderr io.Writer, each func(any) error) ([]sim.Result, sim.Ceiling, error) {
	results, err := o.runPolicies(ctx, stderr, each)
	if err != nil {
		return nil, sim.Ceiling{}, err
	}
	ceiling, err := sim.OfflineCeiling(ctx, o.loaded.nodes, o.loaded.workload, o.loaded.catalogue, sim.Config{Seed: o.seed, Typical: o.loaded.pods})
	if err != nil {
		return nil, sim.Ceiling{}, err
	}
	if each != nil {
		if err := each(ceiling); err != nil {
			return nil, sim.Ceiling{}, err
		}
	}
	return results, ceiling, nil
}

// runPolicies loads the trace into o.loaded and runs every policy on it.
func (o *options) runPolicies(ctx context.Context, stderr io.Writer, each func(any) error) ([]sim.Result, error) {
	seen := map[string]bool{}
	for _, p := range o.policies {
		if _, err := placement.New(p, placement.Options{}); err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		if seen[p] {
			return nil, fmt.Errorf("--policy: %s is given twice; name each policy once", p)
		}
		seen[p] = true
	}
	c := gpu.Default()
	nodes, err := loadNodes(o.nodes, c)
	if err != nil {
		return nil, err
	}
	pods, err := loadPods(o.pods, c)
	if err != nil {
		return nil, err
	}
	var capacity gpu.Milli
	for _, n := range nodes {
		capacity += gpu.Milli(len(n.GPUs)) * gpu.WholeGPU
	}
	if err := checkModels(stderr, nodes, pods, o.nodes, o.pods); err != nil {
		return nil, err
	}
	workload, err := sim.Inflate(pods, capacity, o.inflation, o.seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.pods, err)
	}
	if len(workload) < len(pods) {
		fmt.Fprintf(stderr, "simulate: --inflation %g is below the pod list's own GPU demand; %d of its %d pods were dropped at random, so %d run\n", o.inflation, len(pods)-len(workload), len(pods), len(workload))
	}
	o.loaded = loaded{nodes: nodes, pods: pods, workload: workload, catalogue: c}
	var results []sim.Result
	for _, policy := range o.policies {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var progress func(done, total int)
		if f, ok := stderr.(*os.File); ok {
			progress = clio.Progress(f, "simulate "+policy)
		}
		res, err := sim.Run(ctx, nodes, workload, c, sim.Config{
			Policy: policy, Seed: o.seed, Inflation: o.inflation, Typical: pods, Progress: progress,
		})
		if err != nil {
			return nil, err
		}
		results = append(results, res)
		if each != nil {
			if err := each(res); err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}

func loadNodes(name string, c *gpu.Catalogue) ([]*cluster.Node, error) {
	r, src, err := clio.OpenTrace(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return cluster.LoadTraceNodes(r, src, c)
}

func loadPods(name string, c *gpu.Catalogue) ([]*cluster.Pod, error) {
	r, src, err := clio.OpenTrace(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return cluster.LoadTracePods(r, src, c)
}

func writeTable(w io.Writer, results []sim.Result, ceiling sim.Ceiling) {
	if len(results) == 0 {
		return
	}
	r0 := results[0]
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; workload: %d pods, GPU demand %.2fx capacity (seed %d)\n\n",
		r0.Nodes, r0.GPUs, r0.PodsArrived, float64(r0.GPUMilliArrived)/float64(r0.GPUMilliCapacity), r0.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tGPU alloc at 100%\tGPU alloc at end\tbelow ceiling\tshare bound\tscheduled\tfailed GPU pods\tfragmented GPUs\tseconds\t")
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
		fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%.2f points\t%s\t%d\t%d\t%.1f\t%.2f\t\n", r.Policy, atFull, 100*r.GPUAllocRatio,
			100*(ceiling.GPUAllocRatio-r.GPUAllocRatio), bound, r.PodsScheduled, r.GPUPodsFailed, r.FragGPUMilli/float64(gpu.WholeGPU), r.WallSeconds)
	}
	fmt.Fprintf(tw, "%s (offline, hindsight)\t-\t%.2f%%\t-\t-\t%d GPU pods\t%d\t-\t%.2f\t\n", ceiling.Policy, 100*ceiling.GPUAllocRatio,
		ceiling.GPUPodsPlaced, ceiling.GPUPodsFailed, ceiling.WallSeconds)
	tw.Flush()
	for _, e := range boundErrs {
		fmt.Fprintln(w, e)
	}
	switch {
	case ceiling.ShareBoundAtCapacity != nil:
		fmt.Fprintf(w, "\nno policy that places every share (pod of less than a GPU) arriving before GPU demand\nreaches capacity can pass %.2f%%; the ceiling passes it by turning such pods away\n", 100**ceiling.ShareBoundAtCapacity)
	case ceiling.ShareBoundError != "":
		fmt.Fprintf(w, "\nno share bound at capacity: %s\n", ceiling.ShareBoundError)
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

// checkModels says which pods ask in gpu_spec only for models that no node
// of the node list has: they can never be placed and count as failed under
// every policy. It warns when some do (a sample of a trace may hold a few)
// and refuses a list where every GPU pod does, which can only be the wrong
// node list.
func checkModels(stderr io.Writer, nodes []*cluster.Node, pods []*cluster.Pod, nodesName, podsName string) error {
	have := map[string]bool{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if g.Model != nil {
				have[g.Model.Name] = true
			}
		}
	}
	var bad []*cluster.Pod
	gpuPods := 0
	for _, p := range pods {
		if !p.WantsGPU() {
			continue
		}
		gpuPods++
		if len(p.GPUModels) == 0 {
			continue
		}
		if !slices.ContainsFunc(p.GPUModels, func(m string) bool { return have[m] }) {
			bad = append(bad, p)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	models := slices.Sorted(maps.Keys(have))
	msg := fmt.Sprintf("%s: %d of its %d GPU pods (the first %s) ask in gpu_spec only for models that no node of %s has (%s; the nodes have %s)",
		podsName, len(bad), gpuPods, bad[0].Name, nodesName, strings.Join(bad[0].GPUModels, "|"), strings.Join(models, ", "))
	if len(bad) == gpuPods {
		return fmt.Errorf("%s; no GPU pod could ever be placed: fix gpu_spec or use the node list the pods were traced on", msg)
	}
	fmt.Fprintf(stderr, "simulate: %s; they can never be placed and count as failed under every policy\n", msg)
	return nil
}
