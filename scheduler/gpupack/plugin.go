package gpupack

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/placement"
)

// Name is the plugin's name in the KubeSchedulerConfiguration.
const Name = "GPUPack"

// ReasonUnschedulable is the reason of the event the plugin writes for a GPU
// pod that fits no node.
const ReasonUnschedulable = "GPUPackUnschedulable"

const stateKey fwk.StateKey = Name

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.PreScorePlugin    = &Plugin{}
	_ fwk.ScorePlugin       = &Plugin{}
	_ fwk.ScoreExtensions   = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.BindPlugin        = &Plugin{}
)

// Plugin places GPU pods with package placement. Its methods are safe for
// the framework's concurrent Filter and Score calls.
type Plugin struct {
	handle    fwk.Handle
	catalogue *gpu.Catalogue
	args      Args

	// mu guards nodes and reserved.
	mu sync.Mutex
	// nodes caches each node's placement state by the scheduler snapshot's
	// NodeInfo, which the scheduler keeps for the node's life: a pointer
	// key is cheaper to look up than the node's name, twice per node per
	// cycle.
	nodes map[fwk.NodeInfo]*nodeEntry
	// reserved holds the devices Reserve picked for pods whose annotation
	// is not yet on the pod the framework shows.
	reserved map[types.UID]reservation

	// policyMu guards the policy (its memo is not safe for concurrent use),
	// the workload window it was built from, and its epoch, which counts
	// the policies built so far, so that a score remembered under one is
	// not taken for another's.
	policyMu sync.Mutex
	policy   placement.Policy
	epoch    int
	workload workloadWindow
	// memoScores says whether a node's score may be remembered until the
	// node changes: for every policy but random.
	memoScores bool
}

// nodeEntry is a node's placement state for one NodeInfo generation, with
// what the plugin computed on it for the last demand key (guarded by
// Plugin.mu): the scheduler evaluates every node for pod after pod, and
// all but the nodes that changed still hold the same answer for pods of
// one shape.
type nodeEntry struct {
	name       string
	generation int64
	state      *placement.NodeState
	memo       nodeMemo
}

type nodeMemo struct {
	key       placement.DemandKey
	fitsKnown bool
	fits      bool
	epoch     int // of the policy that gave score; 0: none
	score     float64
	gpu       int
}

type reservation struct {
	node    string
	devices []cluster.Device
}

// New builds the plugin from its arguments; malformed arguments are an
// error naming the field, so the scheduler refuses to start.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	catalogue, err := loadCatalogue(args)
	if err != nil {
		return nil, err
	}
	p := &Plugin{
		handle:    h,
		catalogue: catalogue,
		args:      args,
		nodes:     map[fwk.NodeInfo]*nodeEntry{},
		reserved:  map[types.UID]reservation{},
		workload:  workloadWindow{limit: args.WorkloadPods, seen: map[types.UID]bool{}},
		// The random policy draws anew for every score.
		memoScores: args.Policy != "random",
	}
	return p, nil
}

// Name returns Name.
func (p *Plugin) Name() string { return Name }

// cycleState is what PreFilter computes once per scheduling cycle.
type cycleState struct {
	demand *placement.Demand
	key    placement.DemandKey
	// dra is set, and demand nil, for a pod that asks for GPUs only
	// through ResourceClaims: GPUPack scores it and leaves the rest to
	// the DynamicResources plugin. It is set beside demand for a pod whose
	// whole-GPU request a DeviceClass also serves through DRA
	// (extendedResourceName): on a node without device-plugin GPUs that
	// request is DRA's.
	dra *draDemand
	// devices are what Reserve picked, for Bind.
	devices []cluster.Device
}

// Clone shares the demand, which nobody changes after PreFilter.
func (s *cycleState) Clone() fwk.StateData {
	c := *s
	return &c
}

func readState(cs fwk.CycleState) (*cycleState, error) {
	v, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: reading cycle state: %w", Name, err)
	}
	s, ok := v.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%s: cycle state holds %T", Name, v)
	}
	return s, nil
}

