package gpupack

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/placement"
)

// nodeState is the node's placement state as the NodeInfo shows it, built
// once per NodeInfo generation (which changes with every pod added, removed
// or updated, and with the node; the scheduler's copies of a NodeInfo keep
// its generation). The state is shared: callers must not change it. Only
// the snapshot's own NodeInfos are cached; the copies the scheduler makes
// for one evaluation (nominated pods, preemption) are built each time.
func (p *Plugin) nodeState(ctx context.Context, ni fwk.NodeInfo) *nodeEntry {
	gen := ni.GetGeneration()
	p.mu.Lock()
	e, ok := p.nodes[ni]
	p.mu.Unlock()
	if ok && e.generation == gen {
		return e
	}
	e = &nodeEntry{name: ni.Node().Name, generation: gen, state: p.buildState(ctx, ni)}
	if lister := p.handle.SnapshotSharedLister(); lister != nil {
		if current, err := lister.NodeInfos().Get(e.name); err == nil && current == ni {
			p.mu.Lock()
			p.nodes[ni] = e
			gone := p.forgetGoneLocked(lister.NodeInfos())
			p.mu.Unlock()
			p.forgetNodeGPUs(gone)
		}
	}
	return e
}

// fitsGPUs is placement.FitsGPUs of the cycle's demand on the entry's
// state, remembered for the demand's key.
func (p *Plugin) fitsGPUs(e *nodeEntry, s *cycleState) bool {
	p.mu.Lock()
	m := e.memo
	p.mu.Unlock()
	if m.key == s.key && m.fitsKnown {
		return m.fits
	}
	fits := placement.FitsGPUs(s.demand, e.state)
	p.mu.Lock()
	if e.memo.key != s.key {
		e.memo = nodeMemo{key: s.key}
	}
	e.memo.fitsKnown, e.memo.fits = true, fits
	p.mu.Unlock()
	return fits
}

// forgetGoneLocked drops the entries of NodeInfos that the snapshot no
// longer holds once they outnumber the live ones, and returns the names of
// the deleted nodes among them; p.mu is held.
func (p *Plugin) forgetGoneLocked(infos fwk.NodeInfoLister) (gone []string) {
	if len(p.nodes) < 64 {
		return nil
	}
	list, err := infos.List()
	if err != nil || len(p.nodes) <= 2*len(list) {
		return nil
	}
	for ni, e := range p.nodes {
		current, err := infos.Get(e.name)
		if err != nil {
			gone = append(gone, e.name)
		}
		if err != nil || current != ni {
			delete(p.nodes, ni)
		}
	}
	return gone
}

// buildState converts the node and its pods as the live loader does
// (kube.ConvertNode, kube.ConvertPod, which reads the pods' device
// records, wellknown.AnnotationGPUDevices) and rebuilds what each pod holds
// with placement.RebuildNode, the rule diagnose and plan use too. A pod
// without the annotation yet takes this plugin's reservation as its
// record. Misfits (a record that conflicts, a pod its node cannot hold)
// are logged; the pod is counted anyway.
func (p *Plugin) buildState(ctx context.Context, ni fwk.NodeInfo) *placement.NodeState {
	logger := klog.FromContext(ctx)
	node, _ := kube.ConvertNode(ni.Node(), p.catalogue)
	p.noteNode(node)
	pods := ni.GetPods()
	demands := make([]*placement.Demand, 0, len(pods))
	for _, pi := range pods {
		pod := pi.GetPod()
		cp, _ := kube.ConvertPod(pod)
		p.recorded(logger, pod, cp)
		d, err := placement.NewDemand(cp, p.catalogue)
		if err != nil {
			logger.Info("pod's request cannot be placed; its GPUs are not counted", "pod", klog.KObj(pod), "err", err)
			continue
		}
		demands = append(demands, d)
	}
	st, misfits := placement.RebuildNode(node, demands)
	for _, m := range misfits {
		logger.Info("pod's GPU devices on the node are not as recorded or do not fit; trusting the apiserver's pods", "node", node.Name, "misfit", m.String())
	}
	return st
}

// recorded completes cp.Devices, the pod's record: kube.ConvertPod took
// the annotation if there is one (and the reservation is dropped then),
// else this plugin's reservation stands in. A malformed annotation is
// logged and the pod left without a record.
func (p *Plugin) recorded(logger klog.Logger, pod *v1.Pod, cp *cluster.Pod) {
	if text, ok := pod.Annotations[wellknown.AnnotationGPUDevices]; ok {
		p.mu.Lock()
		delete(p.reserved, pod.UID)
		p.mu.Unlock()
		if _, err := wellknown.ParseDevices(text); err != nil {
			logger.Info("ignoring malformed annotation", "pod", klog.KObj(pod), "err", err)
		}
		return
	}
	p.mu.Lock()
	r, ok := p.reserved[pod.UID]
	p.mu.Unlock()
	if ok && (r.node == pod.Spec.NodeName || pod.Spec.NodeName == "") {
		cp.Devices = r.devices
	}
}

