package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/placement"
)

// NodeStatus is what the stock kube-scheduler's filters say of one node for
// a pod: the reasons of the first filter that rejects it, in that filter's
// own words (none when every filter passes), and whether that filter's
// status is UnschedulableAndUnresolvable, so that preemption cannot help.
type NodeStatus struct {
	Reasons      []string
	Unresolvable bool
}

// The words of the stock filters (kube-scheduler v1.37: NodeUnschedulable,
// TaintToleration, NodeAffinity, NodeResourcesFit; PodTopologySpread and
// InterPodAffinity use placement.Reason.Message) and of DefaultPreemption.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonTaint         = "node(s) had untolerated taint(s)"
	reasonAffinity      = "node(s) didn't match Pod's node affinity/selector"
	reasonNoVictims     = "No preemption victims found for incoming pod"
	reasonNotHelpful    = "Preemption is not helpful for scheduling"
	// reasonClaims is the DynamicResources filter's (v1.37.2) for every
	// node where a pod's claims cannot be allocated.
	reasonClaims     = "cannot allocate all claims"
	noNodesAvailable = "no nodes available to schedule pods"
)

// FitErrorMessage words the FailedScheduling message of the stock
// kube-scheduler (v1.37) for a pod that no node passes, one status per node
// of the cluster, exactly as framework.FitError.Error does: "0/N nodes are
// available: " and every "count reason" string sorted as strings, then
// DefaultPreemption's " preemption: 0/N nodes are available: ..." over the
// same nodes. Preemption is modelled with every pod at one priority (pods
// without a PriorityClass): a node whose status is resolvable has no
// victims, the others are not helped. It returns "" when some node passes
// every filter (the scheduler would bind the pod, so there is no such
// message), and the scheduler's own error when there are no nodes.
func FitErrorMessage(statuses []NodeStatus) string {
	groups := make([]statusGroup, len(statuses))
	for i, st := range statuses {
		groups[i] = statusGroup{nodes: 1, NodeStatus: st}
	}
	return fitError(groups)
}

// statusGroup is the status that nodes nodes share, for callers that
// evaluate identical nodes once.
type statusGroup struct {
	nodes int
	NodeStatus
}

// fitError is FitErrorMessage over groups of nodes.
func fitError(groups []statusGroup) string {
	filter := map[string]int{}
	total, victims := 0, 0
	for _, g := range groups {
		if g.nodes == 0 {
			continue
		}
		if len(g.Reasons) == 0 {
			return ""
		}
		total += g.nodes
		for _, r := range g.Reasons {
			filter[r] += g.nodes
		}
		if !g.Unresolvable {
			victims += g.nodes
		}
	}
	if total == 0 {
		return noNodesAvailable
	}
	preemption := map[string]int{}
	if victims > 0 {
		preemption[reasonNoVictims] = victims
	}
	if rest := total - victims; rest > 0 {
		preemption[reasonNotHelpful] = rest
	}
	return fmt.Sprintf("0/%d nodes are available: %s. preemption: 0/%d nodes are available: %s.",
		total, histogram(filter), total, histogram(preemption))
}

