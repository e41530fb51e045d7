package placement

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// Fit says whether the demand fits the node as it stands. When it does, it
// returns the assignment that the default GPU choice makes (the tightest
// GPU that holds it) and no reasons; when it does not, the reasons, one per
// failing check, in the order the kube-scheduler's filters would find them.
func Fit(d *Demand, s *NodeState) (Assignment, []Reason) {
	reasons := nodeReasons(d, s)
	if JudgesClaimsOn(d, s.Node) {
		// The DynamicResources filter comes after PodTopologySpread and
		// InterPodAffinity in the default profile.
		if d.topo != nil {
			if r, fails := d.topo.reason(s.Node, true); fails {
				reasons = append(reasons, r)
			}
		}
		return fitClaims(d, s, reasons)
	}
	var h []int
	if d.Devices > 0 {
		var hosts [maxStackGPUs]int
		var gpuReason *Reason
		h, gpuReason = gpuHosts(d, s, hosts[:0], true)
		if gpuReason != nil {
			reasons = append(reasons, *gpuReason)
		}
	}
	if d.topo != nil {
		if r, fails := d.topo.reason(s.Node, true); fails {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) > 0 {
		return Assignment{}, reasons
	}
	if d.Devices == 0 {
		return Assignment{}, nil
	}
	return AssignmentOn(d, s, pickDefault(d, s, h)), nil
}

// Fits is Fit without reasons or assignment, for hot loops.
func Fits(d *Demand, s *NodeState) bool {
	return nodeFits(d, s) && FitsGPUs(d, s) && (d.topo == nil || d.topo.fits(s.Node))
}

// FitsGPUs is the GPU half of Fits: whether the node has GPUs for the
// demand, leaving out the node-level checks (unschedulable, selector,
// affinity, taints, CPU, memory) for a caller that has made them already,
// as the kube-scheduler's own filters do before the scheduler plugin's.
func FitsGPUs(d *Demand, s *NodeState) bool {
	if JudgesClaimsOn(d, s.Node) {
		return claimsFit(d, s)
	}
	if d.Devices == 0 {
		return true
	}
	var hosts [maxStackGPUs]int
	h, _ := gpuHosts(d, s, hosts[:0], false)
	return len(h) >= d.Devices
}

// Hosts appends to buf the GPUs of the node that could each hold one device
// of the demand now. A demand fits when there are at least d.Devices hosts
// and the node-level checks pass. Policies use Hosts to choose among GPUs.
func Hosts(d *Demand, s *NodeState, buf []int) []int {
	h, _ := gpuHosts(d, s, buf, false)
	return h
}

const maxStackGPUs = 16

// AssignmentOn builds the assignment that places the demand's devices on
// the given GPUs (len(gpus) == d.Devices), each of which must be a host.
func AssignmentOn(d *Demand, s *NodeState, gpus []int) Assignment {
	a := Assignment{Devices: make([]DeviceShare, len(gpus))}
	for i, gi := range gpus {
		a.Devices[i] = shareOn(d, &s.Node.GPUs[gi], &s.GPUs[gi], gi)
	}
	return a
}

// pickDefault chooses the GPUs for the default assignment: for one device
// the tightest host (least free compute, then lowest index); for several,
// the lowest-index hosts.
func pickDefault(d *Demand, s *NodeState, hosts []int) []int {
	if d.Devices > 1 {
		return hosts[:d.Devices]
	}
	best := hosts[0]
	for _, h := range hosts[1:] {
		if tighter(s, h, best) {
			best = h
		}
	}
	return []int{best}
}

func tighter(s *NodeState, a, b int) bool {
	ga, gb := &s.GPUs[a], &s.GPUs[b]
	if ga.FreeMilli != gb.FreeMilli {
		return ga.FreeMilli < gb.FreeMilli
	}
	return ga.UsedReplicas > gb.UsedReplicas
}

// shareOn is what one device of the demand takes of GPU g.
func shareOn(d *Demand, g *cluster.GPU, st *GPUState, index int) DeviceShare {
	ds := DeviceShare{GPU: index, Slice: -1}
	switch g.Sharing {
	case cluster.Exclusive:
		ds.Milli, ds.Memory = st.FreeMilli, st.FreeMemory
	case cluster.Fractional:
		switch d.GPU.Kind {
		case cluster.WholeGPUs:
			ds.Milli, ds.Memory = st.FreeMilli, st.FreeMemory
		case cluster.Fraction:
			ds.Milli = d.GPU.Milli
			ds.Memory = d.GPU.Memory
			if ds.Memory == 0 {
				ds.Memory = gpu.MiB(int64(g.Memory) * int64(d.GPU.Milli) / int64(gpu.WholeGPU))
			}
		case cluster.GPUMemory:
			ds.Memory = d.GPU.Memory
			ds.Milli = gpu.Milli((int64(d.GPU.Memory)*int64(gpu.WholeGPU) + int64(g.Memory) - 1) / int64(g.Memory))
		}
	case cluster.TimeSliced:
		ds.Replica = true
		ds.Milli = min(gpu.WholeGPU/gpu.Milli(g.Replicas), st.FreeMilli)
		ds.Memory = d.GPU.Memory
	case cluster.MPS:
		ds.Replica = true
		ds.Milli = min(gpu.WholeGPU/gpu.Milli(g.Replicas), st.FreeMilli)
		ds.Memory = g.Memory / gpu.MiB(g.Replicas)
	case cluster.MIG:
		p, _ := g.Model.MIG.Profile(d.GPU.Profile)
		for i, sl := range g.Layout {
			if sl.Profile == d.GPU.Profile && st.UsedSlices&(1<<i) == 0 {
				ds.Slice = i
				break
			}
		}
		ds.Milli = gpu.Milli(p.Compute) * gpu.WholeGPU / gpu.Milli(g.Model.MIG.ComputeSlices)
		ds.Memory = p.Memory
	}
	return ds
}

// nodeFits is the node-level part of Fit without reasons: it holds exactly
// when nodeReasons finds none, and allocates nothing, since it runs for
// every node of every placement.
func nodeFits(d *Demand, s *NodeState) bool {
	n, p := s.Node, d.Pod
	if cordoned(n, p) || tooManyPods(s) || s.FreeCPU < d.CPU || s.FreeMemory < d.Memory {
		return false
	}
	for k, v := range p.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	if len(p.RequiredAffinity) > 0 && !matchesAnyTerm(p.RequiredAffinity, n.Labels) {
		return false
	}
	for _, t := range n.Taints {
		if t.Effect != cluster.PreferNoSchedule && !tolerated(p.Tolerations, t) {
			return false
		}
	}
	return true
}

// nodeReasons checks everything but the GPUs.
func nodeReasons(d *Demand, s *NodeState) []Reason {
	n, p := s.Node, d.Pod
	var rs []Reason
	if cordoned(n, p) {
		rs = append(rs, Reason{Code: NodeUnschedulable, Detail: n.Name})
	}
	// Name the first mismatching key in key order, so that the reason does
	// not depend on map iteration.
	mismatch, found := "", false
	for k, v := range p.NodeSelector {
		if got, ok := n.Labels[k]; (!ok || got != v) && (!found || k < mismatch) {
			mismatch, found = k, true
		}
	}
	if found {
		offered, has := n.Labels[mismatch]
		m := &Mismatch{Key: mismatch, Wanted: []string{p.NodeSelector[mismatch]}, Offered: offered, HasKey: has}
		rs = append(rs, Reason{Code: NodeSelectorMismatch, Detail: m.Selector() + " (node has " + m.NodeLabel() + ")", Mismatch: m})
	}
	if len(p.RequiredAffinity) > 0 && !matchesAnyTerm(p.RequiredAffinity, n.Labels) {
		rs = append(rs, Reason{Code: NodeAffinityMismatch, Detail: "required node affinity " + termsString(p.RequiredAffinity)})
	}
	for _, t := range n.Taints {
		if t.Effect == cluster.PreferNoSchedule || tolerated(p.Tolerations, t) {
			continue
		}
		rs = append(rs, Reason{Code: TaintNotTolerated, Detail: taintDetail(t)})
		break
	}
	if tooManyPods(s) {
		rs = append(rs, Reason{Code: TooManyPods, Resource: "pods", Requested: 1, Free: int64(max(*n.MaxPods-s.Pods, 0)), Capacity: int64(*n.MaxPods), Unit: "pods"})
	}
	if s.FreeCPU < d.CPU {
		rs = append(rs, Reason{Code: InsufficientCPU, Resource: "cpu", Requested: int64(d.CPU), Free: int64(s.FreeCPU), Capacity: int64(n.CPU), Unit: "milli-CPU", Unresolvable: d.CPU > n.CPU})
	}
	if s.FreeMemory < d.Memory {
		rs = append(rs, Reason{Code: InsufficientMemory, Resource: "memory", Requested: int64(d.Memory), Free: int64(s.FreeMemory), Capacity: int64(n.Memory), Unit: "MiB", Unresolvable: d.Memory > n.Memory})
	}
	return rs
}

// unschedulableTaint is the taint by which a pod tolerates a cordon, as
// the kube-scheduler's NodeUnschedulable filter reads its tolerations.
var unschedulableTaint = cluster.Taint{Key: "node.kubernetes.io/unschedulable", Effect: cluster.NoSchedule}

// cordoned reports whether the node's cordon keeps the pod off: the node is
// unschedulable and the pod does not tolerate that.
func cordoned(n *cluster.Node, p *cluster.Pod) bool {
	return n.Unschedulable && !tolerated(p.Tolerations, unschedulableTaint)
}

// tooManyPods reports whether the node holds as many pods as it takes.
func tooManyPods(s *NodeState) bool {
	return s.Node.MaxPods != nil && s.Pods >= *s.Node.MaxPods
}

func taintDetail(t cluster.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + ": " + t.Value
}

func tolerated(tols []cluster.Toleration, t cluster.Taint) bool {
	for _, tol := range tols {
		if tol.Tolerates(t) {
			return true
		}
	}
	return false
}

func matchesAnyTerm(terms []cluster.Term, labels map[string]string) bool {
	for _, t := range terms {
		if matchesTerm(t, labels) {
			return true
		}
	}
	return false
}

func matchesTerm(t cluster.Term, labels map[string]string) bool {
	for _, r := range t.MatchExpressions {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

func termsString(terms []cluster.Term) string {
	var parts []string
	for _, t := range terms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		parts = append(parts, strings.Join(reqs, " and "))
	}
	return strings.Join(parts, " or ")
}

// The checks a GPU passes in order; a GPU is a host when it passes all.
type stage int

const (
	failModel     stage = iota // wrong GPU model
	failMode                   // its sharing mode cannot serve this request form
	failCapacity               // too small even when idle (VRAM, MIG profile)
	failIsolation              // holders it may not share with
	failVRAMFree               // enough VRAM in total, not free now
	failBusy                   // compute, replicas or slices taken
	pass
)

// gpuHosts collects the GPUs that can hold one device of the demand and,
// when asked and there are too few, the reason. For a demand of several
// devices, a time-sliced or MPS GPU is listed once per replica it has free:
// the device plugin may give one container several replicas of one GPU,
// and the kube-scheduler counts replicas, not GPUs. Each GPU comes first
// once, in index order, then the further replicas, so that the default
// choice spreads the devices over distinct GPUs where it can, as the
// device plugin's distributed allocation of replicas does.
func gpuHosts(d *Demand, s *NodeState, buf []int, explain bool) ([]int, *Reason) {
	var worst [pass + 1]int // device slots stopped at each stage
	extra := false          // some host GPU takes more than one device
	for i := range s.Node.GPUs {
		g, gs := &s.Node.GPUs[i], &s.GPUs[i]
		st := unitFits(d, g, gs)
		slots, free := 1, 1
		if d.Devices > 1 {
			slots = deviceSlots(g)
		}
		if st != pass {
			worst[st] += slots
			continue
		}
		if slots > 1 {
			free = freeReplicas(d, g, gs)
		}
		worst[pass] += free
		worst[failBusy] += slots - free
		extra = extra || free > 1
		buf = append(buf, i)
	}
	if extra && len(buf) < d.Devices {
		for i, distinct := 0, len(buf); i < distinct && len(buf) < d.Devices; i++ {
			g := buf[i]
			for range min(freeReplicas(d, &s.Node.GPUs[g], &s.GPUs[g]), d.Devices) - 1 {
				buf = append(buf, g)
			}
		}
	}
	if len(buf) >= d.Devices || !explain {
		return buf, nil
	}
	return buf, gpuReason(d, s, worst)
}

// isReplicated reports whether the GPU is offered as replicas (time slices
// or MPS clients).
func isReplicated(g *cluster.GPU) bool {
	return (g.Sharing == cluster.TimeSliced || g.Sharing == cluster.MPS) && g.Replicas > 0
}

// deviceSlots is how many devices the GPU offers when idle: its replicas,
// or one.
func deviceSlots(g *cluster.GPU) int {
	if isReplicated(g) {
		return g.Replicas
	}
	return 1
}

// freeReplicas is how many devices of the demand a host GPU that is offered
// as replicas can take at once: its free replicas, and on a time-sliced GPU
// no more than its free VRAM holds at the demand's memory each.
func freeReplicas(d *Demand, g *cluster.GPU, st *GPUState) int {
	free := g.Replicas - st.UsedReplicas
	if need := d.GPU.Memory; g.Sharing == cluster.TimeSliced && need > 0 {
		free = min(free, int(st.FreeMemory/need))
	}
	return max(free, 1)
}

// nodeSlots is how many devices the node's GPUs offer when idle.
func nodeSlots(n *cluster.Node) int {
	total := 0
	for i := range n.GPUs {
		total += deviceSlots(&n.GPUs[i])
	}
	return total
}

// gpuReason reports the first stage at which too few GPUs remain.
func gpuReason(d *Demand, s *NodeState, counts [pass + 1]int) *Reason {
	n := s.Node
	resource, unit := resourceOf(d, s)
	remaining := len(n.GPUs)
	if d.Devices > 1 {
		remaining = nodeSlots(n)
	}
	r := &Reason{Resource: resource, Requested: int64(d.Devices), Capacity: int64(remaining), Unit: unit}
	if len(n.GPUs) == 0 {
		r.Code, r.Unresolvable, r.Detail = InsufficientGPU, true, "node has no GPUs"
		r.Unit = "GPUs"
		return r
	}
	if remaining < d.Devices {
		r.Code, r.Unresolvable = InsufficientGPU, true
		r.Free = int64(counts[pass])
		r.Detail = fmt.Sprintf("node has %d GPUs, pod asks for %d", len(n.GPUs), d.Devices)
		if remaining > len(n.GPUs) {
			r.Detail = fmt.Sprintf("node's %d GPUs offer %d replicas, pod asks for %d", len(n.GPUs), remaining, d.Devices)
		}
		return r
	}
	for st := failModel; st < pass; st++ {
		remaining -= counts[st]
		if remaining >= d.Devices {
			continue
		}
		switch st {
		case failModel:
			r.Code, r.Unresolvable = GPUModelMismatch, true
			r.Mismatch = &Mismatch{Wanted: d.Pod.GPUModels, Offered: n.GPUModel().Name}
			r.Detail = fmt.Sprintf("node has %s, pod needs one of %s", r.Mismatch.Offered, r.Mismatch.Models())
			r.Unit = ""
		case failMode:
			r.Code = SharingModeMismatch
			r.Detail = fmt.Sprintf("node's %s GPUs are %s; pod asks for %s", n.GPUModel().Name, modesOf(n), d.GPU)
			r.Unit = ""
		case failCapacity:
			r.Code, r.Unresolvable = capacityReason(d, s, r)
		case failIsolation:
			r.Code = IsolationConflict
			r.Detail = fmt.Sprintf("pod's isolation is %s; free shares are on GPUs held by other tenants", d.Pod.Isolation)
			r.Free = int64(remaining)
		case failVRAMFree:
			r.Code = InsufficientVRAM
			r.Resource, r.Unit = "gpu-memory", "MiB"
			r.Requested, r.Free, r.Capacity = int64(d.GPU.Memory), int64(maxFreeVRAM(d, s)), int64(n.GPUs[0].Memory)
		case failBusy:
			r.Code = InsufficientGPU
			fillBusy(d, s, r, remaining)
		}
		return r
	}
	return nil
}

// capacityReason words a GPU that is too small even when idle.
func capacityReason(d *Demand, s *NodeState, r *Reason) (Code, bool) {
	g := &s.Node.GPUs[0]
	if d.GPU.Kind == cluster.MIGSlice {
		r.Unit = "slices"
		r.Requested, r.Capacity = 1, 0
		if g.Model.MIG == nil {
			r.Detail = fmt.Sprintf("%s does not support MIG", g.Model.Name)
			return SharingModeMismatch, true
		}
		if _, ok := g.Model.MIG.Profile(d.GPU.Profile); !ok {
			r.Detail = fmt.Sprintf("%s has no MIG profile %s (it has %s)", g.Model.Name, d.GPU.Profile, strings.Join(g.Model.MIG.ProfileNames(), ", "))
			return SharingModeMismatch, true
		}
		r.Detail = fmt.Sprintf("MIG layout %s has no %s slice", g.Layout, d.GPU.Profile)
		return InsufficientGPU, false
	}
	r.Resource, r.Unit = "gpu-memory", "MiB"
	r.Requested, r.Free, r.Capacity = int64(d.GPU.Memory), int64(maxFreeVRAM(d, s)), int64(perDeviceVRAM(g))
	if g.Sharing == cluster.MPS {
		r.Detail = fmt.Sprintf("MPS limits each of %d clients to %s", g.Replicas, perDeviceVRAM(g))
		return InsufficientVRAM, false
	}
	if !g.Model.MemoryKnown() && g.Memory == 0 {
		r.Detail = fmt.Sprintf("%s memory is unknown", g.Model.Name)
	}
	return InsufficientVRAM, true
}

func perDeviceVRAM(g *cluster.GPU) gpu.MiB {
	if g.Sharing == cluster.MPS && g.Replicas > 0 {
		return g.Memory / gpu.MiB(g.Replicas)
	}
	return g.Memory
}

func maxFreeVRAM(d *Demand, s *NodeState) gpu.MiB {
	var best gpu.MiB
	for i := range s.GPUs {
		if d.models.has(s.Node.GPUs[i].Model) && s.GPUs[i].FreeMemory > best {
			best = s.GPUs[i].FreeMemory
		}
	}
	return best
}

// fillBusy fills the figures of an InsufficientGPU reason in the request's
// own unit.
func fillBusy(d *Demand, s *NodeState, r *Reason, hosts int) {
	g := &s.Node.GPUs[0]
	switch {
	case d.GPU.Kind == cluster.MIGSlice:
		total, free := 0, 0
		for i := range s.Node.GPUs {
			for j, sl := range s.Node.GPUs[i].Layout {
				if sl.Profile == d.GPU.Profile {
					total++
					if s.GPUs[i].UsedSlices&(1<<j) == 0 {
						free++
					}
				}
			}
		}
		r.Requested, r.Free, r.Capacity = 1, int64(free), int64(total)
	case g.Sharing == cluster.TimeSliced || g.Sharing == cluster.MPS:
		total, used := 0, 0
		for i := range s.Node.GPUs {
			total += s.Node.GPUs[i].Replicas
			used += s.GPUs[i].UsedReplicas
		}
		r.Requested, r.Free, r.Capacity = int64(d.Devices), int64(total-used), int64(total)
	case d.GPU.Kind == cluster.Fraction:
		var best gpu.Milli
		for i := range s.GPUs {
			if d.models.has(s.Node.GPUs[i].Model) && s.GPUs[i].FreeMilli > best {
				best = s.GPUs[i].FreeMilli
			}
		}
		r.Requested, r.Free, r.Capacity = int64(d.GPU.Milli), int64(best), int64(gpu.WholeGPU)
	default:
		r.Free = int64(hosts)
	}
}

// resourceOf names the extended resource and unit the request is counted in.
func resourceOf(d *Demand, s *NodeState) (string, string) {
	switch d.GPU.Kind {
	case cluster.MIGSlice:
		return "nvidia.com/mig-" + d.GPU.Profile, "slices"
	case cluster.Fraction:
		return "nvidia.com/gpu", "milli-GPU"
	case cluster.GPUMemory:
		return "gpu-memory", "MiB"
	}
	if d.GPU.SharedResource {
		return "nvidia.com/gpu.shared", "replicas"
	}
	if len(s.Node.GPUs) > 0 {
		if m := s.Node.GPUs[0].Sharing; m == cluster.TimeSliced || m == cluster.MPS {
			return "nvidia.com/gpu", "replicas"
		}
	}
	return "nvidia.com/gpu", "GPUs"
}

func modesOf(n *cluster.Node) string {
	seen := map[string]bool{}
	var out []string
	for _, g := range n.GPUs {
		mode := g.Sharing.String()
		if g.SharedResource {
			mode += " as nvidia.com/gpu.shared"
		}
		if !seen[mode] {
			seen[mode] = true
			out = append(out, mode)
		}
	}
	return strings.Join(out, "/")
}

// unitFits checks one GPU for one device of the demand.
func unitFits(d *Demand, g *cluster.GPU, st *GPUState) stage {
	if !d.models.has(g.Model) {
		return failModel
	}
	need := d.GPU.Memory
	// A request by the shared resource name gets only replicas offered
	// under it, and those go to nobody else (the loaders set SharedResource
	// on time-sliced and MPS GPUs only).
	if d.GPU.SharedResource != g.SharedResource {
		return failMode
	}
	switch g.Sharing {
	case cluster.Exclusive:
		if d.GPU.Kind != cluster.WholeGPUs {
			return failMode
		}
		if need > 0 && need > g.Memory {
			return failCapacity
		}
		if st.Holders > 0 {
			return failBusy
		}
		return pass
	case cluster.Fractional:
		switch d.GPU.Kind {
		case cluster.MIGSlice:
			return failMode
		case cluster.GPUMemory:
			if g.Memory == 0 {
				return failMode
			}
		}
		if need > 0 && need > g.Memory {
			return failCapacity
		}
		if d.GPU.Kind == cluster.WholeGPUs {
			if st.Holders > 0 {
				return failBusy
			}
			return pass
		}
		if !mayJoin(d.Pod, st) {
			return failIsolation
		}
		if need > 0 && st.FreeMemory < need {
			return failVRAMFree
		}
		if d.GPU.Kind == cluster.Fraction && st.FreeMilli < d.GPU.Milli {
			return failBusy
		}
		return pass
	case cluster.TimeSliced, cluster.MPS:
		if d.GPU.Kind == cluster.MIGSlice || g.Replicas < 1 {
			return failMode
		}
		if need > 0 && need > perDeviceVRAM(g) {
			return failCapacity
		}
		if !mayJoin(d.Pod, st) {
			return failIsolation
		}
		if g.Sharing == cluster.TimeSliced && need > 0 && st.FreeMemory < need {
			return failVRAMFree
		}
		if st.UsedReplicas >= g.Replicas {
			return failBusy
		}
		return pass
	case cluster.MIG:
		if d.GPU.Kind != cluster.MIGSlice {
			return failMode
		}
		if g.Model.MIG == nil {
			return failCapacity
		}
		if _, ok := g.Model.MIG.Profile(d.GPU.Profile); !ok {
			return failCapacity
		}
		has := false
		for i, sl := range g.Layout {
			if sl.Profile == d.GPU.Profile {
				has = true
				if st.UsedSlices&(1<<i) == 0 {
					return pass
				}
			}
		}
		if !has {
			return failCapacity
		}
		return failBusy
	}
	return failMode
}

// mayJoin applies the isolation classes of the pod and of the GPU's holders.
func mayJoin(p *cluster.Pod, st *GPUState) bool {
	if st.Holders == 0 {
		return true
	}
	if p.Isolation == cluster.ShareNone || st.restrict == cluster.ShareNone {
		return false
	}
	if p.Isolation == cluster.ShareTenant || st.restrict == cluster.ShareTenant {
		return !st.mixed && st.Tenant == p.TenantName()
	}
	return true
}

// AssignmentAt builds the assignment that places the demand's devices on
// exactly the given GPUs and, for MIG, slices (a Slice of -1 takes the
// first free slice of the profile), and reports whether each is a host now.
// It is for devices recorded elsewhere (an annotation, a reservation) that
// may be stale or edited by hand: when it reports false, the caller should
// not trust the record.
func AssignmentAt(d *Demand, s *NodeState, devices []cluster.Device) (Assignment, bool) {
	if len(devices) != d.Devices {
		return Assignment{}, false
	}
	a := Assignment{Devices: make([]DeviceShare, len(devices))}
	for i, dev := range devices {
		if dev.GPU < 0 || dev.GPU >= len(s.GPUs) {
			return Assignment{}, false
		}
		g, st := &s.Node.GPUs[dev.GPU], &s.GPUs[dev.GPU]
		// A GPU offered as replicas may hold several devices of the pod,
		// as many as it has replicas free; any other GPU one.
		same := 1
		for _, earlier := range devices[:i] {
			if earlier.GPU == dev.GPU && (dev.Slice < 0 || earlier.Slice == dev.Slice) {
				same++ // distinct slices of one GPU are distinct devices
			}
		}
		if same > 1 && (!isReplicated(g) || same > freeReplicas(d, g, st)) {
			return Assignment{}, false
		}
		if g.DRA != nil && g.DRA.Partitionable() && dev.Slice >= 0 {
			share, ok := partitionAt(g, st, dev.GPU, dev.Slice)
			if !ok {
				return Assignment{}, false
			}
			a.Devices[i] = share
			continue
		}
		if g.DRA != nil && g.Sharing == cluster.MIG && dev.Slice >= 0 && d.Pod.UsesDRA() {
			// A claim's MIG device, of whatever profile its allocation
			// names.
			share, ok := sliceAt(g, st, dev.GPU, dev.Slice)
			if !ok {
				return Assignment{}, false
			}
			a.Devices[i] = share
			continue
		}
		if unitFits(d, g, st) != pass {
			return Assignment{}, false
		}
		share := shareOn(d, g, st, dev.GPU)
		if g.Sharing == cluster.MIG && dev.Slice >= 0 {
			if dev.Slice >= len(g.Layout) || g.Layout[dev.Slice].Profile != d.GPU.Profile || st.UsedSlices&(1<<dev.Slice) != 0 {
				return Assignment{}, false
			}
			share.Slice = dev.Slice
		}
		a.Devices[i] = share
	}
	return a, true
}
