// Package planout formats a plan for people and tools: the table that
// `gpupack plan` prints, and the files that `gpupack plan --out` writes and
// `gpupack serve` offers for download (the device plugin ConfigMap, the
// mig-parted config, the node labels, the workload requests, the KEDA
// ScaledObjects and Karpenter NodePools, the DRA objects and
// DeviceTaintRules, and plan.md).
//
// It is an edge package: the planning is plan's, and it writes nothing to
// disk itself. It owns the resource.k8s.io/v1 objects of NVIDIA's DRA
// driver (DeviceClasses, ResourceClaims with the driver's opaque sharing
// config, ResourceClaimTemplates, DeviceTaintRules), which it builds with
// the k8s.io/api types from plan's intent (plan.DRAPlan,
// plan.DeviceTaintRule) and the driver's words in api/nvidiadra. It must
// not import client-go or a CLI library: it talks to no cluster.
package planout

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpupack/gpupack/api/nvidiadra"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/util/listing"
	"github.com/gpupack/gpupack/plan"
)

// The files a plan emits, by name.
const (
	FileDevicePlugin = "device-plugin-configmap.yaml"
	FileMIGParted    = "mig-parted-config.yaml"
	FileNodeLabels   = "node-labels.yaml"
	FileRequests     = "workload-requests.yaml"
	FileKEDA         = "keda-scaledobjects.yaml"
	FileKarpenter    = "karpenter-nodepools.yaml"
	FileSummary      = "plan.md"
	// FileDRA holds the DeviceClasses, ResourceClaims and
	// ResourceClaimTemplates for GPUs offered through DRA; it is written
	// only when the cluster has such GPUs.
	FileDRA = "dra-resources.yaml"
	// FileDRATaintRules holds the DeviceTaintRules for DRA GPUs that
	// reported an XID error marking them unhealthy; it is written only
	// when there are such GPUs.
	FileDRATaintRules = "dra-device-taint-rules.yaml"
)

// File is one emitted file: its name and content.
type File struct {
	Name string
	Data []byte
}

// Files generates every file of the plan p of snapshot s, in a fixed order.
func Files(p *plan.Plan, s *cluster.Snapshot) ([]File, error) {
	type gen struct {
		name string
		make func() ([]byte, error)
	}
	var out []File
	for _, g := range []gen{
		{FileDevicePlugin, p.DevicePluginConfigMap},
		{FileMIGParted, p.MIGPartedConfig},
		{FileNodeLabels, p.NodeLabels},
		{FileRequests, p.WorkloadRequests},
		{FileKEDA, p.KEDAScaledObjects},
		{FileKarpenter, p.KarpenterNodePools},
		{FileDRA, func() ([]byte, error) { return draManifests(p) }},
		{FileDRATaintRules, func() ([]byte, error) { return taintRuleManifests(p) }},
		{FileSummary, func() ([]byte, error) { var b strings.Builder; writeMarkdown(&b, p, s); return []byte(b.String()), nil }},
	} {
		b, err := g.make()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.name, err)
		}
		if (g.name == FileDRA && p.DRA == nil) || (g.name == FileDRATaintRules && len(p.TaintRules) == 0) {
			continue
		}
		out = append(out, File{Name: g.name, Data: b})
	}
	return out, nil
}

