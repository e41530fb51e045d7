// Package plan is the `gpupack plan` verb: which workloads to reclaim and
// share, by which method, with which MIG layouts and time-slice or MPS
// counts; the device plugin and mig-parted configs that do it; and the
// proof by simulation. It reads the snapshot and usage files and formats
// the plan package's result; the planning is there.
package plan

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpupack/gpupack/internal/usagefacts"
	"github.com/gpupack/gpupack/usage"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/cli/source"
	"github.com/gpupack/gpupack/plan"
)

var (
	//go:embed demo/cluster.yaml
	demoCluster []byte
	//go:embed demo/usage.yaml
	demoUsage []byte
)

type options struct {
	cluster    source.Cluster
	usage      string
	prometheus string
	window     string
	out        string
	format     string
	reclaim    float64
	headroom   float64
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

With no flags it runs on an embedded demo cluster and a week of its usage.`,
		Example: `  gpupack plan
  gpupack plan --snapshot cluster.yaml --usage usage.yaml --window 7d --out ./plan-out
  gpupack plan --snapshot cluster.yaml --usage usage.yaml --format json
  gpupack plan --kubeconfig ~/.kube/config --prometheus http://prometheus:9090 --window 7d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.cluster.AddFlags(f, "plan")
	f.StringVar(&o.usage, "usage", "", "usage file of per-pod facts (kind PodUsage, as `gpupack report --format podusage` writes); with the demo, the demo's usage")
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus URL to measure usage from over --window (instead of --usage)")
	f.StringVar(&o.window, "window", "", "the usage window the plan is for, such as 7d or 24h; must match the usage file's (default: the file's)")
	f.StringVar(&o.out, "out", "", "directory to write the device plugin ConfigMap, mig-parted config, node labels, workload requests and plan.md to")
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	f.Float64Var(&o.reclaim, "reclaim-idle", def.ReclaimIdleRatio, "reclaim workloads idle-held at least this share of the window (0..1)")
	f.Float64Var(&o.headroom, "headroom", def.Headroom, "headroom over measured VRAM p95 and activity when sizing a share (0.2 = 20%)")
	return cmd
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	if o.prometheus != "" && o.usage != "" {
		return errors.New("--prometheus and --usage exclude each other: measure now, or read a measurement")
	}
	usageData, usageName := []byte(nil), ""
	if o.cluster.IsDemo() && o.usage == "" && o.prometheus == "" {
		usageData, usageName = demoUsage, "demo/usage.yaml"
	}
	if o.usage != "" {
		var err error
		if usageData, err = os.ReadFile(o.usage); err != nil {
			return fmt.Errorf("--usage: %w", err)
		}
		usageName = o.usage
	}
	s, _, err := o.cluster.Load(ctx, demoCluster, "demo/cluster.yaml", stderr)
	if err != nil {
		return err
	}
	var u *plan.Usage
	if o.prometheus != "" {
		if u, err = measure(ctx, o.prometheus, o.window); err != nil {
			return err
		}
	} else if usageData != nil {
		du, err := source.ReadUsage(usageData, usageName, s, o.cluster.Name("demo/cluster.yaml"), stderr)
		if err != nil {
			return err
		}
		u = usagefacts.PlanUsage(du)
	}
	if o.window != "" {
		w, err := diagnose.ParseWindow(o.window)
		if err != nil {
			return fmt.Errorf("--window %w", err)
		}
		if u != nil && u.Window != w {
			return fmt.Errorf("--window %s, but %s covers %s; plan over the window that was measured, or measure again over %s", o.window, usageName, u.Window, o.window)
		}
		if u == nil {
			u = &plan.Usage{Window: w}
		}
	}
	p, err := plan.Make(ctx, s, u, plan.Options{ReclaimIdleRatio: o.reclaim, Headroom: o.headroom})
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
	writeTable(stdout, p, s)
	return nil
}

// measure accounts the window ending now from Prometheus and returns the
// planner's input; the window defaults to 7 days.
func measure(ctx context.Context, url, window string) (*plan.Usage, error) {
	if window == "" {
		window = "7d"
	}
	length, err := diagnose.ParseWindow(window)
	if err != nil {
		return nil, fmt.Errorf("--window %w", err)
	}
	step := usagefacts.Step(length)
	end := time.Now().UTC().Truncate(step)
	r, err := usagefacts.FromPrometheus(ctx, url, usage.Window{Start: end.Add(-length), End: end, Step: step}, usage.Pricing{Catalogue: gpu.Default()}, nil)
	if err != nil {
		return nil, err
	}
	f := usagefacts.File(r)
	du, err := f.Usage()
	if err != nil {
		return nil, fmt.Errorf("usage measured from %s: %w", url, err)
	}
	return usagefacts.PlanUsage(du), nil
}