// histogram is "count reason" for each reason, sorted as strings, as the
// scheduler's sortReasonsHistogram does (so "10 x" sorts before "2 y").
func histogram(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for r, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// stockResource is the extended resource, and how many of it, by which the
// stock scheduler sees the request; false for request forms that no stock
// device plugin advertises (fractions and GPU memory, which HAMi-like
// schedulers place).
func stockResource(r cluster.Request) (string, int64, bool) {
	switch r.Kind {
	case cluster.WholeGPUs:
		if r.SharedResource {
			return "nvidia.com/gpu.shared", int64(r.Count), true
		}
		return "nvidia.com/gpu", int64(r.Count), true
	case cluster.MIGSlice:
		return "nvidia.com/mig-" + r.Profile, 1, true
	}
	return "", 0, false
}

// stockGPUs is the node's allocatable and requested count of an extended
// resource, as the NVIDIA device plugin advertises it (exclusive GPUs one
// each, time-slicing and MPS their replicas, MIG its mixed strategy's
// slices) and as the bound pods take it; false when the node has GPUs shared
// by fractions, which the stock scheduler cannot count.
func stockGPUs(st *placement.NodeState, resource string) (allocatable, requested int64, ok bool) {
	for i, g := range st.Node.GPUs {
		used := st.GPUs[i]
		switch g.Sharing {
		case cluster.Exclusive:
			if resource == "nvidia.com/gpu" {
				allocatable++
				if used.Holders > 0 {
					requested++
				}
			}
		case cluster.TimeSliced, cluster.MPS:
			name := "nvidia.com/gpu"
			if g.SharedResource {
				name = "nvidia.com/gpu.shared"
			}
			if resource == name {
				allocatable += int64(g.Replicas)
				requested += int64(used.UsedReplicas)
			}
		case cluster.MIG:
			for j, sl := range g.Layout {
				if resource == "nvidia.com/mig-"+sl.Profile {
					allocatable++
					if used.UsedSlices&(1<<j) != 0 {
						requested++
					}
				}
			}
		default:
			return 0, 0, false
		}
	}
	return allocatable, requested, true
}

// stockStatus is what the stock filters say of the node for the pod, in
// their order, stopping at the first that rejects it. rs are placement.Fit's
// reasons for the pod's request as the scheduler sees it on this node; the
// selector, affinity, CPU and memory checks are read from them. A pod's
// gpuModels stands for a node selector on the GPU product label, which is
// how a Kubernetes pod pins a GPU model. For a pod whose claims placement
// judges on the node, the DynamicResources filter comes last, in its own
// words. It returns false when the request or the node's GPUs are in a
// form the stock scheduler cannot count.
func stockStatus(d *placement.Demand, st *placement.NodeState, rs []placement.Reason) (NodeStatus, bool) {
	p, n := d.Pod, st.Node
	claims := placement.JudgesClaimsOn(d, n)
	var resource string
	var want, allocatable, requested int64
	if !claims {
		var ok bool
		if resource, want, ok = stockResource(p.GPU); !ok {
			return NodeStatus{}, false
		}
		if allocatable, requested, ok = stockGPUs(st, resource); !ok {
			return NodeStatus{}, false
		}
	}
	unresolvable := func(reasons ...string) NodeStatus { return NodeStatus{Reasons: reasons, Unresolvable: true} }
	has := func(codes ...placement.Code) bool {
		return slices.ContainsFunc(rs, func(r placement.Reason) bool { return slices.Contains(codes, r.Code) })
	}
	// The filters in the default profile's order: NodeUnschedulable,
	// TaintToleration, NodeAffinity, NodeResourcesFit, PodTopologySpread,
	// InterPodAffinity.
	switch {
	case has(placement.NodeUnschedulable):
		return unresolvable(reasonUnschedulable), true
	case has(placement.TaintNotTolerated):
		return unresolvable(reasonTaint), true
	case has(placement.NodeSelectorMismatch, placement.NodeAffinityMismatch):
		return unresolvable(reasonAffinity), true
	case !claims && len(p.GPUModels) > 0 && !n.HasGPUModel(p.GPUModels):
		return unresolvable(reasonAffinity), true
	}
	var out NodeStatus
	for _, r := range rs {
		// NodeResourcesFit gives every shortage: pods, cpu, memory, then
		// the extended resources, in the placement reason's words.
		if r.Code == placement.TooManyPods || r.Code == placement.InsufficientCPU || r.Code == placement.InsufficientMemory {
			out.Reasons = append(out.Reasons, r.Message())
			out.Unresolvable = out.Unresolvable || r.Unresolvable
		}
	}
	if claims {
		// DynamicResources filters after NodeResourcesFit. A selector that
		// fails to evaluate aborts the cycle, and a missing claim keeps
		// the pod from the filters: neither has a node status.
		if len(out.Reasons) > 0 {
			return out, true
		}
		if r := claimOf(rs); r != nil {
			if r.Code != placement.ClaimUnallocatable && r.Code != placement.ClaimCounterExhausted && r.Code != placement.ClaimTaintNotTolerated && r.Code != placement.ClaimCapacityInsufficient && r.Code != placement.ClaimConstraintUnsatisfied {
				return NodeStatus{}, false
			}
			return unresolvable(r.Message()), true
		}
		return out, true
	}
	if want > allocatable-requested {
		out.Reasons = append(out.Reasons, "Insufficient "+resource)
		out.Unresolvable = out.Unresolvable || want > allocatable
	}
	if len(out.Reasons) > 0 {
		return out, true
	}
	// Then PodTopologySpread and InterPodAffinity, of which placement.Fit
	// gives the first failing check, in the scheduler's words.
	for _, r := range rs {
		if crossNode(r.Code) {
			return NodeStatus{Reasons: []string{r.Message()}, Unresolvable: r.Unresolvable}, true
		}
	}
	return out, true
}

// summarize sets the finding's stock scheduler message, or the note that
// says why there is none, and gpupack's own verdict per group of nodes.
func (e *engine) summarize(f *Finding, p *cluster.Pod, stock []statusGroup, stockOK bool, verdicts []classVerdict) {
	switch {
	case !stockOK:
		if _, _, ok := stockResource(p.GPU); !ok {
			f.StockNote = fmt.Sprintf("the stock kube-scheduler has no resource for a request of %s (fractions and GPU memory are placed by a GPU-sharing scheduler), so there is no stock message", p.GPU)
		} else {
			f.StockNote = "some nodes share GPUs by fractions, which the stock device plugin does not advertise, so there is no stock message"
		}
	default:
		f.Summary = fitError(stock)
		if f.Summary == "" {
			var pass []int
			for k, st := range stock {
				if len(st.Reasons) == 0 {
					pass = append(pass, k)
				}
			}
			names, total := e.names(e.nodesOf(pass))
			f.StockNote = fmt.Sprintf("the stock kube-scheduler's filters pass on %s, so it would bind the pod there and report no FailedScheduling", JoinNames(names, total))
		}
	}
	f.Fit = e.fitGroups(verdicts)
}

// fitGroups merges the classes whose reasons read the same, in snapshot
// order of their first node.
func (e *engine) fitGroups(verdicts []classVerdict) []NodeGroup {
	type group struct {
		nodes   []int
		reasons []placement.Reason
	}
	index := map[string]int{}
	var groups []*group
	for k := range e.classes {
		rs := verdicts[k].now
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = r.String()
		}
		key := strings.Join(parts, "\x00")
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, &group{reasons: rs})
		}
		groups[i].nodes = append(groups[i].nodes, e.classes[k].nodes...)
	}
	for _, g := range groups {
		sort.Ints(g.nodes)
	}
	sort.SliceStable(groups, func(a, b int) bool { return groups[a].nodes[0] < groups[b].nodes[0] })
	out := make([]NodeGroup, len(groups))
	for i, g := range groups {
		names, total := e.names(g.nodes)
		out[i] = NodeGroup{Nodes: names, NodeCount: total, Reasons: g.reasons}
		if out[i].Reasons == nil {
			out[i].Reasons = []placement.Reason{}
		}
	}
	return out
}
