// Package diagnose is the `gpupack diagnose` verb: why each Pending GPU pod
// waits, with evidence and the fix. It turns flags into an
// app.DiagnoseRequest and formats the findings; the use case is
// internal/app's, the diagnosis the diagnose package's.
package diagnose

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/cli/clio/sourceflag"
	"github.com/gpupack/gpupack/internal/render/adviceout"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/usage"
)

type options struct {
	cluster  app.Cluster
	snapshot string
	usage    string
	pod      string
	format   string
	// running shows the application step for running pods instead,
	// measured from prometheus over window (the demo week without).
	running    bool
	prometheus string
	window     string
	maxAnswer  int64
	access     promql.Access
	selector   promql.Selector
}

// NewCommand returns the diagnose command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Explain why each Pending GPU pod waits: allocation, memory, placement or elsewhere",
		Long: `diagnose explains every Pending GPU pod of a cluster snapshot with the first
cause in this order, the evidence and the fix:
  quota-exhausted   a ResourceQuota on GPUs refused a workload's pod, so the pod does not
                    exist: the workload is the finding (read from its FailedCreate events)
  claim-missing     a ResourceClaim (or its template) that the pod names does not exist
  allocation        matching GPUs exist but all are held (names the holders and how active they are);
                    for DRA claims, the devices its class and selectors accept are held
  memory            the pod's GPU memory need fits no free VRAM or MIG slice
  placement         GPUs are free but the pod's selector, affinity, tolerations or GPU model exclude them;
                    for DRA claims, no node has enough devices that the class and selectors accept
  no-such-hardware  no node could run it, even empty
  quota/other       the cause is outside GPUs (CPU, memory, quota, the queue); a pod that
                    fits now is here, with its workload's usage as evidence when measured

After them, the GPU pods that failed after scheduling, from their status:
  rejected          the kubelet refused to admit the pod (the device plugin refused
                    time-sliced replicas, or its GPUs went unhealthy)
  crashing          a container keeps dying on its GPU (CUDA out of memory, a GPU fault)

--running shows the fourth step of the order, the application, for the running
GPU pods instead: for each, whether the GPU is the bottleneck at all, with the
evidence beside its usage pattern and what to change instead of adding GPUs:
  gpu-bound     the GPU is busy: keep it, reserve it as a baseline
  cpu-bound     its CPU limit throttles it (cAdvisor's CFS periods) while the GPU waits
                between bursts: raise the limit, with the numbers
  input-bound   activity stays low while data arrives from the network, disk, PCIe or
                NVLink: stage the input locally, faster storage, or overlapped copies
  memory-bound  DRAM busy while the SMs wait: cut memory traffic
  idle-held     it holds a GPU it does not use: release it
  undetermined  underused, but no series says why: what to export
It measures from --prometheus over --window (7d by default), or the demo week.

With no flags it runs on an embedded demo cluster with pending pods of every cause.
--usage adds per-pod usage facts (activity, pattern, VRAM used, model for a memory estimate).

--kubeconfig (or --live, which finds the cluster as kubectl does) diagnoses the
live cluster instead, and shows beside each pending pod the kube-scheduler's last
FailedScheduling message and whether gpupack's cause is one the message implies.`,
		Example: `  gpupack diagnose
  gpupack diagnose --snapshot cluster.yaml --usage usage.yaml
  gpupack diagnose --snapshot cluster.yaml --pod ml/train-7b --format json
  gpupack diagnose --kubeconfig ~/.kube/config
  gpupack diagnose --live --usage usage.yaml
  gpupack diagnose --running
  gpupack diagnose --running --prometheus http://prometheus:9090 --window 24h --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	sourceflag.AddCluster(f, &o.cluster, "diagnose")
	f.StringVar(&o.usage, "usage", "", "usage file of per-pod facts (kind PodUsage); with the demo, the demo's usage")
	f.StringVar(&o.pod, "pod", "", "diagnose only this pending pod (namespace/name)")
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	f.BoolVar(&o.running, "running", false, "show what limits each running GPU pod (the application step) instead of the pending pods")
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus URL to measure the running pods from over --window (--running; default the demo week)")
	f.StringVar(&o.window, "window", "", "the window that ends now, such as 24h or 7d (--running with --prometheus; default 7d)")
	sourceflag.AddMaxAnswer(f, &o.maxAnswer)
	sourceflag.AddAccess(f, &o.access)
	sourceflag.AddSelector(f, &o.selector)
	return cmd
}

// runRunning writes the running pods' verdicts.
func runRunning(ctx context.Context, o *options, stdout io.Writer) error {
	switch {
	case o.usage != "" || o.pod != "":
		return fmt.Errorf("--running judges the running pods from their measured series; --usage and --pod are for pending pods: leave them out")
	case o.window != "" && o.prometheus == "":
		return fmt.Errorf("--window %s needs --prometheus: without it --running shows the demo week", o.window)
	}
	from := app.Measurement{Prometheus: o.prometheus, MaxAnswer: o.maxAnswer, Access: o.access, Selector: o.selector}
	run, err := app.Running(ctx, app.RunningRequest{From: from, Window: o.window}, gpu.Default(), time.Now())
	if err != nil {
		return err
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(run)
	}
	writeRunning(stdout, run)
	return nil
}

// writeRunning writes the verdicts as a table, the pods whose change frees
// most first.
func writeRunning(w io.Writer, run usage.Running) {
	var b strings.Builder
	fmt.Fprintf(&b, "What limits the running GPU pods, %s .. %s: %s\n", run.Start.Format(time.RFC3339), run.End.Format(time.RFC3339), adviceout.Counts(run.Counts))
	if line := adviceout.Field(run.Field); line != "" {
		fmt.Fprintln(&b, line)
	}
	for _, p := range run.Pods {
		v := &p.Bottleneck
		fmt.Fprintf(&b, "\n%s on %s: %s (pattern %s, %.1f GPU-hours)\n", p.Pod, p.Node, v.Verdict, v.Pattern, p.AllocatedGPUSeconds.Hours())
		fmt.Fprintf(&b, "  evidence: %s\n  change:   %s\n", adviceout.Evidence(v), adviceout.Change(v))
	}
	_, _ = io.WriteString(w, b.String())
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
	if o.running {
		return runRunning(ctx, o, stdout)
	}
	if o.prometheus != "" {
		return fmt.Errorf("--prometheus measures the running pods: add --running, or give pending pods' usage with --usage")
	}
	d, err := app.Diagnose(ctx, app.DiagnoseRequest{Cluster: o.cluster, Usage: o.usage, Pod: o.pod}, stderr)
	if err != nil {
		return err
	}
	live := o.cluster.IsLive()
	var views map[string]app.SchedulerView
	if live {
		views = app.SchedulerViews(d.Report, d.Failures)
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if live {
			return enc.Encode(liveReport{Report: d.Report, Scheduler: views})
		}
		return enc.Encode(d.Report)
	}
	writeTable(stdout, d.Report, views)
	return nil
}

// liveReport is the JSON of a live diagnosis: the report, and what the
// kube-scheduler said of each pending pod.
type liveReport struct {
	*diagnose.Report
	Scheduler map[string]app.SchedulerView `json:"scheduler"`
}

// writeTable writes the report; views, for a live cluster, adds the
// kube-scheduler's message and the agreement under each pod.
func writeTable(w io.Writer, rep *diagnose.Report, views map[string]app.SchedulerView) {
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; %d pending pods", rep.Nodes, rep.GPUs, rep.Pending)
	if len(rep.Failures) > 0 {
		fmt.Fprintf(w, "; %d GPU pods failed after scheduling", len(rep.Failures))
	}
	fmt.Fprintln(w)
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	for _, u := range rep.UnknownModels {
		fmt.Fprintf(w, "unknown GPU model: %s; add it to a --catalogue file\n", u.Describe())
	}
	for _, f := range rep.Findings {
		writeFinding(w, f, rep.Nodes, views)
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(w, "\nfailed after scheduling (the scheduler placed them; the node did not run them):\n")
	}
	for _, f := range rep.Failures {
		writeFinding(w, f, rep.Nodes, nil)
	}
}

// writeFinding writes one finding: its subject and cause, gpupack's and
// the scheduler's view, the evidence and the fixes with their remedies.
func writeFinding(w io.Writer, f diagnose.Finding, nodes int, views map[string]app.SchedulerView) {
	fmt.Fprintln(w)
	if f.Cause == "" {
		fmt.Fprintf(w, "%s: %s\n", f.Pod, f.Note)
		return
	}
	cause := strings.ToUpper(string(f.Cause))
	if len(f.Also) > 0 {
		also := make([]string, len(f.Also))
		for i, c := range f.Also {
			also[i] = string(c)
		}
		cause += " (also " + strings.Join(also, ", ") + ")"
	}
	fmt.Fprintf(w, "%s (%s): %s\n", f.Subject(), f.Request, cause)
	if f.Summary != "" {
		fmt.Fprintf(w, "  scheduler: %s\n", f.Summary)
	}
	for i, line := range gpupackLines(f, nodes) {
		label := "  gpupack:   "
		if i > 0 {
			label = "             "
		}
		fmt.Fprintf(w, "%s%s\n", label, line)
	}
	if views != nil && f.Workload == nil {
		for _, line := range schedulerLines(f, views) {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	for _, line := range evidenceLines(f) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	for i, fix := range f.Fix {
		label := "  fix:      "
		if i > 0 && f.Evidence.Failure == nil {
			label = "  or:       " // a failure's fixes are steps, not choices
		}
		fmt.Fprintf(w, "%s%s\n", label, fix)
		for _, r := range f.Remedies {
			if r.Fix != i {
				continue
			}
			for _, line := range remedyLines(r) {
				fmt.Fprintf(w, "            %s\n", line)
			}
		}
	}
}

// remedyLines show what to apply for a fix under it, marked "apply:", and
// what to know first, marked "note:". Advice has nothing to apply, and its
// reason is in the JSON only.
func remedyLines(r diagnose.Remedy) []string {
	if r.Kind == diagnose.Advice {
		return nil
	}
	var art []string
	switch {
	case r.Config != "":
		art = append(art, "add to the mig-parted config:")
		for _, line := range strings.Split(strings.TrimSuffix(r.Config, "\n"), "\n") {
			art = append(art, "  "+line)
		}
		for _, c := range r.Commands {
			art = append(art, "then: "+c)
		}
	case len(r.Commands) > 0:
		art = r.Commands
	case r.Patch != nil:
		art = []string{patchTitle(r) + ":", string(r.Patch.Body)}
	}
	var out []string
	for i, line := range art {
		label := "        "
		if i == 0 {
			label = "apply:  "
		}
		out = append(out, label+line)
	}
	if r.Note != "" {
		out = append(out, "note:   "+r.Note)
	}
	return out
}

// patchTitle names a patch that no command applies: its target and type,
// as `kubectl patch --type` takes it.
func patchTitle(r diagnose.Remedy) string {
	target := "the pod"
	if len(r.Targets) == 1 {
		target = r.Targets[0].String()
	}
	return fmt.Sprintf("patch of %s (kubectl patch --type=%s)", target, r.Patch.Type)
}

// schedulerLines word what the kube-scheduler said of the pod, and whether
// gpupack's cause agrees.
func schedulerLines(f diagnose.Finding, views map[string]app.SchedulerView) []string {
	v, ok := views[f.Pod]
	if !ok {
		return []string{"kube-scheduler: no FailedScheduling message for this pod (not tried yet, or the event expired)"}
	}
	lines := []string{fmt.Sprintf("kube-scheduler (%s): %s", v.Time.UTC().Format(time.RFC3339), v.Message)}
	implies := make([]string, len(v.Implies))
	for i, c := range v.Implies {
		implies[i] = string(c)
	}
	switch {
	case len(v.Implies) == 0:
		lines = append(lines, "agreement: unknown (gpupack cannot read that message)")
	case v.Agrees:
		lines = append(lines, fmt.Sprintf("agreement: yes (the message implies %s)", strings.Join(implies, " or ")))
	default:
		lines = append(lines, fmt.Sprintf("agreement: NO (the message implies %s; gpupack finds %s)", strings.Join(implies, " or "), f.Cause))
	}
	return lines
}

// gpupackLines are gpupack's own view of the nodes, apart from the stock
// scheduler's message: why there is no stock message, if there is none,
// then per group of nodes what gpupack's fit finds, in gpupack's words.
func gpupackLines(f diagnose.Finding, nodes int) []string {
	if f.Workload != nil || f.Evidence.Failure != nil {
		return []string{f.StockNote} // no pod to place, or one placed already
	}
	first := ""
	if f.StockNote != "" {
		first = "no scheduler message: " + f.StockNote + "; "
	}
	fits := 0
	var groups []string
	for _, g := range f.Fit {
		if len(g.Reasons) == 0 {
			fits += g.NodeCount
			continue
		}
		why := make([]string, len(g.Reasons))
		for i, r := range g.Reasons {
			why[i] = reasonText(r)
		}
		groups = append(groups, diagnose.JoinNames(g.Nodes, g.NodeCount)+": "+strings.Join(why, ", "))
	}
	lines := []string{first + fmt.Sprintf("fits %d of %d nodes now", fits, nodes)}
	if len(groups) > diagnose.MaxListed {
		rest := len(groups) - diagnose.MaxListed
		groups = append(groups[:diagnose.MaxListed], fmt.Sprintf("and %d more groups of nodes", rest))
	}
	return append(lines, groups...)
}

// reasonText words one of gpupack's reasons for the gpupack line.
func reasonText(r placement.Reason) string {
	switch r.Code {
	case placement.NodeUnschedulable:
		return "cordoned"
	case placement.NodeAffinityMismatch:
		return r.Detail + " not met"
	case placement.TaintNotTolerated:
		return "taint {" + r.Detail + "} not tolerated"
	case placement.NodeSelectorMismatch, placement.GPUModelMismatch, placement.SharingModeMismatch, placement.IsolationConflict,
		placement.ClaimUnallocatable, placement.ClaimCounterExhausted, placement.ClaimCapacityInsufficient, placement.ClaimSelectorError, placement.ClaimNotFound, placement.ClaimTaintNotTolerated, placement.ClaimConstraintUnsatisfied:
		return r.Detail
	}
	resource := r.Resource
	if resource == "gpu-memory" {
		resource = "GPU memory"
	}
	s := fmt.Sprintf("%s short (requested %d, free %d of %d %s)", resource, r.Requested, r.Free, r.Capacity, r.Unit)
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}

// kueueLines say what Kueue's objects show of a gated pod: its Workload
// and queues, then per flavor and resource the quota's figures.
func kueueLines(k *diagnose.KueueFacts) []string {
	line := "kueue:    " + string(k.Problem)
	for _, o := range []*diagnose.Object{k.Workload, k.LocalQueue, k.ClusterQueue} {
		if o != nil {
			line += "; " + o.String()
		}
	}
	if k.Cohort != "" {
		line += "; cohort " + k.Cohort
	}
	out := []string{line}
	for _, fl := range k.Flavors {
		for _, r := range fl.Resources {
			amount := func(v int64) string { return cluster.FormatKueueAmount(r.Resource, v) }
			reserved, needed := "unknown", "unknown"
			if r.Reserved != nil {
				reserved, needed = amount(*r.Reserved), amount(*r.Needed)
			}
			l := fmt.Sprintf("          flavor %s, %s: nominal %s, reserved %s, asked %s; %s needed", fl.Flavor, r.Resource, amount(r.Nominal), reserved, amount(r.Requested), needed)
			if r.Lacks > 0 {
				l += ", lacks " + amount(r.Lacks)
			}
			if r.BorrowingLimit != nil {
				l += ", borrowing limit " + amount(*r.BorrowingLimit)
			}
			out = append(out, l)
		}
	}
	if len(k.Uncovered) > 0 {
		out = append(out, "          not covered: "+strings.Join(k.Uncovered, ", "))
	}
	if k.Inactive != nil {
		out = append(out, fmt.Sprintf("          inactive: %s: %s", k.Inactive.Reason, k.Inactive.Message))
	}
	if k.Pending != "" {
		out = append(out, "          kueue says: "+k.Pending)
	}
	return out
}

func evidenceLines(f diagnose.Finding) []string {
	ev := f.Evidence
	var out []string
	nodes := diagnose.JoinNames(ev.Nodes, ev.NodeCount)
	if len(ev.Claims) > 0 {
		return claimLines(ev.Claims)
	}
	if fl := ev.Failure; fl != nil {
		return failureLines(fl)
	}
	switch f.Cause {
	case diagnose.Gated:
		out = append(out, "evidence: spec.schedulingGates "+strings.Join(ev.Gates, ", ")+": no scheduler considers the pod until they are removed")
		if k := ev.Kueue; k != nil {
			out = append(out, kueueLines(k)...)
		}
	case diagnose.NoScheduler:
		if sc := ev.Scheduler; sc != nil {
			running := "none seen"
			if len(sc.Running) > 0 {
				running = strings.Join(sc.Running, ", ")
			}
			out = append(out, fmt.Sprintf("evidence: spec.schedulerName %s, and no scheduler of that name runs (no current Lease, no event from it); running: %s", sc.Name, running))
		}
	case diagnose.QuotaExhausted:
		q := ev.Quota
		for _, r := range q.Resources {
			out = append(out, fmt.Sprintf("evidence: %s refused pod %s: %s requested %d, used %d, hard %d; %d needed", q.Quota, q.Pod, r.Resource, r.Requested, r.Used, r.Hard, r.Needed))
		}
		if h := q.Holders; h != nil {
			line := fmt.Sprintf("holders:  %d GPU pods of %s count against it", h.Pods, q.Quota.Namespace)
			if h.Measured > 0 {
				line += fmt.Sprintf("; mean activity over %s: %s; %d of them are idle-held", h.Window, pct(*h.MeanActiveRatio), h.IdleHeld)
			}
			out = append(out, line, "          "+holderNames(h))
		}
	case diagnose.Allocation:
		h := ev.Holders
		line := fmt.Sprintf("evidence: all %d %s GPUs on %s are held by %d pods", ev.GPUs, strings.Join(ev.GPUModels, "/"), nodes, h.Pods)
		if h.Measured > 0 {
			line += fmt.Sprintf("; mean activity of the holders over %s: %s; %d of them are idle-held", h.Window, pct(*h.MeanActiveRatio), h.IdleHeld)
		}
		out = append(out, line, "holders:  "+holderNames(h))
	case diagnose.Memory:
		m := ev.Memory
		line := fmt.Sprintf("evidence: needs %s per GPU (%s)", m.Need, m.Source)
		if e := m.Estimate; e != nil {
			line += fmt.Sprintf(" = weights %s + KV cache %s + overhead %s", e.Weights, e.KVCache, e.Overhead)
		}
		line += fmt.Sprintf("; the most free on one usable GPU is %s, the largest usable GPU has %s", m.LargestFree, m.LargestGPU)
		if len(m.LargestGPUNodes) > 0 {
			line += " (" + diagnose.JoinNames(m.LargestGPUNodes, m.LargestGPUNodeCount) + ")"
		}
		out = append(out, line)
	case diagnose.Placement:
		for _, r := range ev.Relayouts {
			line := fmt.Sprintf("evidence: MIG layout %s of %s/gpu%d offers no free %s slice", r.From, r.Node, r.GPU, strings.TrimPrefix(f.Request, "MIG "))
			if len(r.Keeps) > 0 {
				line += "; running slices: " + strings.Join(r.Keeps, ", ")
			}
			out = append(out, line)
		}
		if len(ev.Relayouts) > 0 && len(ev.Rules) == 0 {
			break
		}
		if ev.RulesExcludeHeld {
			out = append(out, fmt.Sprintf("evidence: %d %s GPUs on %s could run it, but the pod's rules exclude them, and they are fully allocated", ev.GPUs, strings.Join(ev.GPUModels, "/"), nodes))
		} else {
			out = append(out, fmt.Sprintf("evidence: %d %s GPUs on %s have room, but the pod's rules exclude them", ev.GPUs, strings.Join(ev.GPUModels, "/"), nodes))
		}
		for _, r := range ev.Rules {
			rule := r.Rule
			if r.Message != r.Rule {
				rule += " (" + r.Message + ")"
			}
			out = append(out, fmt.Sprintf("rule:     %s excludes %s", rule, diagnose.JoinNames(r.Excludes, r.ExcludesCount)))
		}
	case diagnose.Application:
		u := ev.Usage
		out = append(out, fmt.Sprintf("evidence: fits %s now; its workload's GPUs are %s, %s active over %s", nodes, u.Pattern, pct(u.ActiveRatio), u.Window))
	case diagnose.NoSuchHardware, diagnose.Other:
		if ev.NodeCount > 0 && len(ev.Nodes) > 0 {
			out = append(out, "evidence: fits "+nodes+" now")
		}
		if u := ev.Usage; u != nil {
			out = append(out, fmt.Sprintf("usage:    its workload's GPUs are %s, %s active over %s", u.Pattern, pct(u.ActiveRatio), u.Window))
		}
		for _, r := range ev.Blocking {
			out = append(out, "blocking: "+r.String())
		}
	}
	return out
}

// claimLines words the evidence of a pod's ResourceClaims: per failing
// request, what the cluster's devices offer it.
func claimLines(claims []diagnose.ClaimFacts) []string {
	var out []string
	for _, c := range claims {
		need := fmt.Sprintf("%d", c.Needed)
		if c.All {
			need = "all it accepts"
		}
		line := fmt.Sprintf("evidence: claim %s, request %s: class %s, %d device(s) in the cluster, %d accepted by its selectors, %d free; it needs %s on one node (at most %d on one node: %s)",
			c.Claim, c.Request, c.Class, c.Offered, c.Accepted, c.Free, need, c.MostAccepted, c.MostAcceptedNode)
		out = append(out, line)
		if len(c.Selectors) > 0 {
			out = append(out, "selectors: "+strings.Join(c.Selectors, " && "))
		}
		for _, p := range c.Products {
			out = append(out, fmt.Sprintf("offered:  productName %q: %d device(s), %d free", p.Product, p.Devices, p.Free))
		}
		if len(c.Holders) > 0 {
			out = append(out, "holders:  "+strings.Join(c.Holders, ", "))
		}
		if k := c.Counter; k != nil {
			out = append(out, fmt.Sprintf("counter:  %s of counter set %s on %s GPU %d: %d left, a device needs %d; it excludes %d accepted device(s) no claim holds",
				k.Counter, k.Set, c.CounterNode, k.GPU, k.Left, k.Needed, k.Blocked))
		}
		for _, d := range c.Taints {
			taint := cluster.DeviceTaint{Key: d.Key, Value: d.Value, Effect: d.Effect}.String()
			if d.Rule != "" {
				taint += " (DeviceTaintRule " + d.Rule + ")"
			}
			out = append(out, fmt.Sprintf("tainted:  %s on %s: %s, not tolerated", d.Device, d.Node, taint))
		}
	}
	return out
}

func pct(r float64) string { return fmt.Sprintf("%.0f%%", 100*r) }

// holderNames lists the holders, each with its pattern and activity where
// measured, and how many more there are.
func holderNames(h *diagnose.HolderStats) string {
	var hs []string
	for _, x := range h.Listed {
		if x.Measured {
			hs = append(hs, fmt.Sprintf("%s %s %s", x.Pod, x.Pattern, pct(*x.ActiveRatio)))
		} else {
			hs = append(hs, x.Pod)
		}
	}
	return diagnose.JoinNames(hs, h.Pods)
}

// failureLines say what the status of a pod that failed after scheduling
// reads: the kubelet's or the container's words and what they mean, the
// GPU, and what the usage facts add.
func failureLines(fl *diagnose.FailureFacts) []string {
	line := fmt.Sprintf("evidence: %s: %s", fl.Kind, fl.Reason)
	if fl.ExitCode != nil || fl.Restarts > 0 {
		line += fmt.Sprintf(" of container %s, %d restarts", fl.Container, fl.Restarts)
		if fl.ExitCode != nil {
			line += fmt.Sprintf(", exit code %d", *fl.ExitCode)
		}
	}
	out := []string{line}
	if fl.Evidence != "" {
		out = append(out, "          says: "+fl.Evidence)
	}
	if g := fl.GPU; g != nil {
		gl := fmt.Sprintf("          GPU: %s, %d MiB, %s", g.Model, g.Memory, g.Sharing)
		if g.Replicas > 1 {
			gl += fmt.Sprintf(" (%d replicas)", g.Replicas)
		}
		out = append(out, gl)
	}
	if fl.VRAMUsedP95 != nil {
		out = append(out, fmt.Sprintf("          VRAM used p95: %d MiB", *fl.VRAMUsedP95))
	}
	for _, u := range fl.Unhealthy {
		out = append(out, fmt.Sprintf("          GPU %s of node %s reported XID %d", u.UUID, u.Node, u.XID))
	}
	return out
}