// PreFilter converts the pod into its GPU demand once. Pods without GPU
// demand skip the plugin.
func (p *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	cp, warnings := kube.ConvertPod(pod)
	for _, w := range warnings {
		klog.FromContext(ctx).V(2).Info("pod request not fully represented", "pod", klog.KObj(pod), "warning", w)
	}
	if !cp.WantsGPU() {
		if m := p.handle.SharedDRAManager(); m != nil {
			if need := draNeed(pod, m.ResourceClaims()); need > 0 {
				cs.Write(stateKey, &cycleState{dra: &draDemand{need: need, capacity: draCapacity(pod, m.ResourceClaims()), tolerations: draTolerations(pod, m.ResourceClaims())}})
				return nil, nil
			}
		}
		return nil, fwk.NewStatus(fwk.Skip)
	}
	d, err := placement.NewDemand(cp, p.catalogue)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	s := &cycleState{demand: d, key: d.Key()}
	if cp.GPU.Kind == cluster.WholeGPUs && !cp.GPU.SharedResource && servedByDRA(p.handle.SharedDRAManager(), string(kube.ResourceGPU)) {
		s.dra = &draDemand{need: cp.GPU.Count}
	}
	cs.Write(stateKey, s)
	p.observe(pod.UID, d)
	return nil, nil
}

// PreFilterExtensions returns nil: the state is rebuilt from the NodeInfo
// that Filter is given, which already holds added or removed pods.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter says whether the pod fits the node with placement.Fit, and why
// not in the scheduler's words. Reasons that no change short of new
// hardware can cure make the node unresolvable, so preemption skips it.
// The profile's default filters (NodeUnschedulable, NodeAffinity,
// TaintToleration, NodeResourcesFit) run before it and have passed the
// node-level half of Fit, so a node that fits is found with
// placement.FitsGPUs, the GPU half without reasons or assignment, which
// this hot path would only throw away; Fit words the reasons when it does
// not fit.
func (p *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.demand == nil {
		return nil // the DynamicResources plugin's to decide
	}
	e := p.nodeState(ctx, ni)
	if s.dra != nil && len(e.state.Node.GPUs) == 0 {
		return nil // the request is DRA's on this node
	}
	if p.fitsGPUs(e, s) {
		return nil
	}
	_, reasons := placement.Fit(s.demand, e.state)
	return statusOf(reasons)
}

func statusOf(reasons []placement.Reason) *fwk.Status {
	if len(reasons) == 0 {
		return nil
	}
	code := fwk.UnschedulableAndUnresolvable
	msgs := make([]string, len(reasons))
	for i, r := range reasons {
		msgs[i] = r.Message()
		if !r.Unresolvable {
			code = fwk.Unschedulable
		}
	}
	return fwk.NewStatus(code, msgs...)
}

// PostFilter explains, in gpupack's words and with figures, why the pod
// fits no node. It never makes the pod schedulable; its message joins the
// scheduler's FailedScheduling event and PodScheduled condition.
func (p *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(cs)
	if err != nil || s.demand == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	infos, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	states := make([]*placement.NodeState, len(infos))
	for i, ni := range infos {
		states[i] = p.nodeState(ctx, ni).state
	}
	// The explanation includes the cross-node rules (spread constraints,
	// pod affinity), which the profile's own filters judged: a copy of
	// the demand is prefiltered over every node.
	d := *s.demand
	d.PreFilter(states, nil)
	perNode := make([][]placement.Reason, 0, len(infos))
	var closest *placement.Reason
	for _, st := range states {
		_, reasons := placement.Fit(&d, st)
		perNode = append(perNode, reasons)
		for i := range reasons {
			if r := &reasons[i]; r.Code == placement.InsufficientGPU || r.Code == placement.InsufficientVRAM {
				if closest == nil || r.Free > closest.Free {
					closest = r
				}
			}
		}
	}
	msg := fmt.Sprintf("gpupack: %s needs %s; %s", pod.Name, s.demand.GPU, placement.Summary(len(infos), perNode))
	if closest != nil {
		msg += " Closest: " + closest.String() + "."
	}
	if rec := p.handle.EventRecorder(); rec != nil {
		rec.Eventf(pod, nil, v1.EventTypeWarning, ReasonUnschedulable, "Scheduling", msg)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// PreScore skips scoring for pods without GPU demand; for a pod with
// claims it counts each node's free DRA GPUs once for the cycle.
func (p *Plugin) PreScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	if s.dra != nil {
		if s.dra.nodes, err = draNodes(p.handle.SharedDRAManager(), s.dra.tolerations); err != nil {
			return fwk.AsStatus(err)
		}
		if len(s.dra.capacity) > 0 {
			if s.dra.shared, err = draSharedDevices(p.handle.SharedDRAManager()); err != nil {
				return fwk.AsStatus(err)
			}
		}
	}
	return nil
}

// scoreScale keeps three decimals of the policy's score in Score's int64;
// NormalizeScore maps the range to 0..100.
const scoreScale = 1000

// Score is the policy's score of placing the pod on the node.
func (p *Plugin) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := readState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	if s.demand == nil {
		return int64(math.Round(s.dra.score(ni.Node().Name) * scoreScale)), nil
	}
	e := p.nodeState(ctx, ni)
	if s.dra != nil && len(e.state.Node.GPUs) == 0 {
		return int64(math.Round(s.dra.score(ni.Node().Name) * scoreScale)), nil
	}
	score, _ := p.score(e, s)
	return int64(math.Round(score * scoreScale)), nil
}

