package placement

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// Demand is a pod's request prepared once per scheduling cycle, as the
// kube-scheduler's PreFilter does: quantities resolved, model names turned
// into a set.
type Demand struct {
	Pod    *cluster.Pod
	CPU    gpu.CPUMilli
	Memory gpu.MiB
	GPU    cluster.Request
	// PerGPUMilli is the compute taken on each device: 1000 for whole GPUs,
	// the fraction otherwise; memory requests are converted per device.
	PerGPUMilli gpu.Milli
	// Devices is how many devices the pod takes (Count for whole GPUs, else 1).
	Devices int
	models  modelSet
	// topo is what PreFilter found of the cluster for the pod's
	// cross-node rules; nil when there are none.
	topo *topology
	// claims are the pending pod's ResourceClaims that Fit judges in
	// place of GPU; nil for most pods.
	claims *claimDemand
}

// modelSet is a set of catalogue model indices; the zero value is "any".
type modelSet struct {
	any  bool
	bits []uint64
}

func (s modelSet) has(m *gpu.Model) bool { return s.hasIndex(m.Index) }

// hasIndex says the set holds the model of catalogue index i.
func (s modelSet) hasIndex(i int) bool {
	if s.any {
		return true
	}
	w := i / 64
	return w < len(s.bits) && s.bits[w]&(1<<(i%64)) != 0
}

// NewDemand prepares a pod's demand against a catalogue. Unknown model
// names in GPUModels are an error: silently ignoring one would widen the
// pod's constraint.
func NewDemand(p *cluster.Pod, c *gpu.Catalogue) (*Demand, error) {
	d := &Demand{Pod: p, CPU: p.CPU, Memory: p.Memory, GPU: p.GPU, Devices: 1, claims: newClaimDemand(p)}
	switch p.GPU.Kind {
	case cluster.NoGPU:
		d.Devices = 0
	case cluster.WholeGPUs:
		if p.GPU.Count < 1 {
			return nil, fmt.Errorf("pod %s: whole-GPU request of %d GPUs", p.Key(), p.GPU.Count)
		}
		d.Devices = p.GPU.Count
		d.PerGPUMilli = gpu.WholeGPU
	case cluster.Fraction:
		if p.GPU.Milli < 1 || p.GPU.Milli > gpu.WholeGPU {
			return nil, fmt.Errorf("pod %s: GPU fraction %d milli is outside 1..1000", p.Key(), p.GPU.Milli)
		}
		d.PerGPUMilli = p.GPU.Milli
	case cluster.GPUMemory:
		if p.GPU.Memory < 1 {
			return nil, fmt.Errorf("pod %s: GPU memory request of %d MiB", p.Key(), p.GPU.Memory)
		}
	case cluster.MIGSlice:
		if p.GPU.Profile == "" {
			return nil, fmt.Errorf("pod %s: MIG request without a profile", p.Key())
		}
		if p.Bound() && p.UsesDRA() && len(p.Devices) > 1 {
			// Its claims hold several partitions or MIG devices.
			d.Devices = len(p.Devices)
		}
	}
	if len(p.GPUModels) == 0 {
		d.models.any = true
		return d, nil
	}
	for _, name := range p.GPUModels {
		m, err := c.Resolve(name)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Key(), err)
		}
		w := m.Index / 64
		for len(d.models.bits) <= w {
			d.models.bits = append(d.models.bits, 0)
		}
		d.models.bits[w] |= 1 << (m.Index % 64)
	}
	return d, nil
}

// DemandKey is what GPU fitting and scoring read of a demand. Two demands
// with equal keys get the same FitsGPUs answer on a node state and, from
// every policy but random, the same Score, so a caller may keep both until
// the state changes. The node-level constraints (selector, affinity,
// tolerations), which Fits checks and FitsGPUs leaves out, are not in it.
type DemandKey struct {
	cpu         gpu.CPUMilli
	memory      gpu.MiB
	request     cluster.Request
	perGPUMilli gpu.Milli
	devices     int
	models      string
	isolation   cluster.Isolation
	tenant      string
	// claims is the pod's key when Fit judges its claims, which no other
	// pod shares.
	claims string
}

// Key returns the demand's DemandKey.
func (d *Demand) Key() DemandKey {
	k := DemandKey{cpu: d.CPU, memory: d.Memory, request: d.GPU, perGPUMilli: d.PerGPUMilli, devices: d.Devices,
		models: modelsKey(d), isolation: d.Pod.Isolation, tenant: d.Pod.TenantName()}
	if d.claims != nil {
		k.claims = d.Pod.Key()
	}
	return k
}

