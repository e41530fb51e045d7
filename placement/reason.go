package placement

import (
	"fmt"
	"sort"
	"strings"
)

// Code names why a pod does not fit a node.
type Code string

// The reasons Fit can give, in the order it checks them.
const (
	NodeUnschedulable    Code = "NodeUnschedulable"
	NodeSelectorMismatch Code = "NodeSelectorMismatch"
	NodeAffinityMismatch Code = "NodeAffinityMismatch"
	TaintNotTolerated    Code = "TaintNotTolerated"
	TooManyPods          Code = "TooManyPods"
	InsufficientCPU      Code = "InsufficientCPU"
	InsufficientMemory   Code = "InsufficientMemory"
	GPUModelMismatch     Code = "GPUModelMismatch"
	SharingModeMismatch  Code = "SharingModeMismatch"
	InsufficientGPU      Code = "InsufficientGPU"
	InsufficientVRAM     Code = "InsufficientGPUMemory"
	IsolationConflict    Code = "IsolationConflict"
	// The cross-node rules, checked after the GPUs as the scheduler's
	// PodTopologySpread and InterPodAffinity filters come after
	// NodeResourcesFit: a DoNotSchedule spread constraint whose topology
	// key the node lacks (Unresolvable) or whose skew it would exceed
	// (Requested: the skew, Capacity: maxSkew, Resource: the key); the
	// pod's required podAffinity (Unresolvable) and podAntiAffinity; and
	// the anti-affinity of the pods already there.
	SpreadMissingLabel      Code = "TopologySpreadMissingLabel"
	SpreadSkew              Code = "TopologySpreadSkew"
	PodAffinityMismatch     Code = "PodAffinityMismatch"
	PodAntiAffinityMismatch Code = "PodAntiAffinityMismatch"
	ExistingAntiAffinity    Code = "ExistingPodsAntiAffinity"
	// ClaimUnallocatable: a request of the pod's ResourceClaims finds too
	// few free devices that its class and selectors accept (Claim says
	// which and how many).
	ClaimUnallocatable Code = "ClaimUnallocatable"
	// ClaimCounterExhausted: as ClaimUnallocatable, and shared counters
	// of a partitionable GPU (DRAPartitionableDevices) keep accepted
	// devices that no claim holds from being made (Claim.Counter names
	// the counter set, the counter, what a device needs and what is left).
	ClaimCounterExhausted Code = "ClaimCounterExhausted"
	// ClaimSelectorError: a selector of the claim or its class fails to
	// evaluate on a device of the node (Detail: the allocator's error).
	ClaimSelectorError Code = "ClaimSelectorError"
	// ClaimTaintNotTolerated: devices that a request of the pod's
	// ResourceClaims accepts and no pod holds would serve it, but a
	// NoSchedule or NoExecute device taint that the request does not
	// tolerate keeps enough of them from it (Claim.Untolerated names them).
	ClaimTaintNotTolerated Code = "ClaimTaintNotTolerated"
	// ClaimCapacityInsufficient: devices that a request's class and
	// selectors accept are free or shared, but their consumable capacity
	// (DRAConsumableCapacity) refuses what it asks: too little is left, or
	// the device's request policy does not allow the amount (Resource:
	// the capacity; Requested, Free, Capacity: of the first such device,
	// in the capacity's unit; Claim.Capacity has each device).
	ClaimCapacityInsufficient Code = "ClaimCapacityInsufficient"
	// ClaimConstraintUnsatisfied: the node has the devices the pod's
	// claims ask for, but no choice of them meets a claim's constraint
	// (spec.devices.constraints: matchAttribute or distinctAttribute;
	// Resource: the attribute; Requested: the devices the covered requests
	// take; Free: the most one choice gives; Constraint says which).
	ClaimConstraintUnsatisfied Code = "ClaimConstraintUnsatisfied"
	// ClaimNotFound: a ResourceClaim of the pod (or its template) does not
	// exist.
	ClaimNotFound Code = "ClaimNotFound"
)

// Reason says why a pod does not fit one node, as data. Quantities are in
// Unit: "pods", "milli-CPU", "MiB", "GPUs", "milli-GPU", "replicas" or
// "slices".
type Reason struct {
	Code      Code
	Resource  string // "pods", "cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "gpu-memory"
	Requested int64
	Free      int64
	Capacity  int64
	Unit      string
	// Unresolvable is true when no change short of new hardware (or a
	// bigger node) could cure it: the node's capacity or GPU model is the
	// limit, not what is allocated or configured.
	Unresolvable bool
	// Detail names the label, taint, model or mode in question, for
	// display; code reads the typed fields (Mismatch, Claim, ...) instead.
	Detail string
	// Term is, for a reason of a spread constraint or a pod
	// (anti-)affinity term of the pod, its index in the pod's list.
	Term int `json:",omitempty"`
	// Claim is set for ClaimUnallocatable, ClaimCounterExhausted and
	// ClaimTaintNotTolerated.
	Claim *ClaimShortfall `json:",omitempty"`
	// Constraint is set for ClaimConstraintUnsatisfied.
	Constraint *ConstraintShortfall `json:",omitempty"`
	// Mismatch is set for NodeSelectorMismatch and GPUModelMismatch. It
	// stays out of JSON, where Detail words the same facts.
	Mismatch *Mismatch `json:"-"`
}

