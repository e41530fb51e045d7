package cluster

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/vram"
)

// Sharing is how one physical GPU is offered to pods.
type Sharing int

const (
	// Exclusive GPUs go whole to one pod (nvidia.com/gpu without sharing).
	Exclusive Sharing = iota
	// Fractional GPUs are shared in milli-GPU fractions with memory
	// accounting, as HAMi and Alibaba's gpushare do and as the openb trace
	// assumes.
	Fractional
	// TimeSliced GPUs offer Replicas time slices with no VRAM isolation.
	TimeSliced
	// MPS GPUs offer Replicas MPS clients, each limited to Memory/Replicas.
	MPS
	// MIG GPUs are partitioned into the hardware slices of their layout.
	MIG
)

var sharingNames = []string{"exclusive", "fractional", "time-slicing", "mps", "mig"}

func (s Sharing) String() string {
	if int(s) < len(sharingNames) {
		return sharingNames[s]
	}
	return fmt.Sprintf("Sharing(%d)", int(s))
}

// ParseSharing reads a sharing mode by its String name.
func ParseSharing(s string) (Sharing, error) {
	for i, n := range sharingNames {
		if n == s {
			return Sharing(i), nil
		}
	}
	if s == "" {
		return Exclusive, nil
	}
	return 0, fmt.Errorf("unknown sharing mode %q (want one of %v)", s, sharingNames)
}

// GPU is one physical GPU of a node.
type GPU struct {
	Index   int
	UUID    string
	Model   *gpu.Model
	Memory  gpu.MiB // usable framebuffer, as the driver reports it; 0 when unknown
	Sharing Sharing
	// Replicas is the number of time slices or MPS clients (TimeSliced, MPS).
	Replicas int
	// SharedResource (TimeSliced, MPS) says that the device plugin offers
	// the replicas under the shared resource name (renameByDefault:
	// nvidia.com/gpu.shared), so that only requests by that name
	// (Request.SharedResource) get them, and whole-GPU requests do not.
	SharedResource bool
	// Layout is the MIG layout (MIG only).
	Layout gpu.Layout
	// DRA is the GPU's identity when a ResourceSlice offers it (Dynamic
	// Resource Allocation); nil for GPUs of the device plugin.
	DRA *DRADevice
}

// Shares reports how many pods the GPU can hold at most.
func (g *GPU) Shares() int {
	switch g.Sharing {
	case TimeSliced, MPS:
		return g.Replicas
	case MIG:
		return len(g.Layout)
	case Fractional:
		return int(gpu.WholeGPU)
	default:
		return 1
	}
}

// TaintEffect is a Kubernetes taint effect.
type TaintEffect string

// The taint effects that matter for placement.
const (
	NoSchedule       TaintEffect = "NoSchedule"
	PreferNoSchedule TaintEffect = "PreferNoSchedule"
	NoExecute        TaintEffect = "NoExecute"
)

// Taint is a node taint.
type Taint struct {
	Key    string      `json:"key"`
	Value  string      `json:"value,omitempty"`
	Effect TaintEffect `json:"effect"`
}

func (t Taint) String() string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// Toleration is a pod toleration; Operator is "Equal" (default) or "Exists".
type Toleration struct {
	Key      string      `json:"key,omitempty"`
	Operator string      `json:"operator,omitempty"`
	Value    string      `json:"value,omitempty"`
	Effect   TaintEffect `json:"effect,omitempty"`
}

// Tolerates reports whether the toleration matches the taint, with the
// Kubernetes rules: an empty key with Exists matches every taint, an empty
// effect matches every effect.
func (tol Toleration) Tolerates(t Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == "Exists"
	}
	if tol.Key != t.Key {
		return false
	}
	if tol.Operator == "Exists" {
		return true
	}
	return tol.Value == t.Value
}

// Requirement is one node selector requirement (operators In, NotIn,
// Exists, DoesNotExist, Gt, Lt, as in Kubernetes).
type Requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Matches reports whether a node with the labels meets the requirement,
// with the Kubernetes rules: NotIn and DoesNotExist hold for a node without
// the key; Gt and Lt compare one integer value with the node's.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case "In":
		return ok && slices.Contains(r.Values, v)
	case "NotIn":
		return !ok || !slices.Contains(r.Values, v)
	case "Exists":
		return ok
	case "DoesNotExist":
		return !ok
	case "Gt", "Lt":
		if !ok || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == "Gt" {
			return have > want
		}
		return have < want
	}
	return false
}

// Term is a node selector term: all its requirements must hold.
type Term struct {
	MatchExpressions []Requirement `json:"matchExpressions"`
}