// The files --out writes.
const (
	fileDevicePlugin = "device-plugin-configmap.yaml"
	fileMIGParted    = "mig-parted-config.yaml"
	fileNodeLabels   = "node-labels.yaml"
	fileRequests     = "workload-requests.yaml"
	fileSummary      = "plan.md"
)

func writeOut(dir string, p *plan.Plan, s *cluster.Snapshot) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	type gen struct {
		name string
		make func() ([]byte, error)
	}
	for _, g := range []gen{
		{fileDevicePlugin, p.DevicePluginConfigMap},
		{fileMIGParted, p.MIGPartedConfig},
		{fileNodeLabels, p.NodeLabels},
		{fileRequests, p.WorkloadRequests},
		{fileSummary, func() ([]byte, error) { var b strings.Builder; writeMarkdown(&b, p, s); return []byte(b.String()), nil }},
	} {
		b, err := g.make()
		if err != nil {
			return fmt.Errorf("%s: %w", g.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, g.name), b, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}

func writeTable(w io.Writer, p *plan.Plan, s *cluster.Snapshot) {
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; %d workloads; usage over %s\n", len(s.Nodes), s.GPUCount(), len(p.Decisions), windowText(p))
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tPODS\tNOW\tACTION\tAFTER\tWHY")
	for _, d := range p.Decisions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", d.Workload, d.Pods, d.Before, d.Action, afterText(d), d.Reason.Code)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, d := range p.Decisions {
		fmt.Fprintf(w, "%s: %s", d.Workload, d.Reason.Detail)
		if len(d.Risks) > 0 {
			fmt.Fprintf(w, " [risk: %s]", risksText(d.Risks))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tMODEL\tNODES\tGPUS\tMIG GPUS (BOUND, FFD)\tTIME-SLICED GPUS x REPLICAS\tMPS GPUS x CLIENTS\tWHOLE GPUS")
	for _, pp := range p.Pools {
		if !pp.Changed {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\tunchanged\t\t\t%d\n", pp.Name, pp.Model, pp.Nodes, pp.GPUs, pp.WholeGPUs)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\n", pp.Name, pp.Model, pp.Nodes, pp.GPUs, migText(pp),
			sharedText(pp.TimeSlicingGPUs, pp.TimeSlicingReplicas, pp.TimeSlicingNodes, pp.TimeSlicingGPUsNeeded),
			sharedText(pp.MPSGPUs, pp.MPSClients, pp.MPSNodes, pp.MPSGPUsNeeded), pp.WholeGPUs)
	}
	tw.Flush()
	if note := sharedNote(p); note != "" {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintln(w)
	for _, line := range proofLines(p) {
		fmt.Fprintln(w, line)
	}
}

func windowText(p *plan.Plan) string {
	if p.Window == 0 {
		return "no window (no usage measured)"
	}
	return p.Window.String()
}

func afterText(d *plan.Decision) string {
	if d.Action == plan.Unplaceable {
		return "-"
	}
	return fmt.Sprintf("%s: %d (%s)", d.After.Resource, d.After.Count, d.Method)
}

func risksText(rs []plan.Risk) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

// sharedText is a pool's time-sliced or MPS GPUs: every GPU of the nodes
// the config labels, and how many of them the workloads were sized into.
func sharedText(gpus, replicas, nodes, needed int) string {
	if nodes == 0 {
		return "0"
	}
	unit := "nodes"
	if nodes == 1 {
		unit = "node"
	}
	return fmt.Sprintf("%d x %d (%d %s, %d needed)", gpus, replicas, nodes, unit, needed)
}

// sharedNote says why a pool shares more GPUs than it needs, when one does.
func sharedNote(p *plan.Plan) string {
	for _, pp := range p.Pools {
		if pp.TimeSlicingGPUs > pp.TimeSlicingGPUsNeeded || pp.MPSGPUs > pp.MPSGPUsNeeded {
			return "time-slicing and MPS share every GPU of the nodes they configure (the device plugin cannot share only some of a node's GPUs); \"needed\" is the GPUs the workloads were sized into"
		}
	}
	return ""
}

func migText(pp plan.PoolPlan) string {
	if pp.MIGGPUs == 0 {
		return "0"
	}
	s := fmt.Sprintf("%d (%d, %d)", pp.MIGGPUs, pp.MIGLowerBound, pp.MIGFirstFit)
	if pp.MIGGPUs == pp.MIGLowerBound {
		s += " optimal"
	} else if pp.MIGOptimal {
		s += " optimal, bound not reachable"
	} else {
		s += fmt.Sprintf(" gap %d", pp.MIGGPUs-pp.MIGLowerBound)
	}
	return s
}

// proofLines words the proof, the reservations and the spot candidates.
func proofLines(p *plan.Plan) []string {
	pr := p.Proof
	out := []string{
		fmt.Sprintf("proof (replayed with %s over the changed cluster):", pr.Policy),
		fmt.Sprintf("  GPUs in use   %d -> %d (%d freed)", pr.GPUsBefore, pr.GPUsAfter, pr.GPUsFreed),
		fmt.Sprintf("  nodes in use  %d -> %d; freed: %s (%d GPUs)", pr.NodesBefore, pr.NodesAfter, listOrNone(pr.NodesFreed), pr.GPUsOnFreed),
		fmt.Sprintf("  saving        %s %.2f per month at catalogue prices, by releasing the freed nodes", pr.Currency, pr.MonthlySaving),
		fmt.Sprintf("  GPU pods pending %d -> %d; still pending: %s; unplaceable (VRAM beyond every GPU): %s", pr.PendingBefore, pr.PendingAfter, listOrNone(pr.StillPending), listOrNone(pr.Unplaceable)),
	}
	var risks []string
	for _, r := range sortedRisks(pr.Risks) {
		risks = append(risks, fmt.Sprintf("%s %d", r, pr.Risks[r]))
	}
	out = append(out, "  risks (workloads): "+listOrNone(risks))
	for _, r := range p.Reservations {
		out = append(out, fmt.Sprintf("reserve: %d %s GPUs are busy in every hour of the %dh window after the plan (peak %.2f); %d workloads with hourly data, %d without", r.BaselineGPUs, r.Model, r.Hours, r.PeakGPUs, r.Workloads, r.Without))
	}
	out = append(out, "spot: "+listOrNone(p.Spot)+" (interruptible Jobs)")
	return out
}

func sortedRisks(m map[plan.Risk]int) []plan.Risk {
	out := make([]plan.Risk, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func writeMarkdown(w io.Writer, p *plan.Plan, s *cluster.Snapshot) {
	fmt.Fprintf(w, "# GPU sharing plan\n\nCluster: %d nodes, %d GPUs; %d workloads; usage over %s.\n\n", len(s.Nodes), s.GPUCount(), len(p.Decisions), windowText(p))
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "- **Warning:** %s\n", warn)
	}
	fmt.Fprintf(w, "\n## Proof\n\n```\n%s\n```\n\n## Workloads\n\n", strings.Join(proofLines(p), "\n"))
	fmt.Fprintln(w, "| workload | pods | now | action | after | why | risks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, d := range p.Decisions {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s: %s | %s |\n", d.Workload, d.Pods, d.Before, d.Action, afterText(d), d.Reason.Code, d.Reason.Detail, risksText(d.Risks))
	}
	fmt.Fprintln(w, "\n## Pools\n\n| pool | model | nodes | GPUs | MIG GPUs (lower bound, first-fit-decreasing) | time-sliced GPUs x replicas | MPS GPUs x clients | whole GPUs |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, pp := range p.Pools {
		if !pp.Changed {
			fmt.Fprintf(w, "| %s | %s | %d | %d | unchanged | | | %d |\n", pp.Name, pp.Model, pp.Nodes, pp.GPUs, pp.WholeGPUs)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %d |\n", pp.Name, pp.Model, pp.Nodes, pp.GPUs, migText(pp),
			sharedText(pp.TimeSlicingGPUs, pp.TimeSlicingReplicas, pp.TimeSlicingNodes, pp.TimeSlicingGPUsNeeded),
			sharedText(pp.MPSGPUs, pp.MPSClients, pp.MPSNodes, pp.MPSGPUsNeeded), pp.WholeGPUs)
	}
	if note := sharedNote(p); note != "" {
		fmt.Fprintf(w, "\n%s.\n", strings.ToUpper(note[:1])+note[1:])
	}
	fmt.Fprintf(w, "\n## Apply\n\n1. `kubectl apply -f %s` and point the GPU operator's device plugin at it (`devicePlugin.config.name=%s`).\n", fileDevicePlugin, plan.ConfigMapName)
	fmt.Fprintf(w, "2. Give mig-manager `%s` as its config.\n3. Label the nodes as `%s` lists (`%s`, `%s`).\n4. Rewrite the workloads' requests as `%s` lists.\n",
		fileMIGParted, fileNodeLabels, plan.DevicePluginConfigLabel, plan.MIGConfigLabel, fileRequests)
}