// Mismatch is what the pod asks of a node and what the node offers
// instead: for NodeSelectorMismatch, the first nodeSelector key (in key
// order) whose value the node lacks; for GPUModelMismatch, the pod's GPU
// models and the node's.
type Mismatch struct {
	// Key is the nodeSelector's label key; empty for GPUModelMismatch.
	Key string
	// Wanted is what the pod accepts: the selector's one value, or the
	// pod's GPU models in its order.
	Wanted []string
	// Offered is the node's label value (HasKey false: the node lacks the
	// label), or its GPU model.
	Offered string
	HasKey  bool
}

// Selector words the nodeSelector entry: "nodeSelector key=value".
func (m *Mismatch) Selector() string {
	return "nodeSelector " + m.Key + "=" + strings.Join(m.Wanted, ", ")
}

// NodeLabel words the node's label of Key: "key=value", or "no key label".
func (m *Mismatch) NodeLabel() string {
	if m.HasKey {
		return m.Key + "=" + m.Offered
	}
	return "no " + m.Key + " label"
}

// Models words the GPU models the pod accepts: "A100-80GB, H100-80GB".
func (m *Mismatch) Models() string {
	return strings.Join(m.Wanted, ", ")
}

// Message words the reason as the kube-scheduler does where it has words
// for it, so users recognise them in "0/N nodes are available" lines.
func (r Reason) Message() string {
	switch r.Code {
	case NodeUnschedulable:
		return "node(s) were unschedulable"
	case NodeSelectorMismatch, NodeAffinityMismatch:
		return "node(s) didn't match Pod's node affinity/selector"
	case TaintNotTolerated:
		return fmt.Sprintf("node(s) had untolerated taint {%s}", r.Detail)
	case TooManyPods:
		return "Too many pods"
	case InsufficientCPU, InsufficientMemory, InsufficientGPU:
		return "Insufficient " + r.Resource
	case GPUModelMismatch:
		return "node(s) didn't have the requested GPU model"
	case SharingModeMismatch:
		return fmt.Sprintf("node(s) didn't offer %s", r.Resource)
	case InsufficientVRAM:
		return "Insufficient GPU memory"
	case IsolationConflict:
		return "node(s) had GPUs shared with another tenant"
	case SpreadMissingLabel:
		return "node(s) didn't match pod topology spread constraints (missing required label)"
	case SpreadSkew:
		return "node(s) didn't match pod topology spread constraints"
	case PodAffinityMismatch:
		return "node(s) didn't match pod affinity rules"
	case PodAntiAffinityMismatch:
		return "node(s) didn't match pod anti-affinity rules"
	case ExistingAntiAffinity:
		return "node(s) didn't satisfy existing pods anti-affinity rules"
	case ClaimUnallocatable, ClaimCounterExhausted, ClaimTaintNotTolerated, ClaimCapacityInsufficient, ClaimConstraintUnsatisfied:
		// The dynamicresources filter's words (kube-scheduler v1.37.2,
		// pkg/scheduler/framework/plugins/dynamicresources, Filter).
		return "cannot allocate all claims"
	case ClaimSelectorError:
		return r.Detail
	case ClaimNotFound:
		return "resourceclaim not found"
	}
	return string(r.Code)
}

// String is the message with its figures, for logs and evidence.
func (r Reason) String() string {
	s := r.Message()
	if r.Unit != "" {
		s += fmt.Sprintf(" (requested %d, free %d, capacity %d %s)", r.Requested, r.Free, r.Capacity, r.Unit)
	}
	if r.Detail != "" && r.Code != TaintNotTolerated && r.Code != ClaimSelectorError {
		s += ": " + r.Detail
	}
	return s
}

// Summary words per-node reasons the way the scheduler's FailedScheduling
// event does: "0/5 nodes are available: 3 Insufficient nvidia.com/gpu, 2
// node(s) had untolerated taint {gpu: reserved}." Each node counts once per
// distinct message. nodes is the number of nodes considered.
func Summary(nodes int, perNode [][]Reason) string {
	groups := make([]NodeReasons, len(perNode))
	for i, rs := range perNode {
		groups[i] = NodeReasons{Nodes: 1, Reasons: rs}
	}
	return SummaryOf(nodes, groups)
}

// NodeReasons is the reasons that Nodes nodes share, for callers that
// evaluate identical nodes once.
type NodeReasons struct {
	Nodes   int
	Reasons []Reason
}

// SummaryOf is Summary over groups of nodes with identical reasons; it
// gives the same line as Summary over the nodes one by one.
func SummaryOf(nodes int, groups []NodeReasons) string {
	counts := map[string]int{}
	fit := 0
	for _, g := range groups {
		if len(g.Reasons) == 0 {
			fit += g.Nodes
			continue
		}
		seen := map[string]bool{}
		for _, r := range g.Reasons {
			m := r.Message()
			if !seen[m] {
				seen[m] = true
				counts[m] += g.Nodes
			}
		}
	}
	msgs := make([]string, 0, len(counts))
	for m := range counts {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool {
		if counts[msgs[i]] != counts[msgs[j]] {
			return counts[msgs[i]] > counts[msgs[j]]
		}
		return msgs[i] < msgs[j]
	})
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = fmt.Sprintf("%d %s", counts[m], m)
	}
	s := fmt.Sprintf("%d/%d nodes are available", fit, nodes)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s + "."
}