// Node is one node of the cluster.
type Node struct {
	Name          string
	CPU           gpu.CPUMilli
	Memory        gpu.MiB
	Labels        map[string]string
	Taints        []Taint
	Unschedulable bool
	// MaxPods is how many pods the node takes (its allocatable pods, 110
	// by the kubelet's default); nil when unknown, which sets no limit. A
	// node that takes no pods has 0.
	MaxPods *int
	GPUs    []GPU
}

// GPUModel returns the model of the node's first GPU, or nil for a node
// without GPUs. Nodes with mixed models are rare; see Models.
func (n *Node) GPUModel() *gpu.Model {
	if len(n.GPUs) == 0 {
		return nil
	}
	return n.GPUs[0].Model
}

// HasGPUModel reports whether some GPU of the node is of one of the
// models (canonical names), as a pod's gpuModels asks.
func (n *Node) HasGPUModel(models []string) bool {
	for _, g := range n.GPUs {
		if slices.Contains(models, g.Model.Name) {
			return true
		}
	}
	return false
}

// RequestKind says in which form a pod asks for GPU.
type RequestKind int

const (
	// NoGPU pods ask for none.
	NoGPU RequestKind = iota
	// WholeGPUs asks for Count GPUs (nvidia.com/gpu: Count). On a
	// time-sliced or MPS GPU one whole GPU is one replica.
	WholeGPUs
	// Fraction asks for Milli of one GPU.
	Fraction
	// GPUMemory asks for Memory MiB of one GPU's framebuffer.
	GPUMemory
	// MIGSlice asks for one slice of the MIG profile Profile.
	MIGSlice
)

// Request is a pod's GPU request.
type Request struct {
	Kind  RequestKind
	Count int       // WholeGPUs
	Milli gpu.Milli // Fraction
	// Memory is the framebuffer asked for: of one GPU (GPUMemory), or that
	// each GPU must have for the pod (WholeGPUs, Fraction), counted against
	// time-sliced GPUs, which do not partition it.
	Memory  gpu.MiB
	Profile string // MIGSlice
	// SharedResource (WholeGPUs) asks for Count replicas by the shared
	// resource name (nvidia.com/gpu.shared), which only GPUs with
	// GPU.SharedResource offer.
	SharedResource bool
}

// GPUMilli is the GPU compute the request stands for, in milli-GPU: a whole
// GPU is 1000, a fraction its milli. Memory and MIG requests count as 0
// here since their share depends on the device; see placement.
func (r Request) GPUMilli() gpu.Milli {
	switch r.Kind {
	case WholeGPUs:
		return gpu.Milli(r.Count) * gpu.WholeGPU
	case Fraction:
		return r.Milli
	}
	return 0
}

func (r Request) String() string {
	switch r.Kind {
	case WholeGPUs:
		if r.SharedResource {
			return fmt.Sprintf("%d shared GPU", r.Count)
		}
		return fmt.Sprintf("%d GPU", r.Count)
	case Fraction:
		return fmt.Sprintf("%s GPU", r.Milli)
	case GPUMemory:
		return fmt.Sprintf("%s GPU memory", r.Memory)
	case MIGSlice:
		return "MIG " + r.Profile
	}
	return "no GPU"
}

// Isolation says with whom a pod may share a physical GPU.
type Isolation int

const (
	// ShareAny pods may share a GPU with any pod.
	ShareAny Isolation = iota
	// ShareTenant pods share only with pods of the same tenant.
	ShareTenant
	// ShareNone pods never share a GPU by software; a MIG slice, being
	// isolated in hardware, is allowed.
	ShareNone
)

var isolationNames = []string{"any", "tenant", "none"}

func (i Isolation) String() string {
	if int(i) < len(isolationNames) {
		return isolationNames[i]
	}
	return fmt.Sprintf("Isolation(%d)", int(i))
}

// ParseIsolation reads an isolation class by its String name.
func ParseIsolation(s string) (Isolation, error) {
	if s == "" {
		return ShareAny, nil
	}
	for i, n := range isolationNames {
		if n == s {
			return Isolation(i), nil
		}
	}
	return 0, fmt.Errorf("unknown isolation %q (want one of %v)", s, isolationNames)
}

// Device is the share of one GPU that a bound pod holds.
type Device struct {
	GPU    int       // index in Node.GPUs
	Slice  int       // index in the GPU's MIG layout or DRA partitions, or -1
	Milli  gpu.Milli // compute share held, 1000 for a whole GPU
	Memory gpu.MiB   // framebuffer held or reserved
}

