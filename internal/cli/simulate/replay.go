package simulate

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/sim"
)

// runReplay is `simulate --replay` and `--churn`: every policy replays the
// pod list (or the steady churn drawn from it) with churn; each (JSON) sees
// each result as it is done, the table comes last.
func (o *options) runReplay(ctx context.Context, stdout io.Writer, each func(any) error) error {
	r := app.Replay{Simulation: app.Simulation{Nodes: o.nodes, Pods: o.pods, Policies: o.policies, Seed: o.seed}, Speedup: o.speedup, Load: o.load}
	if o.churn != 0 {
		r.Steady = &sim.SteadyChurn{Load: o.churn, WarmupSeconds: 3600 * o.churnWarmupHours, WindowSeconds: 3600 * o.churnHours, Seed: o.seed}
	}
	if each == nil {
		r.Progress = func(policy string) func(done, total int) { return clio.Progress(os.Stderr, "replay "+policy) }
	}
	loaded := func(info sim.LoadInfo) {
		if o.format == "table" {
			fmt.Fprintf(stdout, "load: the pod list offers %.2f%% of capacity; %d copies bring it to %.3gx\n", 100*info.TraceLoad, info.Copies, info.Load)
		}
	}
	results, err := app.RunReplay(ctx, r, os.Stderr, loaded, each)
	if err != nil {
		return err
	}
	if o.format == "table" {
		writeReplayTable(stdout, results)
	}
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(o.out, "replay.csv")
	if err := writeFile(path, func(w io.Writer) error { return writeReplayCSV(w, results) }); err != nil {
		return err
	}
	if o.format == "table" {
		fmt.Fprintf(stdout, "\nwrote %s\n", path)
	}
	return nil
}

func writeReplayTable(w io.Writer, results []sim.ReplayResult) {
	if len(results) == 0 {
		return
	}
	r0 := results[0]
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; replay of %d pods, measured over %.1f h of arrivals (speedup %g, seed %d); ",
		r0.Nodes, r0.GPUs, r0.Pods, r0.WindowSeconds/3600, r0.Speedup, r0.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "offered load %.3gx capacity\n\n", r0.OfferedLoad)
	fmt.Fprintln(tw, "policy\tmean GPU alloc\tpeak GPU alloc\tGPU pods waited\twait p50 s\twait p95 s\twait p99 s\twait max s\tdemand GPU-h waited\tunplaceable\tseconds\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.2f%%\t%.2f%%\t%d of %d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f of %.0f\t%d\t%.2f\t\n", r.Policy, 100*r.MeanGPUAlloc, 100*r.PeakGPUAlloc,
			r.GPUPodsWaited, r.GPUPodsPlaced, r.WaitP50Seconds, r.WaitP95Seconds, r.WaitP99Seconds, r.WaitMaxSeconds, r.WaitedDemandGPUHours, r.DemandGPUHours, r.PodsUnplaceable, r.WallSeconds)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nwaits by GPU shape (<1: a share of one GPU; else the GPUs asked for)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tshape\tpods\twaited\twait p50 s\twait p95 s\twait p99 s\t")
	for _, r := range results {
		for _, s := range r.ByShape {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t\n", r.Policy, s.Shape, s.Pods, s.Waited, s.WaitP50Seconds, s.WaitP95Seconds, s.WaitP99Seconds)
		}
	}
	tw.Flush()
}

// writeReplayCSV writes every policy's allocation curve, one row per sample.
func writeReplayCSV(w io.Writer, results []sim.ReplayResult) error {
	if _, err := fmt.Fprintln(w, "policy,seconds,gpu_alloc_ratio,gpu_queued_ratio"); err != nil {
		return err
	}
	for _, r := range results {
		for _, p := range r.Curve {
			if _, err := fmt.Fprintf(w, "%s,%.3f,%.6f,%.6f\n", r.Policy, p.Seconds, p.AllocRatio, p.QueuedRatio); err != nil {
				return err
			}
		}
	}
	return nil
}
