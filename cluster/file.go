package cluster

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/yamldoc"
	"github.com/gpupack/gpupack/vram"
)

// FileAPIVersion and FileKind identify gpupack's snapshot file format.
// FileAPIVersion is the version written; FileAPIVersionV1Alpha1, the
// format before DRA devices and claims, is still read.
const (
	FileAPIVersion         = "gpupack.io/v1alpha2"
	FileAPIVersionV1Alpha1 = "gpupack.io/v1alpha1"
	FileKind               = "ClusterSnapshot"
)

// File is the snapshot file's document, YAML or JSON:
//
//	apiVersion: gpupack.io/v1alpha2
//	kind: ClusterSnapshot
//	nodes:
//	- name: gpu-a-1
//	  cpu: "96"
//	  memory: 1Ti
//	  labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
//	  taints: [{key: gpu, value: reserved, effect: NoSchedule}]
//	  gpus:
//	  - {model: H100-80GB, count: 4}
//	  - {model: H100-80GB, count: 4, sharing: mig, mig: [3g.40gb, 3g.40gb]}
//	  # v1alpha2: a GPU offered through a ResourceSlice (DRA), one per group
//	  - {model: H100-80GB, count: 1, dra: {driver: gpu.nvidia.com, pool: gpu-a-1, device: gpu-0, classes: [gpu.nvidia.com]}}
//	pods:
//	- namespace: ml            # omitted: "default", as kubectl does
//	  name: train-0
//	  cpu: "8"
//	  memory: 64Gi
//	  gpu: {count: 1}            # or {milli: 250}, {memory: 20Gi}, {mig: 1g.10gb}
//	  node: gpu-a-1              # omit while pending
//	  labels: {app: train}
//	  # optional, in any version: the pod's spread constraints and required
//	  # pod (anti-)affinity terms, in the Kubernetes spelling
//	  topologySpreadConstraints:
//	  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: train}}}
//	  podAntiAffinity:
//	  - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: train}}}
//	  # v1alpha2: the pod's ResourceClaims and their allocation
//	  claims:
//	  - {podClaim: gpu, name: train-0-gpu, requests: [{name: gpu, deviceClass: gpu.nvidia.com, count: 1}],
//	     allocated: [{request: gpu, driver: gpu.nvidia.com, pool: gpu-a-1, device: gpu-0}]}
//	# optional: what Kueue's objects say (Kueue; amounts in Kueue's units)
//	kueue:
//	  workloads: [{namespace: ml, name: train, queue: team, pods: [train-0], requests: {nvidia.com/gpu: 2}}]
//	  localQueues: [{namespace: ml, name: team, clusterQueue: team}]
//	  clusterQueues: [{name: team, quotas: [{flavor: h100, resource: nvidia.com/gpu, nominal: 4, reserved: 3}]}]
//	# optional: GPU pods that failed after scheduling, as their status says
//	failures:
//	- {namespace: ml, name: train-2, node: l4-ts-1, resource: nvidia.com/gpu, count: 2, container: main,
//	   rejected: true, reason: UnexpectedAdmissionError, message: "Pod was rejected: Allocate failed due to ..."}
//	- {namespace: ml, name: chat-0, node: l4-1, container: server, reason: Error, exitCode: 1, restarts: 7,
//	   message: "torch.OutOfMemoryError: CUDA out of memory. ..."}
type File struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Nodes      []FileNode `json:"nodes"`
	Pods       []FilePod  `json:"pods,omitempty"`
	// Schedulers are the schedulers seen serving the cluster
	// (Snapshot.Schedulers); absent: not known. Optional, in any version.
	Schedulers *[]string `json:"schedulers,omitempty"`
	// Quotas are the ResourceQuotas on GPUs (Snapshot.Quotas) and
	// QuotaRefusals the workloads a quota kept from creating pods
	// (Snapshot.QuotaRefusals). Optional, in any version.
	Quotas        []ResourceQuota `json:"quotas,omitempty"`
	QuotaRefusals []QuotaRefusal  `json:"quotaRefusals,omitempty"`
	// Failures are the GPU pods that failed after scheduling
	// (Snapshot.Failures), with the kubelet's and the containers' words.
	// Optional, in any version.
	Failures []PodFailure `json:"failures,omitempty"`
	// Kueue is what Kueue's objects say (Snapshot.Kueue); absent: Kueue
	// is not installed or was not read. Optional, in any version.
	Kueue *Kueue `json:"kueue,omitempty"`
	// Namespaces are namespaces' labels (Snapshot.Namespaces), for pod
	// affinity terms' namespaceSelectors. Optional, in any version.
	Namespaces map[string]map[string]string `json:"namespaces,omitempty"`
}