// Pod is a pod or a pending demand.
type Pod struct {
	Namespace string
	Name      string
	CPU       gpu.CPUMilli
	Memory    gpu.MiB
	GPU       Request
	// GPUModels lists the models the pod may run on (canonical names);
	// empty means any.
	GPUModels        []string
	NodeSelector     map[string]string
	RequiredAffinity []Term // ORed, as in requiredDuringScheduling
	Tolerations      []Toleration
	// SpreadConstraints are the pod's topologySpreadConstraints;
	// PodAffinity and PodAntiAffinity its required pod (anti-)affinity
	// terms (requiredDuringSchedulingIgnoredDuringExecution), ANDed.
	SpreadConstraints []SpreadConstraint
	PodAffinity       []PodAffinityTerm
	PodAntiAffinity   []PodAffinityTerm
	Isolation         Isolation
	// Tenant is the trust boundary for ShareTenant; the namespace when empty.
	Tenant string
	Labels map[string]string
	// NodeName is the node the pod is bound to; empty while pending.
	NodeName string
	// Devices are the GPU shares the pod holds on NodeName. A snapshot
	// fills them in for bound GPU pods whose devices were not recorded.
	Devices []Device
	// Claims are the pod's ResourceClaims (Dynamic Resource Allocation);
	// a pod bound through them has Devices from their allocation.
	Claims []Claim
	// SchedulingGates are the pod's spec.schedulingGates, by name: while
	// any is set no scheduler considers the pod.
	SchedulingGates []string
	// SchedulerName is the pod's spec.schedulerName; empty is the default
	// scheduler (DefaultScheduler).
	SchedulerName string
	// Engine is the engine of a GPU container that takes a share of each
	// GPU's memory at start-up (vram.Detect); nil when none does, so its
	// measured VRAM is what it uses.
	Engine *vram.Preallocation
}

// DefaultScheduler is the name of the stock kube-scheduler's profile, the
// spec.schedulerName that the apiserver gives a pod that names none.
const DefaultScheduler = "default-scheduler"

// KueueAdmissionGate is the scheduling gate that Kueue puts on the pods of
// a Workload until it admits it.
const KueueAdmissionGate = "kueue.x-k8s.io/admission"

// Scheduler is the scheduler the pod is addressed to: DefaultScheduler
// when it names none.
func (p *Pod) Scheduler() string {
	if p.SchedulerName == "" {
		return DefaultScheduler
	}
	return p.SchedulerName
}

// HeldGPUs is the GPUs a bound pod holds: its devices' compute shares
// (a MIG slice or a replica as its share), else its request.
func (p *Pod) HeldGPUs() float64 {
	var milli float64
	for _, d := range p.Devices {
		milli += float64(d.Milli)
	}
	if milli == 0 {
		milli = float64(p.GPU.GPUMilli())
	}
	return milli / 1000
}

// Key is "namespace/name" (the text form of its PodKey).
func (p *Pod) Key() string { return PodKey{Namespace: p.Namespace, Name: p.Name}.String() }

// TenantName is the pod's trust boundary.
func (p *Pod) TenantName() string {
	if p.Tenant != "" {
		return p.Tenant
	}
	return p.Namespace
}

// Bound reports whether the pod is bound to a node.
func (p *Pod) Bound() bool { return p.NodeName != "" }

// WantsGPU reports whether the pod asks for any GPU.
func (p *Pod) WantsGPU() bool { return p.GPU.Kind != NoGPU }

// Snapshot is an immutable view of nodes and pods. Do not modify the nodes,
// pods or slices it returns.
type Snapshot struct {
	Catalogue *gpu.Catalogue
	Nodes     []*Node
	Pods      []*Pod
	// Schedulers are the names of the schedulers seen serving the cluster
	// (internal/source/kube says how it tells); nil when that is not known, and
	// then no pod is taken to be addressed to a scheduler that does not
	// run. Set it, if at all, before the snapshot is shared.
	Schedulers []string
	// Quotas are the ResourceQuotas that limit GPUs, and QuotaRefusals the
	// workloads whose controllers could not create pods because one was
	// exceeded: they have no pending pod to diagnose. Set them, if at all,
	// before the snapshot is shared.
	Quotas        []ResourceQuota
	QuotaRefusals []QuotaRefusal
	// Failures are the GPU pods that failed after scheduling: rejected by
	// the kubelet (they hold nothing, so they are not in Pods) or whose
	// containers keep crashing (they are in Pods too). Set them, if at
	// all, before the snapshot is shared.
	Failures []PodFailure
	// Kueue is what Kueue's objects say about the admission of gated
	// pods; nil when Kueue is not installed or was not read. Set it, if
	// at all, before the snapshot is shared.
	Kueue *Kueue
	// Namespaces are the labels of the namespaces, by name, that a pod
	// affinity term's namespaceSelector reads; a namespace not in it has
	// only its kubernetes.io/metadata.name label (NamespaceLabels). Set
	// it, if at all, before the snapshot is shared.
	Namespaces map[string]map[string]string
	nodeIndex  map[string]int
}