// WriteTable writes the plan as `gpupack plan` prints it.
func WriteTable(w io.Writer, p *plan.Plan, s *cluster.Snapshot) {
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; %d workloads; usage over %s\n", len(s.Nodes), s.GPUCount(), len(p.Decisions), windowText(p))
	for _, n := range notices(p) {
		fmt.Fprintf(w, "%s: %s\n", n.label, n.text)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tPODS\tNOW\tACTION\tAFTER\tWHY")
	for _, d := range p.Decisions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", d.Workload, d.Pods, d.Before, d.Action, AfterText(d), d.Reason.Code)
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
		fmt.Fprintln(tw, strings.Join(PoolCells(pp), "\t"))
	}
	tw.Flush()
	if note := sharedNote(p); note != "" {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintln(w)
	for _, line := range proofLines(p) {
		fmt.Fprintln(w, line)
	}
	for _, line := range append(draLines(p), taintLines(p)...) {
		fmt.Fprintln(w, line)
	}
}

// notice is one line that heads the plan's table and plan.md: a label
// ("warning", "unknown GPU model") and what it says.
type notice struct{ label, text string }

// notices are the plan's warnings, then its unknown GPU models, in the
// order both writers print them.
func notices(p *plan.Plan) []notice {
	var out []notice
	for _, warn := range p.Warnings {
		out = append(out, notice{"warning", warn})
	}
	for _, u := range p.UnknownModels {
		out = append(out, notice{"unknown GPU model", u.Describe() + "; add it to a --catalogue file"})
	}
	return out
}

// draLines words how the workloads on GPUs offered through DRA get their
// share: the claim their pods reference, or the claim template and the
// DeviceClass that serves their rewritten request.
func draLines(p *plan.Plan) []string {
	if p.DRA == nil {
		return nil
	}
	var out []string
	for _, d := range p.Decisions {
		sel := selectorText(d.After.NodeSelector)
		switch {
		case d.After.ResourceClaim != "":
			out = append(out, fmt.Sprintf("dra: %s: its %d pods share one GPU (%s) by referencing ResourceClaim %s, with node selector %s", d.Workload, d.Pods, d.Method, d.After.ResourceClaim, sel))
		case d.After.ResourceClaimTemplate != "":
			out = append(out, fmt.Sprintf("dra: %s: each pod gets a MIG %s device by asking %s (DeviceClass %s), or from ResourceClaimTemplate %s, with node selector %s", d.Workload, d.Profile, d.After.Resource, nvidiadra.MIGClassName(d.Profile), d.After.ResourceClaimTemplate, sel))
		}
	}
	return append(out, fmt.Sprintf("dra: %d DeviceClasses, %d ResourceClaims, %d ResourceClaimTemplates in %s; NVIDIA's DRA driver needs its TimeSlicingSettings and MPSSupport feature gates for the claims' sharing configs", len(DeviceClasses(p.DRA.MIGProfiles)), len(p.DRA.Claims), len(p.DRA.ClaimTemplates), FileDRA))
}

// taintLines name each DRA GPU that reported an XID marking it unhealthy
// and the DeviceTaintRules that keep new claims off it.
func taintLines(p *plan.Plan) []string {
	var out []string
	for _, t := range p.Tainted {
		out = append(out, fmt.Sprintf("dra: GPU %s of %s reported XID %d: DeviceTaintRule %s in %s taints %s with %s=%d:NoSchedule, so no new claim gets it while the pods holding it run on; delete the rule once the GPU is repaired",
			t.UUID, t.Node, t.XID, strings.Join(t.Rules, ", "), FileDRATaintRules, strings.Join(t.Devices, ", "), wellknown.TaintXID, t.XID))
	}
	return out
}

func selectorText(sel map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		out = append(out, k+"="+sel[k])
	}
	return listOrNone(out)
}

func windowText(p *plan.Plan) string {
	if p.Window == 0 {
		return "no window (no usage measured)"
	}
	return p.Window.String()
}