// FileNode is a node in the snapshot file.
type FileNode struct {
	Name          string            `json:"name"`
	CPU           string            `json:"cpu"`
	Memory        string            `json:"memory"`
	Labels        map[string]string `json:"labels,omitempty"`
	Taints        []Taint           `json:"taints,omitempty"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
	// Pods is the node's pod capacity (allocatable pods); absent sets no
	// limit.
	Pods *int           `json:"pods,omitempty"`
	GPUs []FileGPUGroup `json:"gpus,omitempty"`
}

// FileGPUGroup is a run of identical GPUs on a node.
type FileGPUGroup struct {
	Model    string   `json:"model"`
	Count    int      `json:"count"`
	Sharing  string   `json:"sharing,omitempty"`  // exclusive (default), fractional, time-slicing, mps, mig
	Replicas int      `json:"replicas,omitempty"` // time-slicing and mps
	MIG      []string `json:"mig,omitempty"`      // profiles on each GPU, for sharing: mig
	Memory   string   `json:"memory,omitempty"`   // overrides the model's framebuffer

	// SharedResource: the replicas are offered as nvidia.com/gpu.shared
	// (the device plugin's renameByDefault); time-slicing and mps only.
	SharedResource bool `json:"sharedResource,omitempty"`

	// Unlisted: the model is not in the catalogue (a product label read
	// from a node, gpu.Catalogue.Unlisted): it is taken as named, with
	// Memory (when given) and no price or MIG geometry. Without it an
	// unknown model name is an error, so that a typo is not taken for a
	// new GPU.
	Unlisted bool `json:"unlisted,omitempty"`

	// DRA (v1alpha2): the GPU is offered through a ResourceSlice, as this
	// device; the group then has count 1.
	DRA *DRADevice `json:"dra,omitempty"`
	// UUID (DRA groups only) is the GPU's UUID as its ResourceSlice
	// publishes it, which joins its metrics to the claims that hold it.
	UUID string `json:"uuid,omitempty"`
}

// FilePod is a pod in the snapshot file.
type FilePod struct {
	Namespace    string            `json:"namespace,omitempty"`
	Name         string            `json:"name"`
	CPU          string            `json:"cpu,omitempty"`
	Memory       string            `json:"memory,omitempty"`
	GPU          *FileGPURequest   `json:"gpu,omitempty"`
	GPUModels    []string          `json:"gpuModels,omitempty"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	Affinity     []Term            `json:"affinity,omitempty"`
	Tolerations  []Toleration      `json:"tolerations,omitempty"`
	Isolation    string            `json:"isolation,omitempty"`
	Tenant       string            `json:"tenant,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Node         string            `json:"node,omitempty"`
	Devices      []FileDevice      `json:"devices,omitempty"`
	// Claims (v1alpha2) are the pod's ResourceClaims.
	Claims []Claim `json:"claims,omitempty"`
	// SchedulingGates are the pod's spec.schedulingGates and
	// SchedulerName its spec.schedulerName (absent: the default
	// scheduler). Optional, in any version.
	SchedulingGates []string `json:"schedulingGates,omitempty"`
	SchedulerName   string   `json:"schedulerName,omitempty"`
	// TopologySpreadConstraints, PodAffinity and PodAntiAffinity (the
	// required terms) are the pod's, in the Kubernetes spelling. Optional,
	// in any version.
	TopologySpreadConstraints []SpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	PodAffinity               []PodAffinityTerm  `json:"podAffinity,omitempty"`
	PodAntiAffinity           []PodAffinityTerm  `json:"podAntiAffinity,omitempty"`
	// Engine is the engine that preallocates GPU memory in one of its
	// containers (Pod.Engine). Optional, in any version.
	Engine *vram.Preallocation `json:"engine,omitempty"`
}

// FileGPURequest is a pod's GPU request: count whole GPUs (each with at
// least memory, when given), milli of one GPU, memory of one GPU, or one
// MIG slice.
type FileGPURequest struct {
	Count  int    `json:"count,omitempty"`
	Milli  int64  `json:"milli,omitempty"`
	Memory string `json:"memory,omitempty"`
	MIG    string `json:"mig,omitempty"`
	// Shared: the count is of replicas asked for as nvidia.com/gpu.shared.
	Shared bool `json:"shared,omitempty"`
	// Unlisted: the MIG profile is in no model of the catalogue (a live
	// pod's nvidia.com/mig-* resource, as gpupack snapshot writes it); it
	// is taken as named, and only a layout that has it can hold the pod.
	// Without it an unknown profile is an error, so that a typo is not
	// taken for a new profile.
	Unlisted bool `json:"unlisted,omitempty"`
}

// FileDevice records which GPU (and MIG slice) a bound pod holds.
type FileDevice struct {
	GPU   int  `json:"gpu"`
	Slice *int `json:"slice,omitempty"`
}

// DefaultNamespace is the namespace of a snapshot file's pod that names
// none, as kubectl defaults it.
const DefaultNamespace = "default"

// ParseFile reads a snapshot file: exactly one YAML or JSON document.
// source names it in errors, which give the path of the offending field
// ("nodes[2]: gpus[0]: model"), and for wrong types, unknown fields and
// numbers out of range also the line ("c.yaml:7:
// nodes[0].gpus[0].count: "8" is a string; want an integer").
func ParseFile(data []byte, source string, c *gpu.Catalogue) (*Snapshot, error) {
	var f File
	if _, err := yamldoc.Decode(data, source, &f); err != nil {
		return nil, err
	}
	s, err := f.Snapshot(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return s, nil
}

// Snapshot validates the document and builds the snapshot.
func (f *File) Snapshot(c *gpu.Catalogue) (*Snapshot, error) {
	switch f.APIVersion {
	case FileAPIVersion:
	case FileAPIVersionV1Alpha1:
		if err := f.checkV1Alpha1(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("apiVersion %q: want %q (or the older %q)", f.APIVersion, FileAPIVersion, FileAPIVersionV1Alpha1)
	}
	if f.Kind != FileKind {
		return nil, fmt.Errorf("kind %q: want %q", f.Kind, FileKind)
	}
	nodes := make([]*Node, len(f.Nodes))
	for i := range f.Nodes {
		n, err := f.Nodes[i].node(c)
		if err != nil {
			return nil, fmt.Errorf("nodes[%d]: %w", i, err)
		}
		nodes[i] = n
	}
	pods := make([]*Pod, len(f.Pods))
	for i := range f.Pods {
		p, err := f.Pods[i].pod(c)
		if err != nil {
			return nil, fmt.Errorf("pods[%d] (%s): %w", i, f.Pods[i].Name, err)
		}
		pods[i] = p
	}
	s, err := NewSnapshot(c, nodes, pods)
	if err != nil {
		return nil, err
	}
	if f.Schedulers != nil {
		for i, name := range *f.Schedulers {
			if name == "" {
				return nil, fmt.Errorf("schedulers[%d]: empty name; list the spec.schedulerName of each scheduler that runs, e.g. %s", i, DefaultScheduler)
			}
		}
		s.Schedulers = append([]string{}, *f.Schedulers...)
	}
	if err := f.quotas(s); err != nil {
		return nil, err
	}
	if err := f.failures(s); err != nil {
		return nil, err
	}
	if f.Kueue != nil {
		if err := f.Kueue.check(); err != nil {
			return nil, err
		}
		k := *f.Kueue
		s.Kueue = &k
	}
	if err := checkDRA(s); err != nil {
		return nil, err
	}
	for i, p := range pods {
		if !p.Bound() {
			continue
		}
		n, _ := s.Node(p.NodeName)
		for j, d := range p.Devices {
			if d.GPU < 0 || d.GPU >= len(n.GPUs) {
				return nil, fmt.Errorf("pods[%d].devices[%d].gpu: %d is not a GPU of node %s (it has %d)", i, j, d.GPU, n.Name, len(n.GPUs))
			}
			if g := &n.GPUs[d.GPU]; d.Slice >= len(g.Layout) && (g.DRA == nil || d.Slice >= len(g.DRA.Partitions)) {
				return nil, fmt.Errorf("pods[%d].devices[%d].slice: %d is not a MIG slice or partition of GPU %d on %s", i, j, d.Slice, d.GPU, n.Name)
			}
		}
	}
	return s, nil
}

func (fn *FileNode) node(c *gpu.Catalogue) (*Node, error) {
	if fn.Name == "" {
		return nil, fmt.Errorf("name: missing")
	}
	cpu, err := ParseCPU(fn.CPU)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	mem, err := ParseMemory(fn.Memory)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if fn.Pods != nil && *fn.Pods < 0 {
		return nil, fmt.Errorf("pods: %d (want the node's pod capacity, 0 or more, or no pods field for no limit)", *fn.Pods)
	}
	n := &Node{Name: fn.Name, CPU: cpu, Memory: mem, Labels: fn.Labels, Taints: fn.Taints, Unschedulable: fn.Unschedulable, MaxPods: fn.Pods}
	for i, t := range fn.Taints {
		switch t.Effect {
		case NoSchedule, PreferNoSchedule, NoExecute:
		default:
			return nil, fmt.Errorf("taints[%d].effect: %q (want NoSchedule, PreferNoSchedule or NoExecute)", i, t.Effect)
		}
		if t.Key == "" {
			return nil, fmt.Errorf("taints[%d].key: missing", i)
		}
	}
	for gi, g := range fn.GPUs {
		gpus, err := g.gpus(c, len(n.GPUs))
		if err != nil {
			return nil, fmt.Errorf("gpus[%d]: %w", gi, err)
		}
		n.GPUs = append(n.GPUs, gpus...)
	}
	if len(n.GPUs) > 64 {
		return nil, fmt.Errorf("gpus: %d GPUs on one node is absurd (limit 64)", len(n.GPUs))
	}
	return n, nil
}

func (g *FileGPUGroup) gpus(c *gpu.Catalogue, first int) ([]GPU, error) {
	m, ok := c.Lookup(g.Model)
	switch {
	case !ok && g.Unlisted:
		mem, err := parseOptionalMemory(g.Memory)
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		m = c.Unlisted(g.Model, mem)
	case !ok:
		return nil, fmt.Errorf("model: %w (a GPU gpupack does not list: add `unlisted: true` and its memory, or add it to a --catalogue file)", &gpu.UnknownModelError{Name: g.Model, Known: c.Names()})
	}
	if g.Count < 1 || g.Count > 64 {
		return nil, fmt.Errorf("count: %d (want 1..64)", g.Count)
	}
	sharing, err := ParseSharing(g.Sharing)
	if err != nil {
		return nil, fmt.Errorf("sharing: %w", err)
	}
	mem := m.Usable
	if g.Memory != "" {
		if mem, err = ParseMemory(g.Memory); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	proto := GPU{Model: m, Memory: mem, Sharing: sharing, Replicas: g.Replicas, SharedResource: g.SharedResource}
	if g.DRA != nil {
		if err := checkDRADevice(g.DRA, g.Count, sharing, len(g.MIG)); err != nil {
			return nil, fmt.Errorf("dra: %w", err)
		}
		dra := *g.DRA
		proto.DRA = &dra
		proto.UUID = g.UUID
	} else if g.UUID != "" {
		return nil, fmt.Errorf("uuid: given for a GPU group without dra; only a DRA device's group names its GPU")
	}
	switch sharing {
	case TimeSliced, MPS:
		if g.Replicas < 1 || g.Replicas > 48*4 {
			return nil, fmt.Errorf("replicas: %d (want 1..192 for %s)", g.Replicas, sharing)
		}
		if sharing == MPS && g.Replicas > 48 {
			return nil, fmt.Errorf("replicas: %d MPS clients (MPS allows at most 48)", g.Replicas)
		}
	case MIG:
		if m.MIG == nil {
			return nil, fmt.Errorf("sharing: %s does not support MIG", m.Name)
		}
		if len(g.MIG) == 0 {
			return nil, fmt.Errorf("mig: list the profiles on each GPU, e.g. [3g.40gb, 3g.40gb]")
		}
		layout, err := m.MIG.Fit(g.MIG)
		if err != nil {
			return nil, fmt.Errorf("mig: %w", err)
		}
		proto.Layout = layout
		if proto.DRA != nil && len(proto.DRA.SliceDevices) > 0 {
			proto.DRA.SliceDevices = InLayout(g.MIG, proto.DRA.SliceDevices, layout)
		}
	default:
		if g.Replicas != 0 {
			return nil, fmt.Errorf("replicas: only time-slicing and mps GPUs have replicas")
		}
	}
	if g.SharedResource && sharing != TimeSliced && sharing != MPS {
		return nil, fmt.Errorf("sharedResource: only time-slicing and mps GPUs offer the shared resource; sharing is %s", sharing)
	}
	if sharing != MIG && len(g.MIG) > 0 {
		return nil, fmt.Errorf("mig: profiles given but sharing is %s; set sharing: mig", sharing)
	}
	out := make([]GPU, g.Count)
	for i := range out {
		out[i] = proto
		out[i].Index = first + i
	}
	return out, nil
}

func (fp *FilePod) pod(c *gpu.Catalogue) (*Pod, error) {
	if fp.Name == "" {
		return nil, fmt.Errorf("name: missing")
	}
	ns := fp.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	for _, f := range [][2]string{{"namespace", ns}, {"name", fp.Name}} {
		if strings.ContainsAny(f[1], "/ \t\n") {
			return nil, fmt.Errorf("%s: %q: a Kubernetes name has no slash or space", f[0], f[1])
		}
	}
	p := &Pod{Namespace: ns, Name: fp.Name, GPUModels: fp.GPUModels, NodeSelector: fp.NodeSelector,
		RequiredAffinity: fp.Affinity, Tolerations: fp.Tolerations, Tenant: fp.Tenant, Labels: fp.Labels, NodeName: fp.Node,
		SchedulingGates: fp.SchedulingGates, SchedulerName: fp.SchedulerName, Engine: fp.Engine,
		SpreadConstraints: fp.TopologySpreadConstraints, PodAffinity: fp.PodAffinity, PodAntiAffinity: fp.PodAntiAffinity}
	if err := p.validatePodRules(); err != nil {
		return nil, err
	}
	for i, g := range fp.SchedulingGates {
		if g == "" {
			return nil, fmt.Errorf("schedulingGates[%d]: empty gate name; give the gate's name, e.g. %s", i, KueueAdmissionGate)
		}
	}
	if fp.SchedulerName == DefaultScheduler {
		p.SchedulerName = ""
	}
	if fp.Engine != nil {
		if err := fp.Engine.Validate(); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	var err error
	if fp.CPU != "" {
		if p.CPU, err = ParseCPU(fp.CPU); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
	}
	if fp.Memory != "" {
		if p.Memory, err = ParseMemory(fp.Memory); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	if p.Isolation, err = ParseIsolation(fp.Isolation); err != nil {
		return nil, fmt.Errorf("isolation: %w", err)
	}
	for i, name := range fp.GPUModels {
		m, err := c.Resolve(name)
		if err != nil {
			return nil, fmt.Errorf("gpuModels[%d]: %w", i, err)
		}
		p.GPUModels[i] = m.Name
	}
	for i, t := range fp.Affinity {
		for j, r := range t.MatchExpressions {
			switch r.Operator {
			case "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt":
			default:
				return nil, fmt.Errorf("affinity[%d].matchExpressions[%d].operator: %q (want In, NotIn, Exists, DoesNotExist, Gt or Lt)", i, j, r.Operator)
			}
		}
	}
	if fp.GPU != nil {
		if p.GPU, err = fp.GPU.request(c); err != nil {
			return nil, fmt.Errorf("gpu: %w", err)
		}
	}
	for i, d := range fp.Devices {
		dev := Device{GPU: d.GPU, Slice: -1}
		if d.Slice != nil {
			if *d.Slice < 0 {
				return nil, fmt.Errorf("devices[%d].slice: %d is negative", i, *d.Slice)
			}
			dev.Slice = *d.Slice
		}
		p.Devices = append(p.Devices, dev)
	}
	if len(p.Devices) > 0 && p.NodeName == "" {
		return nil, fmt.Errorf("devices: given for a pod that is not bound to a node; set node")
	}
	for i := range fp.Claims {
		if err := checkClaim(&fp.Claims[i]); err != nil {
			return nil, fmt.Errorf("claims[%d]: %w", i, err)
		}
	}
	p.Claims = fp.Claims
	return p, nil
}

func (r *FileGPURequest) request(c *gpu.Catalogue) (Request, error) {
	var mem gpu.MiB
	if r.Memory != "" {
		var err error
		if mem, err = ParseMemory(r.Memory); err != nil {
			return Request{}, fmt.Errorf("memory: %w", err)
		}
		if mem == 0 {
			return Request{}, fmt.Errorf("memory: 0; omit it or give the GPU memory the pod needs")
		}
	}
	switch {
	case r.Shared && (r.Count == 0 || r.Milli != 0 || r.MIG != ""):
		return Request{}, fmt.Errorf("shared: a shared request asks for count replicas; give count and no milli or mig")
	case r.MIG != "":
		if r.Count != 0 || r.Milli != 0 || r.Memory != "" {
			return Request{}, fmt.Errorf("mig: a MIG request cannot also ask for count, milli or memory")
		}
		if _, ok := c.MIGProfile(r.MIG); !ok && !r.Unlisted {
			return Request{}, fmt.Errorf("mig: no GPU in the catalogue has a MIG profile %q; fix the name, or add `unlisted: true` to take it as named", r.MIG)
		}
		return Request{Kind: MIGSlice, Profile: r.MIG}, nil
	case r.Milli != 0:
		if r.Milli < 0 || r.Milli > int64(gpu.WholeGPU) {
			return Request{}, fmt.Errorf("milli: %d (want 1..1000)", r.Milli)
		}
		if r.Count > 1 {
			return Request{}, fmt.Errorf("milli: fractions are of one GPU; count must be 1 or omitted")
		}
		if r.Milli == int64(gpu.WholeGPU) {
			return Request{Kind: WholeGPUs, Count: 1, Memory: mem}, nil
		}
		return Request{Kind: Fraction, Milli: gpu.Milli(r.Milli), Memory: mem}, nil
	case r.Count != 0:
		if r.Count < 0 || r.Count > 64 {
			return Request{}, fmt.Errorf("count: %d (want 1..64)", r.Count)
		}
		return Request{Kind: WholeGPUs, Count: r.Count, Memory: mem, SharedResource: r.Shared}, nil
	case mem > 0:
		return Request{Kind: GPUMemory, Memory: mem}, nil
	}
	return Request{}, fmt.Errorf("empty GPU request; give count, milli, memory or mig (or omit gpu)")
}

func parseOptionalMemory(s string) (gpu.MiB, error) {
	if s == "" {
		return 0, nil
	}
	return ParseMemory(s)
}

// ToFile converts a snapshot to the file document, so that it can be
// written and read back unchanged.
func ToFile(s *Snapshot) *File {
	f := &File{APIVersion: FileAPIVersion, Kind: FileKind}
	if s.Schedulers != nil {
		names := slices.Clone(s.Schedulers)
		f.Schedulers = &names
	}
	f.Quotas, f.QuotaRefusals = slices.Clone(s.Quotas), slices.Clone(s.QuotaRefusals)
	f.Failures = slices.Clone(s.Failures)
	f.Kueue = s.Kueue
	f.Namespaces = s.Namespaces
	for _, n := range s.Nodes {
		fn := FileNode{Name: n.Name, CPU: FormatCPU(n.CPU), Memory: FormatMemory(n.Memory), Labels: n.Labels, Taints: n.Taints, Unschedulable: n.Unschedulable, Pods: n.MaxPods}
		for _, g := range n.GPUs {
			grp := FileGPUGroup{Model: g.Model.Name, Count: 1, Replicas: g.Replicas, SharedResource: g.SharedResource, Unlisted: g.Model.Unlisted, DRA: g.DRA}
			if g.DRA != nil {
				grp.UUID = g.UUID
			}
			if g.Sharing != Exclusive {
				grp.Sharing = g.Sharing.String()
			}
			if g.Memory != g.Model.Usable || g.Model.Unlisted && g.Memory > 0 {
				grp.Memory = FormatMemory(g.Memory)
			}
			for _, sl := range g.Layout {
				grp.MIG = append(grp.MIG, sl.Profile)
			}
			if k := len(fn.GPUs) - 1; k >= 0 && sameGroup(fn.GPUs[k], grp) {
				fn.GPUs[k].Count++
				continue
			}
			fn.GPUs = append(fn.GPUs, grp)
		}
		f.Nodes = append(f.Nodes, fn)
	}
	for _, p := range s.Pods {
		fp := FilePod{Namespace: p.Namespace, Name: p.Name, GPUModels: p.GPUModels, NodeSelector: p.NodeSelector,
			Affinity: p.RequiredAffinity, Tolerations: p.Tolerations, Tenant: p.Tenant, Labels: p.Labels, Node: p.NodeName, Claims: p.Claims,
			SchedulingGates: p.SchedulingGates, SchedulerName: p.SchedulerName, Engine: p.Engine,
			TopologySpreadConstraints: p.SpreadConstraints, PodAffinity: p.PodAffinity, PodAntiAffinity: p.PodAntiAffinity}
		if fp.SchedulerName == DefaultScheduler {
			fp.SchedulerName = ""
		}
		if p.CPU != 0 {
			fp.CPU = FormatCPU(p.CPU)
		}
		if p.Memory != 0 {
			fp.Memory = FormatMemory(p.Memory)
		}
		if p.Isolation != ShareAny {
			fp.Isolation = p.Isolation.String()
		}
		if p.GPU.Kind != NoGPU {
			r := &FileGPURequest{Count: p.GPU.Count, Milli: int64(p.GPU.Milli), MIG: p.GPU.Profile, Shared: p.GPU.SharedResource}
			if p.GPU.Kind == MIGSlice {
				_, known := s.Catalogue.MIGProfile(p.GPU.Profile)
				r.Unlisted = !known
			}
			if p.GPU.Memory > 0 {
				r.Memory = FormatMemory(p.GPU.Memory)
			}
			fp.GPU = r
		}
		for _, d := range p.Devices {
			fd := FileDevice{GPU: d.GPU}
			if d.Slice >= 0 {
				sl := d.Slice
				fd.Slice = &sl
			}
			fp.Devices = append(fp.Devices, fd)
		}
		f.Pods = append(f.Pods, fp)
	}
	return f
}

func sameGroup(a, b FileGPUGroup) bool {
	if a.DRA != nil || b.DRA != nil {
		return false // each DRA device is its own group
	}
	if a.Model != b.Model || a.Sharing != b.Sharing || a.Replicas != b.Replicas || a.SharedResource != b.SharedResource || a.Memory != b.Memory || len(a.MIG) != len(b.MIG) {
		return false
	}
	x, y := append([]string(nil), a.MIG...), append([]string(nil), b.MIG...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// MarshalFile writes a snapshot as YAML.
func MarshalFile(s *Snapshot) ([]byte, error) {
	return yaml.Marshal(ToFile(s))
}

// quotas checks the file's quotas and refusals and puts them in s.
func (f *File) quotas(s *Snapshot) error {
	for i, q := range f.Quotas {
		if q.Namespace == "" || q.Name == "" {
			return fmt.Errorf("quotas[%d]: give the namespace and name of the ResourceQuota", i)
		}
		if err := checkAmounts(q.Hard, q.Used); err != nil {
			return fmt.Errorf("quotas[%d] (%s): %w", i, q.Key(), err)
		}
	}
	for i, r := range f.QuotaRefusals {
		w := r.Workload
		if w.Kind == "" || w.Namespace == "" || w.Name == "" || r.Quota == "" {
			return fmt.Errorf("quotaRefusals[%d]: give the workload's kind, namespace and name, and the quota", i)
		}
		if len(r.Limited) == 0 {
			return fmt.Errorf("quotaRefusals[%d] (%s %s/%s): limited: name at least one GPU resource and its hard limit", i, w.Kind, w.Namespace, w.Name)
		}
		for k := range r.Limited {
			if _, ok := r.Requested[k]; !ok {
				return fmt.Errorf("quotaRefusals[%d] (%s %s/%s): requested: give the amount of %s the pod asked for", i, w.Kind, w.Namespace, w.Name, k)
			}
		}
		if err := checkAmounts(r.Requested, r.Used, r.Limited); err != nil {
			return fmt.Errorf("quotaRefusals[%d] (%s %s/%s): %w", i, w.Kind, w.Namespace, w.Name, err)
		}
		if r.Count < 0 {
			return fmt.Errorf("quotaRefusals[%d] (%s %s/%s): count %d is negative", i, w.Kind, w.Namespace, w.Name, r.Count)
		}
	}
	s.Quotas, s.QuotaRefusals = slices.Clone(f.Quotas), slices.Clone(f.QuotaRefusals)
	s.Namespaces = f.Namespaces
	return nil
}

// failures checks the file's failed pods and puts them in s: each names
// its pod and the node it was bound to, and a crash names its container.
func (f *File) failures(s *Snapshot) error {
	seen := map[string]bool{}
	for i, p := range f.Failures {
		switch {
		case p.Namespace == "" || p.Name == "" || p.Node == "":
			return fmt.Errorf("failures[%d]: give the pod's namespace, name and the node it was bound to", i)
		case p.Reason == "":
			return fmt.Errorf("failures[%d] (%s): give the reason of the pod's status (a rejection) or of its container's last termination (a crash)", i, p.Key())
		case !p.Rejected && p.Container == "":
			return fmt.Errorf("failures[%d] (%s): a crash names its container; set rejected: true for a pod the kubelet rejected", i, p.Key())
		case p.Count < 0 || p.Restarts < 0 || p.ContainerIndex < 0:
			return fmt.Errorf("failures[%d] (%s): count, restarts and containerIndex cannot be negative", i, p.Key())
		case p.Count > 0 && !GPUResource(p.Resource):
			return fmt.Errorf("failures[%d] (%s): resource %q is not a GPU resource (nvidia.com/gpu, nvidia.com/mig-<profile>, ...)", i, p.Key(), p.Resource)
		case seen[p.Key()]:
			return fmt.Errorf("failures[%d]: pod %s is listed twice", i, p.Key())
		}
		if _, ok := s.Node(p.Node); !ok {
			return fmt.Errorf("failures[%d] (%s): node %q is not in the snapshot", i, p.Key(), p.Node)
		}
		seen[p.Key()] = true
	}
	s.Failures = slices.Clone(f.Failures)
	return nil
}

// checkAmounts checks that every amount names a GPU resource and is not
// negative.
func checkAmounts(lists ...map[string]int64) error {
	for _, l := range lists {
		for k, v := range l {
			if !GPUResource(k) {
				return fmt.Errorf("resource %q counts no GPUs; gpupack keeps nvidia.com/gpu, nvidia.com/gpu.shared and nvidia.com/mig-* (bare, requests. or limits.)", k)
			}
			if v < 0 {
				return fmt.Errorf("%s: %d is negative", k, v)
			}
		}
	}
	return nil
}