// workloadWindow is the distribution of the most recent GPU pods, which
// fragmentation-aware policies measure against.
type workloadWindow struct {
	limit   int
	seen    map[types.UID]bool
	uids    []types.UID // ring of at most limit, beside demands
	demands []*placement.Demand
	next    int
	// builtAt is len(demands) and shapes when the policy was last built.
	builtAt, builtShapes int
	shapes               map[shape]int
	maxCPU               gpu.CPUMilli
	maxGPUMilli          gpu.Milli
	// nodeGPUs are the GPUs of each node seen, by model index
	// (placement.CountGPUsByModel), whose sum the policy weighs scarce
	// models by.
	nodeGPUs map[string]map[int]int
	stale    bool // the policy must be rebuilt before scoring
}

type shape struct {
	cpu     gpu.CPUMilli
	milli   gpu.Milli
	devices int
}

// observe adds the pod's demand to the workload once, and marks the policy
// stale when a new demand shape appears or the window has doubled since the
// policy was built.
func (p *Plugin) observe(uid types.UID, d *placement.Demand) {
	p.policyMu.Lock()
	defer p.policyMu.Unlock()
	w := &p.workload
	if w.seen[uid] {
		return
	}
	w.seen[uid] = true
	if w.shapes == nil {
		w.shapes = map[shape]int{}
	}
	if len(w.demands) < w.limit {
		w.uids, w.demands = append(w.uids, uid), append(w.demands, d)
	} else {
		old := w.demands[w.next]
		oldShape := shape{old.CPU, old.PerGPUMilli, old.Devices}
		if w.shapes[oldShape]--; w.shapes[oldShape] == 0 {
			delete(w.shapes, oldShape)
		}
		delete(w.seen, w.uids[w.next])
		w.uids[w.next], w.demands[w.next] = uid, d
		w.next = (w.next + 1) % w.limit
	}
	w.shapes[shape{d.CPU, d.PerGPUMilli, d.Devices}]++
	if len(w.shapes) > w.builtShapes || len(w.demands) >= 2*max(w.builtAt, 1) {
		w.stale = true
	}
}

// noteNode keeps the largest node's CPU and GPU, the policies' normalisers.
func (p *Plugin) noteNode(n *cluster.Node) {
	p.policyMu.Lock()
	defer p.policyMu.Unlock()
	w := &p.workload
	if n.CPU > w.maxCPU {
		w.maxCPU, w.stale = n.CPU, true
	}
	if g := gpu.Milli(len(n.GPUs)) * gpu.WholeGPU; g > w.maxGPUMilli {
		w.maxGPUMilli, w.stale = g, true
	}
	if gpus := placement.CountGPUsByModel([]*cluster.Node{n}); !maps.Equal(gpus, w.nodeGPUs[n.Name]) {
		if w.nodeGPUs == nil {
			w.nodeGPUs = map[string]map[int]int{}
		}
		w.nodeGPUs[n.Name], w.stale = gpus, true
	}
}

// forgetNodeGPUs drops the GPUs of deleted nodes from the cluster's count.
func (p *Plugin) forgetNodeGPUs(names []string) {
	if len(names) == 0 {
		return
	}
	p.policyMu.Lock()
	defer p.policyMu.Unlock()
	for _, name := range names {
		delete(p.workload.nodeGPUs, name)
	}
	p.workload.stale = true
}

// gpusByModel is the GPUs of the nodes seen, by model index.
func (w *workloadWindow) gpusByModel() map[int]int {
	out := map[int]int{}
	for _, gpus := range w.nodeGPUs {
		for m, n := range gpus {
			out[m] += n
		}
	}
	return out
}

// score is the policy's score of the cycle's demand on the entry's state,
// rebuilding a stale policy first; it is remembered for the demand's key
// and the policy's epoch.
func (p *Plugin) score(e *nodeEntry, s *cycleState) (float64, int) {
	p.policyMu.Lock()
	defer p.policyMu.Unlock()
	if w := &p.workload; w.stale || p.policy == nil {
		policy, err := placement.New(p.args.Policy, placement.Options{
			Workload:        placement.NewWorkload(w.demands, placement.TypicalCoverage),
			MaxNodeCPU:      w.maxCPU,
			MaxNodeGPUMilli: w.maxGPUMilli,
			GPUsByModel:     w.gpusByModel(),
		})
		if err == nil { // the name was validated in New
			p.policy, w.builtAt, w.builtShapes, w.stale = policy, len(w.demands), len(w.shapes), false
			p.epoch++
		}
	}
	if p.memoScores {
		p.mu.Lock()
		m := e.memo
		p.mu.Unlock()
		if m.key == s.key && m.epoch == p.epoch {
			return m.score, m.gpu
		}
	}
	score, g := p.policy.Score(s.demand, e.state)
	if p.memoScores {
		p.mu.Lock()
		if e.memo.key != s.key {
			e.memo = nodeMemo{key: s.key}
		}
		e.memo.epoch, e.memo.score, e.memo.gpu = p.epoch, score, g
		p.mu.Unlock()
	}
	return score, g
}