// AfterText words what a decision leaves the workload with: "nvidia.com/mig-1g.10gb: 1 (mig)",
// or the ResourceClaim its pods share: "claim gpupack-chat-dev-time-slicing (time-slicing)".
func AfterText(d *plan.Decision) string {
	switch {
	case d.Action == plan.Unplaceable:
		return "-"
	case d.After.ResourceClaim != "":
		return fmt.Sprintf("claim %s (%s)", d.After.ResourceClaim, d.Method)
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

// PoolCells are a pool's cells in the plan's pool table: name, model,
// nodes, GPUs, MIG GPUs (bound, first-fit-decreasing), time-sliced GPUs
// x replicas, MPS GPUs x clients, whole GPUs; an unchanged pool says so
// in the MIG cell and leaves the two after it empty.
func PoolCells(pp plan.PoolPlan) []string {
	head := []string{pp.Name, pp.Model, strconv.Itoa(pp.Nodes), strconv.Itoa(pp.GPUs)}
	if !pp.Changed {
		return append(head, "unchanged", "", "", strconv.Itoa(pp.WholeGPUs))
	}
	return append(head, migText(pp),
		sharedText(pp.TimeSlicingGPUs, pp.TimeSlicingReplicas, pp.TimeSlicingNodes, pp.TimeSlicingGPUsNeeded),
		sharedText(pp.MPSGPUs, pp.MPSClients, pp.MPSNodes, pp.MPSGPUsNeeded), strconv.Itoa(pp.WholeGPUs))
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
	return append(out, MoneyLines(p)...)
}

// MoneyLines words the reservations, the spot candidates, the
// ScaledObjects and the NodePools, each with its money where it has one:
// the lines "reserve: ", "spot: ", "scale: " and "nodepool: " of the
// plan's table.
func MoneyLines(p *plan.Plan) []string {
	var out []string
	pr := p.Proof
	for _, r := range p.Reservations {
		out = append(out, reserveLine(r, pr.Currency))
	}
	if len(p.SpotCandidates) == 0 {
		out = append(out, "spot: none (no workload whose history shows it tolerates interruption)")
	}
	for _, c := range p.SpotCandidates {
		out = append(out, spotLine(c, pr.Currency))
	}
	return append(out, autoscalingLines(p)...)
}

// reserveLine words one model's reservation baseline: the level held, the
// measured levels it rests on, the saving and the risk.
func reserveLine(r plan.Reservation, currency string) string {
	s := fmt.Sprintf("reserve: %d %s GPUs: the level busy after the plan in >= %.0f%% of the %dh window's hours is %.2f GPUs (min %.2f, peak %.2f)",
		r.BaselineGPUs, r.Model, r.Quantile*100, r.Hours, r.LevelGPUs, r.MinGPUs, r.PeakGPUs)
	if m := r.Measured; m != nil {
		s += fmt.Sprintf("; measured before it, >= %.2f allocated and >= %.2f active in %.0f%% of hours (min %.2f allocated)", m.AllocatedGPUs, m.ActiveGPUs, r.Quantile*100, m.MinAllocatedGPUs)
	} else {
		s += "; allocation per hour not measured"
	}
	s += fmt.Sprintf("; %d workloads with hourly data, %d without", r.Workloads, r.Without)
	switch {
	case r.BaselineGPUs == 0:
		s += "; nothing to commit to"
	case !r.Priced:
		s += "; the catalogue has no price for it"
	default:
		s += fmt.Sprintf("; saves %s %.2f per month at %.0f%% off", currency, r.SavingPerMonth, r.Discount*100)
		if r.RiskPerMonth > 0 {
			s += fmt.Sprintf("; if usage falls to the window's minimum (%.2f GPUs), %s %.2f per month of it is paid unused", r.MinGPUs, currency, r.RiskPerMonth)
		} else {
			s += "; no hour of the window fell below it, so at the window's minimum none of it is paid unused"
		}
	}
	return s
}

// spotLine words one spot candidate.
func spotLine(c plan.SpotCandidate, currency string) string {
	s := fmt.Sprintf("spot: %s: %s; %.2f %s GPUs busy on average over the window", c.Workload, c.Why, c.GPUs, c.Model)
	if !c.Measured {
		s = fmt.Sprintf("spot: %s: %s; holds %.2f %s GPUs (hourly activity not measured)", c.Workload, c.Why, c.GPUs, c.Model)
	}
	if c.Priced {
		s += fmt.Sprintf("; spot saves %s %.2f per month at %.0f%% off", currency, c.SavingPerMonth, c.Discount*100)
	}
	return s
}

// autoscalingLines words the ScaledObjects and NodePools.
func autoscalingLines(p *plan.Plan) []string {
	a := p.Autoscaling
	if a == nil {
		return nil
	}
	var out []string
	for _, so := range a.ScaledObjects {
		target := fmt.Sprintf("%g per replica", so.Metric.Target)
		if so.Metric.MetricType == plan.Value {
			target = fmt.Sprintf("held at %g", so.Metric.Target)
		}
		out = append(out, fmt.Sprintf("scale: %s %d..%d replicas on %s (%s) onto NodePool %s; %s", so.Workload, so.MinReplicas, so.MaxReplicas, so.Metric.Metric, target, so.NodePool, so.Range))
	}
	if len(a.ScaledObjects) == 0 {
		out = append(out, "scale: none (name inference workloads and their application metric in a --autoscaling file)")
	}
	for _, np := range a.NodePools {
		capacity := "on-demand"
		if np.Spot {
			capacity = "spot"
		}
		unit := "GPUs"
		if np.GPUShares == 1 {
			unit = "GPU"
		}
		out = append(out, fmt.Sprintf("nodepool: %s (%s, %s %s) nvidia.com/gpu limit %d for shares worth %g %s, %s: %s", np.Name, np.Model, np.Role, capacity, np.GPULimit, np.GPUShares, unit, np.Consolidation, listing.Some(np.Workloads)))
	}
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

// listOrNone lists names as listing.Some does ("and N more" past ten: a
// plan of thousands of pods or nodes would print lines of hundreds of
// thousands of characters; the JSON lists them all), or "none".
func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return listing.Some(xs)
}

func writeMarkdown(w io.Writer, p *plan.Plan, s *cluster.Snapshot) {
	fmt.Fprintf(w, "# GPU sharing plan\n\nCluster: %d nodes, %d GPUs; %d workloads; usage over %s.\n\n", len(s.Nodes), s.GPUCount(), len(p.Decisions), windowText(p))
	for _, n := range notices(p) {
		fmt.Fprintf(w, "- **%s:** %s\n", strings.ToUpper(n.label[:1])+n.label[1:], n.text)
	}
	fmt.Fprintf(w, "\n## Proof\n\n```\n%s\n```\n\n## Workloads\n\n", strings.Join(slices.Concat(proofLines(p), draLines(p), taintLines(p)), "\n"))
	fmt.Fprintln(w, "| workload | pods | now | action | after | why | risks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, d := range p.Decisions {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s: %s | %s |\n", d.Workload, d.Pods, d.Before, d.Action, AfterText(d), d.Reason.Code, d.Reason.Detail, risksText(d.Risks))
	}
	fmt.Fprintln(w, "\n## Pools\n\n| pool | model | nodes | GPUs | MIG GPUs (lower bound, first-fit-decreasing) | time-sliced GPUs x replicas | MPS GPUs x clients | whole GPUs |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, pp := range p.Pools {
		fmt.Fprintf(w, "| %s |\n", strings.Join(PoolCells(pp), " | "))
	}
	if note := sharedNote(p); note != "" {
		fmt.Fprintf(w, "\n%s.\n", strings.ToUpper(note[:1])+note[1:])
	}
	fmt.Fprintf(w, "\n## Apply\n\n1. `kubectl apply -f %s` and point the GPU operator's device plugin at it (`devicePlugin.config.name=%s`).\n", FileDevicePlugin, plan.ConfigMapName)
	fmt.Fprintf(w, "2. Give mig-manager `%s` as its config.\n3. Label the nodes as `%s` lists (`%s`, `%s`).\n4. Rewrite the workloads' requests as `%s` lists.\n",
		FileMIGParted, FileNodeLabels, plan.DevicePluginConfigLabel, plan.MIGConfigLabel, FileRequests)
	fmt.Fprintf(w, "5. `kubectl apply -f %s` (KEDA scales the inference workloads on their application metric) and `kubectl apply -f %s` (Karpenter NodePools whose GPU limits hold every replica KEDA may add); give spot Jobs the node selector `%s: spot`.\n",
		FileKEDA, FileKarpenter, plan.CapacityTypeLabel)
	if p.DRA != nil {
		fmt.Fprintf(w, "6. For GPUs offered through DRA: enable the TimeSlicingSettings and MPSSupport feature gates of NVIDIA's DRA driver, `kubectl apply -f %s`, and give each shared workload's pod template the claim and node selector the proof's `dra:` lines name (`resourceClaims: [{name: gpu, resourceClaimName: <claim>}]` and `resources.claims: [{name: gpu}]` in its containers, in place of its `nvidia.com/gpu` request).\n", FileDRA)
	}
	if len(p.TaintRules) > 0 {
		fmt.Fprintf(w, "7. `kubectl apply -f %s`: a DeviceTaintRule per device of each DRA GPU that reported an XID error marking it unhealthy (the `dra: GPU` lines above), which keeps new claims off it; delete a rule once its GPU is repaired.\n", FileDRATaintRules)
	}
}