// GPUState is what is taken of one GPU.
type GPUState struct {
	FreeMilli    gpu.Milli // compute not held (1000 when idle)
	FreeMemory   gpu.MiB   // framebuffer not held or reserved
	UsedReplicas int       // time slices or MPS clients taken
	UsedSlices   uint64    // bit i set: MIG slice i of the layout (or DRA partition i) is taken
	Holders      int       // pods holding a share of this GPU
	// Tenant is the tenant of every holder, "" when there are none or they
	// differ; restrict is the strictest isolation among the holders.
	Tenant   string
	restrict cluster.Isolation
	mixed    bool
	// Consumed is what the allocations of a DRA device hold of each of its
	// capacities (aligned with GPU.DRA.Capacity; nil: nothing). It is
	// replaced, never changed in place, so clones do not share changes.
	Consumed []cluster.Quantity
}

// Idle reports whether no pod holds any share of the GPU.
func (g *GPUState) Idle() bool { return g.Holders == 0 }

// NodeState is a node and what its bound pods take, the unit that Fit
// reads. The simulator and the scheduler plugin change it through Assign;
// everyone else treats it as read-only.
type NodeState struct {
	Node *cluster.Node
	// Index is the node's position in the snapshot; policies that prefer
	// earlier nodes (firstfit) and tie-breaks read it.
	Index      int
	FreeCPU    gpu.CPUMilli
	FreeMemory gpu.MiB
	GPUs       []GPUState
	Pods       int
	// Shapes counts the GPU pods on the node by shape (ShapeOf): policies
	// that group pods of a shape (gpuclustering) read it, so that a pod
	// that leaves (a state rebuilt from the pods still there) leaves no
	// trace and the scheduler plugin sees what the simulator sees.
	Shapes [ShapeCount]int32
	// Bound are the pods on the node, whose labels topology spread and
	// pod (anti-)affinity count (Demand.PreFilter); antiTerms are their
	// required pod anti-affinity terms, read once.
	Bound     []*cluster.Pod
	antiTerms []termOf
}

// ShapeCount is the number of pod shapes that NodeState.Shapes counts.
const ShapeCount = 9

// ShapeOf is a GPU demand's shape: 0 for a share of one GPU, k for k
// whole GPUs (1..7), 8 for 8 or more; -1 for a demand without GPUs.
func ShapeOf(d *Demand) int {
	switch {
	case d.Devices == 0:
		return -1
	case d.Devices == 1 && d.PerGPUMilli < gpu.WholeGPU:
		return 0
	}
	return min(d.Devices, ShapeCount-1)
}

// NewNodeState returns the state of an empty node.
func NewNodeState(n *cluster.Node) *NodeState {
	s := &NodeState{Node: n, FreeCPU: n.CPU, FreeMemory: n.Memory, GPUs: make([]GPUState, len(n.GPUs))}
	for i := range n.GPUs {
		s.GPUs[i] = GPUState{FreeMilli: gpu.WholeGPU, FreeMemory: n.GPUs[i].Memory}
	}
	return s
}

// Clone copies the state, so that a what-if can change it.
func (s *NodeState) Clone() *NodeState {
	c := *s
	c.GPUs = append([]GPUState(nil), s.GPUs...)
	// An Assign on the copy appends to new arrays.
	c.Bound, c.antiTerms = slices.Clip(s.Bound), slices.Clip(s.antiTerms)
	return &c
}

// GPUMilliFree is the node's idle GPU compute in milli-GPU.
func (s *NodeState) GPUMilliFree() gpu.Milli {
	var t gpu.Milli
	for i := range s.GPUs {
		t += s.GPUs[i].FreeMilli
	}
	return t
}

// GPUMilliCapacity is the node's GPU compute in milli-GPU.
func (s *NodeState) GPUMilliCapacity() gpu.Milli {
	return gpu.Milli(len(s.GPUs)) * gpu.WholeGPU
}

// Assign takes what the assignment says on this node. The assignment must
// come from Fit or Choices on this same state.
func (s *NodeState) Assign(d *Demand, a Assignment) {
	s.FreeCPU -= d.CPU
	s.FreeMemory -= d.Memory
	s.Pods++
	s.Bound = append(s.Bound, d.Pod)
	if len(d.Pod.PodAntiAffinity) > 0 {
		s.antiTerms = append(s.antiTerms, termsOf(d.Pod, d.Pod.PodAntiAffinity)...)
	}
	if k := ShapeOf(d); k >= 0 {
		s.Shapes[k]++
	}
	for i, dev := range a.Devices {
		g := &s.GPUs[dev.GPU]
		g.FreeMilli -= dev.Milli
		g.FreeMemory -= dev.Memory
		if dev.Slice >= 0 {
			g.UsedSlices |= 1 << dev.Slice
		}
		if dev.Replica {
			g.UsedReplicas++
		}
		if len(dev.Consumed) > 0 {
			g.Consumed = addQuantities(g.Consumed, dev.Consumed)
		}
		if !slices.ContainsFunc(a.Devices[:i], func(e DeviceShare) bool { return e.GPU == dev.GPU }) {
			join(g, d.Pod) // once per GPU, however many replicas of it the pod takes
		}
	}
}