// ScoreExtensions returns the plugin, which normalises its scores.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore maps the scores linearly onto MinScore..MaxScore, the best
// node getting MaxScore, and then breaks ties among the best nodes as the
// simulator does (sim.Ties): by a fixed node order, not at random. Only
// the tied node first in that order (the lowest FNV-1a hash of its name)
// keeps MaxScore; the others get one less. The policies' scores are coarse
// on purpose, so ties are frequent, and a fixed order packs them onto the
// same nodes where the framework's random choice would scatter them (about
// a point of GPU allocation on openb).
func (p *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	first, firstRank := -1, uint64(0)
	for i := range scores {
		if hi == lo {
			scores[i].Score = fwk.MaxScore
		} else {
			scores[i].Score = fwk.MinScore + (scores[i].Score-lo)*(fwk.MaxScore-fwk.MinScore)/(hi-lo)
		}
		if scores[i].Score == fwk.MaxScore {
			if r := nodeRank(scores[i].Name); first < 0 || r < firstRank {
				first, firstRank = i, r
			}
		}
	}
	for i := range scores {
		if scores[i].Score == fwk.MaxScore && i != first {
			scores[i].Score = fwk.MaxScore - 1
		}
	}
	return nil
}

// nodeRank is a node's place in the fixed tie order: the FNV-1a hash of
// its name, a stable pseudo-random order of the cluster's nodes.
func nodeRank(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// EventsToRegister lists the cluster events after which a pod that the
// plugin rejected may fit: a bound pod leaves (its GPUs free up), a pod's
// requests shrink, a node joins, or a node's allocatable, labels or taints
// change (GPUs, models and sharing are read from them).
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodScaleDown}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}},
	}, nil
}

// Reserve picks the exact GPUs, MIG slice or replica on the chosen node:
// the policy's choice of GPU for one device, Fit's default otherwise.
func (p *Plugin) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := readState(cs)
	if err != nil || s.demand == nil {
		return nil // no GPU demand, or the DynamicResources plugin's
	}
	ni, err := p.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return fwk.AsStatus(err)
	}
	e := p.nodeState(ctx, ni)
	if s.dra != nil && len(e.state.Node.GPUs) == 0 {
		return nil // DRA allocates the request here
	}
	a, reasons := placement.Fit(s.demand, e.state)
	if len(reasons) > 0 {
		return statusOf(reasons)
	}
	if s.demand.Devices == 1 {
		if _, g := p.score(e, s); g >= 0 {
			a = placement.AssignmentOn(s.demand, e.state, []int{g})
		}
	}
	s.devices = a.ClusterDevices()
	p.mu.Lock()
	p.reserved[pod.UID] = reservation{node: nodeName, devices: s.devices}
	p.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("reserved GPU devices", "pod", klog.KObj(pod), "node", nodeName, "devices", wellknown.FormatDevices(s.devices))
	return nil
}

// Unreserve releases what Reserve picked. It is idempotent.
func (p *Plugin) Unreserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) {
	if s, err := readState(cs); err == nil {
		s.devices = nil
	}
	p.mu.Lock()
	delete(p.reserved, pod.UID)
	p.mu.Unlock()
}

// Bind binds a pod that holds reserved devices and writes them on the
// Binding, which the apiserver copies onto the pod (wellknown.AnnotationGPUDevices): one
// API call, where a PreBind patch and the default binder would take two. The
// record lets the device accounting survive a restart of the scheduler. Pods
// without devices are left to the next bind plugin (DefaultBinder); the
// profile lists GPUPack before it.
func (p *Plugin) Bind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := readState(cs)
	if err != nil || len(s.devices) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			Annotations: map[string]string{wellknown.AnnotationGPUDevices: wellknown.FormatDevices(s.devices)}},
		Target: v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	// The default binder's call, retries on transient errors included.
	if err := schedutil.BindPod(ctx, p.handle.ClientSet(), binding); err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: binding pod %s/%s to %s with its GPU devices: %w", Name, pod.Namespace, pod.Name, nodeName, err))
	}
	return nil
}