// NewSnapshot indexes nodes and pods. Node names must be unique, and pod
// keys too; bound pods must name an existing node.
func NewSnapshot(c *gpu.Catalogue, nodes []*Node, pods []*Pod) (*Snapshot, error) {
	s := &Snapshot{Catalogue: c, Nodes: nodes, Pods: pods, nodeIndex: make(map[string]int, len(nodes))}
	for i, n := range nodes {
		if _, dup := s.nodeIndex[n.Name]; dup {
			return nil, fmt.Errorf("node %q is listed twice", n.Name)
		}
		s.nodeIndex[n.Name] = i
	}
	seen := make(map[string]bool, len(pods))
	for _, p := range pods {
		if seen[p.Key()] {
			return nil, fmt.Errorf("pod %q is listed twice", p.Key())
		}
		seen[p.Key()] = true
		if p.Bound() {
			if _, ok := s.nodeIndex[p.NodeName]; !ok {
				return nil, fmt.Errorf("pod %q is bound to node %q, which is not in the snapshot", p.Key(), p.NodeName)
			}
		}
	}
	return s, nil
}

// Node returns the named node.
func (s *Snapshot) Node(name string) (*Node, bool) {
	i, ok := s.nodeIndex[name]
	if !ok {
		return nil, false
	}
	return s.Nodes[i], true
}

// NodeIndex returns the position of the named node in Nodes.
func (s *Snapshot) NodeIndex(name string) (int, bool) {
	i, ok := s.nodeIndex[name]
	return i, ok
}

// Pending lists the pods that are not bound, in snapshot order.
func (s *Snapshot) Pending() []*Pod {
	var out []*Pod
	for _, p := range s.Pods {
		if !p.Bound() {
			out = append(out, p)
		}
	}
	return out
}

// PodsOn lists the pods bound to each node, by node index.
func (s *Snapshot) PodsOn() [][]*Pod {
	out := make([][]*Pod, len(s.Nodes))
	for _, p := range s.Pods {
		if i, ok := s.nodeIndex[p.NodeName]; ok && p.Bound() {
			out[i] = append(out[i], p)
		}
	}
	return out
}

// GPUCount is the number of physical GPUs in the snapshot.
func (s *Snapshot) GPUCount() int {
	n := 0
	for _, node := range s.Nodes {
		n += len(node.GPUs)
	}
	return n
}

// UnknownModel is a GPU model of the snapshot that the catalogue does not
// fully describe, and what of it is unknown.
type UnknownModel struct {
	Model string `json:"model"`
	GPUs  int    `json:"gpus"`
	// Unknown names what is missing, of "price", "MIG geometry" and
	// "memory" (the last two only for models the catalogue does not list,
	// known from node labels alone).
	Unknown []string `json:"unknown"`
}

// UnknownModels lists, by model name, the snapshot's GPU models that the
// catalogue does not list (gpu.Model.Unlisted) or does not price, with their
// GPUs, so that the verbs that cost or partition GPUs can say what they
// left out.
func (s *Snapshot) UnknownModels() []UnknownModel {
	byName := map[string]*UnknownModel{}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			m := g.Model
			var unknown []string
			if !m.Priced {
				unknown = append(unknown, "price")
			}
			if m.Unlisted {
				unknown = append(unknown, "MIG geometry")
				if g.Memory == 0 {
					unknown = append(unknown, "memory")
				}
			}
			if len(unknown) == 0 {
				continue
			}
			u, ok := byName[m.Name]
			if !ok {
				u = &UnknownModel{Model: m.Name, Unknown: unknown}
				byName[m.Name] = u
			}
			u.GPUs++
		}
	}
	out := make([]UnknownModel, 0, len(byName))
	for _, u := range byName {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// Describe says what is unknown of the model, for messages: "NVIDIA-B300
// (16 GPUs): price and MIG geometry unknown".
func (u UnknownModel) Describe() string {
	return fmt.Sprintf("%s (%d GPUs): %s unknown", u.Model, u.GPUs, joinAnd(u.Unknown))
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// ModelNames lists the GPU models present, sorted.
func (s *Snapshot) ModelNames() []string {
	set := map[string]bool{}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			set[g.Model.Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