func join(g *GPUState, p *cluster.Pod) {
	t := p.TenantName()
	switch {
	case g.Holders == 0:
		g.Tenant, g.mixed = t, false
	case g.Tenant != t:
		g.Tenant, g.mixed = "", true
	}
	if p.Isolation > g.restrict {
		g.restrict = p.Isolation
	}
	g.Holders++
}

// DeviceShare is the share of one GPU in an assignment.
type DeviceShare struct {
	GPU     int       // index in the node's GPUs
	Slice   int       // MIG slice index in the layout, or -1
	Replica bool      // a time slice or MPS client
	Milli   gpu.Milli // compute taken
	Memory  gpu.MiB   // framebuffer taken or reserved
	// Consumed is what a DRA claim takes of the device's capacities
	// (aligned with GPU.DRA.Capacity) when the device allows multiple
	// allocations; nil otherwise.
	Consumed []cluster.Quantity `json:",omitempty"`
}

// Assignment is where on a node a pod goes.
type Assignment struct {
	Devices []DeviceShare
}

// ClusterDevices converts the assignment to the snapshot's Device records.
func (a Assignment) ClusterDevices() []cluster.Device {
	out := make([]cluster.Device, len(a.Devices))
	for i, d := range a.Devices {
		out[i] = cluster.Device{GPU: d.GPU, Slice: d.Slice, Milli: d.Milli, Memory: d.Memory}
	}
	return out
}

// AppendKey appends to b a fingerprint of everything Fit reads from the
// node and its state, the node's name excepted: two states with equal keys
// get the same answer from Fit for any demand (reasons that name the node,
// such as NodeUnschedulable's Detail, name the node it was asked about).
// Callers that evaluate many demands over many nodes use it to evaluate
// each distinct node once.
func (s *NodeState) AppendKey(b []byte) []byte {
	return s.AppendKeyOmitting(b, nil)
}

// AppendKeyOmitting is AppendKey with the node labels of the keys in omit
// left out: a caller that knows no demand reads those labels but through
// its cross-node rules (Demand.TopologyReason) tells the nodes apart by
// those rules itself.
func (s *NodeState) AppendKeyOmitting(b []byte, omit map[string]bool) []byte {
	n := s.Node
	b = strconv.AppendInt(b, int64(n.CPU), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(n.Memory), 10)
	b = append(b, '/')
	b = strconv.AppendBool(b, n.Unschedulable)
	if n.MaxPods != nil {
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(*n.MaxPods), 10)
	}
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		if !omit[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b = strconv.AppendQuote(append(b, '|'), k)
		b = strconv.AppendQuote(append(b, '='), n.Labels[k])
	}
	for _, t := range n.Taints {
		b = strconv.AppendQuote(append(b, '|'), t.String())
	}
	b = append(b, '#')
	b = strconv.AppendInt(b, int64(s.FreeCPU), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(s.FreeMemory), 10)
	if n.MaxPods != nil {
		// The pod count matters only where the node limits it.
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(s.Pods), 10)
	}
	for i := range n.GPUs {
		g, st := &n.GPUs[i], &s.GPUs[i]
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(g.Model.Index), 10)
		for _, v := range []int64{int64(g.Memory), int64(g.Sharing), int64(g.Replicas),
			int64(st.FreeMilli), int64(st.FreeMemory), int64(st.UsedReplicas), int64(st.UsedSlices), int64(st.Holders), int64(st.restrict)} {
			b = strconv.AppendInt(append(b, ','), v, 10)
		}
		b = strconv.AppendBool(append(b, ','), st.mixed)
		b = strconv.AppendQuote(append(b, ','), st.Tenant)
		b = append(b, g.Layout.String()...)
		if g.DRA != nil {
			// Claims name DRA devices, so the device names count.
			b = strconv.AppendQuote(append(b, '@'), g.DRA.Driver+"/"+g.DRA.Pool+"/"+g.DRA.Device)
			for _, name := range g.DRA.SliceDevices {
				b = strconv.AppendQuote(append(b, ','), name)
			}
			for _, class := range g.DRA.Classes {
				b = strconv.AppendQuote(append(b, ';'), class)
			}
			b = strconv.AppendBool(b, g.DRA.Shared)
			if g.DRA.Partitionable() {
				b = appendPartitionsKey(b, g.DRA)
			}
			for k, c := range g.DRA.Capacity {
				b = appendCapacityKey(b, &c, at(st.Consumed, k))
			}
			for _, t := range g.DRA.Taints {
				// Taints keep devices from requests that do not
				// tolerate them.
				b = strconv.AppendQuote(append(b, '!'), t.Device+" "+t.String()+" "+t.Rule)
			}
		}
	}
	return b
}
