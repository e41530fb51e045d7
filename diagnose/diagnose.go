package diagnose

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/vram"
)

// Cause is why a pending GPU pod waits.
type Cause string

// The causes, in the order they are checked: the first that holds is the
// finding's cause. Only allocation is cured by sharing. Gated and
// NoScheduler come first: the scheduler never sees such a pod, whatever
// the GPUs would say. QuotaExhausted is first of all: the pod does not
// even exist.
const (
	// QuotaExhausted: a workload's controller could not create a pod,
	// since a ResourceQuota on GPUs of its namespace was used up; the
	// finding is the workload's (Finding.Workload), as it has no pod.
	QuotaExhausted Cause = "quota-exhausted"
	// Gated: the pod has scheduling gates (spec.schedulingGates), so no
	// scheduler considers it until they are removed; Kueue's admission
	// gate waits for Kueue to admit the pod's Workload.
	Gated Cause = "gated"
	// NoScheduler: the pod names a scheduler (spec.schedulerName) other
	// than the default one, and no scheduler of that name runs.
	NoScheduler Cause = "no-scheduler"
	// Allocation: GPUs that match the pod's constraints and would hold it
	// exist, but every one is allocated.
	Allocation Cause = "allocation"
	// Memory: the pod's GPU memory need fits no free VRAM and no MIG slice.
	Memory Cause = "memory"
	// Placement: GPUs are free but the pod's rules (selector, affinity,
	// tolerations, GPU model) or the node's configuration exclude them.
	Placement Cause = "placement"
	// Application: the workload underuses its GPUs, so more GPUs would not
	// help. A pending pod does not get it as its cause: one that fits now
	// waits for something outside GPU placement (Other) whatever its
	// workload does, and usage facts only add evidence (Evidence.Usage).
	Application Cause = "application"
	// NoSuchHardware: no node could ever run the pod, even empty.
	NoSuchHardware Cause = "no-such-hardware"
	// Other: the cause is outside GPUs (CPU, memory, quota, the queue).
	Other Cause = "quota/other"
)

// Causes lists every cause in checking order.
func Causes() []Cause {
	return []Cause{QuotaExhausted, Gated, NoScheduler, ClaimMissing, Allocation, Memory, Placement, Application, NoSuchHardware, Other}
}

// Report is the diagnosis of a snapshot.
type Report struct {
	Nodes    int       `json:"nodes"`
	GPUs     int       `json:"gpus"`
	Pending  int       `json:"pending"`
	Findings []Finding `json:"findings"`
	// Failures explain the GPU pods that failed after scheduling: the
	// kubelet rejected them (Rejected) or their containers keep crashing
	// on their GPUs (Crashing).
	Failures []Finding `json:"failures,omitempty"`
	// Warnings are the snapshot's inconsistencies (bound pods that no
	// longer fit their node), counted as they are.
	Warnings []string `json:"warnings,omitempty"`
	// UnknownModels are the cluster's GPU models the catalogue does not
	// describe in full (cluster.Snapshot.UnknownModels): their GPUs are
	// judged on the memory their nodes report, and no fix proposes MIG
	// for them.
	UnknownModels []cluster.UnknownModel `json:"unknownModels,omitempty"`
}

// Finding explains one pending pod, one workload that a quota keeps from
// creating its pods (QuotaExhausted: then Pod is empty and Workload names
// it), or one pod that failed after scheduling (Rejected, Crashing).
type Finding struct {
	Pod      string  `json:"pod"`
	Workload *Object `json:"workload,omitempty"`
	Request  string  `json:"request"`
	// Cause is empty for a skipped pod; Note says why.
	Cause Cause `json:"cause,omitempty"`
	// Also lists the later causes of the order that hold too.
	Also []Cause `json:"also,omitempty"`
	// Summary is the FailedScheduling message that the stock kube-scheduler
	// gives for the pod's request as it stands, in its own format and words
	// (FitErrorMessage): "0/N nodes are available: ... preemption: ...".
	// It is empty when the stock filters pass on some node (the scheduler
	// would bind the pod) or cannot count the request; StockNote says which.
	Summary   string `json:"summary,omitempty"`
	StockNote string `json:"stockNote,omitempty"`
	// Fit is gpupack's own verdict on every node, in groups of nodes with
	// the same reasons: what gpupack knows beyond the scheduler (the VRAM
	// the pod needs, isolation, MIG layouts, GPU models).
	Fit      []NodeGroup `json:"fit"`
	Evidence Evidence    `json:"evidence"`
	// Fix lists what would let the pod run, the nearest change first.
	Fix []string `json:"fix,omitempty"`
	// CrossNode is set when a topology spread constraint or pod
	// (anti-)affinity, the pod's or other pods', excludes some node: the
	// scheduler checks those last, so its message names such an exclusion
	// only on nodes every earlier filter passed (ImpliedCauses).
	CrossNode bool `json:"crossNode,omitempty"`
	// Remedies carry out the fixes: for each fix at least one, in the
	// order of Fix, with the patch, commands or configuration to apply,
	// or, for a fix that is advice, none and a note saying why.
	Remedies []Remedy `json:"remedies,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// NodeGroup is nodes on which gpupack's fit finds the same reasons; no
// reasons: the pod fits them now.
type NodeGroup struct {
	Nodes     []string           `json:"nodes"`
	NodeCount int                `json:"nodeCount"`
	Reasons   []placement.Reason `json:"reasons"`
}

// MaxListed bounds the names listed in evidence; counts stay exact.
const MaxListed = 8

// Evidence is what a finding rests on; only the parts of its cause are set.
type Evidence struct {
	// Nodes are the nodes the cause is about (capped at MaxListed, in
	// snapshot order); NodeCount is how many there are.
	Nodes     []string `json:"nodes,omitempty"`
	NodeCount int      `json:"nodeCount,omitempty"`
	// GPUs is how many GPUs of the models the pod may use are on Nodes.
	GPUs      int          `json:"gpus,omitempty"`
	GPUModels []string     `json:"gpuModels,omitempty"`
	Holders   *HolderStats `json:"holders,omitempty"`
	Memory    *MemoryFacts `json:"memory,omitempty"`
	Rules     []Rule       `json:"rules,omitempty"`
	// RulesExcludeHeld is set for placement when the nodes the rules
	// exclude are fully allocated too, so changing the rules is not enough.
	RulesExcludeHeld bool `json:"rulesExcludeHeld,omitempty"`
	// Relayouts are MIG GPUs whose layout offers no free slice of the
	// pod's profile and a re-layout that would (placement: the node's
	// configuration), keeping the running slices in place where a layout
	// does.
	Relayouts []Relayout    `json:"relayouts,omitempty"`
	Usage     *UsageSummary `json:"usage,omitempty"`
	// Blocking are the distinct reasons that stop the pod, each with the
	// nodes where it does, for the causes that have no finer evidence.
	Blocking []Blocking `json:"blocking,omitempty"`
	// Gates are the pod's scheduling gates (gated).
	Gates []string `json:"gates,omitempty"`
	// Scheduler is the scheduler the pod names, with the schedulers that
	// do run (no-scheduler).
	Scheduler *SchedulerFacts `json:"scheduler,omitempty"`
	// Quota is the quota that refused the workload's pod, with the amounts
	// (quota-exhausted).
	Quota *QuotaFacts `json:"quota,omitempty"`
	// Kueue is what Kueue's objects say about a pod that its admission
	// gate holds (gated), when the snapshot has them.
	Kueue *KueueFacts `json:"kueue,omitempty"`
	// Claims are the requests of the pod's ResourceClaims that no node
	// serves, with what the cluster offers them (allocation, placement).
	Claims []ClaimFacts `json:"claims,omitempty"`
	// Failure is what the status of a pod that failed after scheduling
	// says (rejected, crashing).
	Failure *FailureFacts `json:"failure,omitempty"`
}

// Blocking is one reason that stops the pod, with its figures, and the
// nodes it stops it on (capped at MaxListed; NodeCount is how many).
type Blocking struct {
	placement.Reason
	Nodes     []string `json:"nodes"`
	NodeCount int      `json:"nodeCount"`
	// EvenEmpty says the reason is of the nodes emptied and reconfigured
	// (no-such-hardware): its Free is then that of an empty node, not of
	// the node now.
	EvenEmpty bool `json:"evenEmpty,omitempty"`
}

// HolderStats describes the pods holding the GPUs a pod waits for.
type HolderStats struct {
	Pods int `json:"pods"`
	// Measured is how many holders have usage facts; MeanActiveRatio and
	// IdleHeld are over those. MeanActiveRatio is nil (null in JSON) when
	// no holder is measured; a measured 0 is 0.
	Measured        int      `json:"measured"`
	MeanActiveRatio *float64 `json:"meanActiveRatio"`
	IdleHeld        int      `json:"idleHeld"`
	Window          string   `json:"window,omitempty"`
	Listed          []Holder `json:"listed,omitempty"` // least active first
	// ShareCandidates are GPUs that could host the pod if shared: their
	// holders are not busy and leave enough VRAM.
	ShareCandidates []string `json:"shareCandidates,omitempty"`
}

// Holder is one pod holding GPUs.
type Holder struct {
	Pod      string `json:"pod"`
	Node     string `json:"node,omitempty"`
	Request  string `json:"request"`
	Measured bool   `json:"measured"`
	// ActiveRatio is nil (null in JSON) for a holder without usage facts;
	// a measured 0 is 0.
	ActiveRatio *float64 `json:"activeRatio"`
	Pattern     Pattern  `json:"pattern,omitempty"`
	VRAMUsedP95 gpu.MiB  `json:"vramUsedP95MiB,omitempty"`
}

// MemoryFacts is the GPU memory side of a finding.
type MemoryFacts struct {
	// Need is the memory one device of the pod needs; Source says where
	// it comes from: "request", "mig-profile", "stated" or "estimate".
	Need     gpu.MiB        `json:"needMiB"`
	Source   string         `json:"source"`
	Estimate *vram.Estimate `json:"estimate,omitempty"`
	// LargestFree is the most VRAM free on one GPU the pod may use;
	// LargestGPU the largest such GPU.
	LargestFree gpu.MiB `json:"largestFreeMiB"`
	LargestGPU  gpu.MiB `json:"largestGPUMiB"`
	// LargestGPUNodes are the nodes that have a usable GPU of LargestGPU
	// (capped at MaxListed); LargestGPUNodeCount is how many there are.
	LargestGPUNodes     []string `json:"largestGPUNodes,omitempty"`
	LargestGPUNodeCount int      `json:"largestGPUNodeCount,omitempty"`
	// Options are the catalogue's GPUs and MIG profiles that hold Need.
	Options []vram.Option `json:"options,omitempty"`
	// CoTenant is the pod holding the most VRAM of a time-sliced GPU the
	// pod could share, where gpupack agent measured its own figures; nil
	// otherwise.
	CoTenant *CoTenant `json:"coTenant,omitempty"`
}

// CoTenant is a pod's own use of the shared GPU it holds: its VRAM p95
// and activity (0..1 of the GPU's time), and the GPU's memory.
type CoTenant struct {
	Pod         string  `json:"pod"`
	VRAMUsedP95 gpu.MiB `json:"vramUsedP95MiB"`
	ActiveRatio float64 `json:"activeRatio"`
	GPUMemory   gpu.MiB `json:"gpuMemoryMiB"`
}

// Rule is one of the pod's rules (or a node's configuration) that keeps it
// off nodes with free GPUs.
type Rule struct {
	Code    placement.Code `json:"code"`
	Rule    string         `json:"rule"`
	Message string         `json:"message"`
	// Excludes are the free nodes the rule keeps the pod off.
	Excludes      []string `json:"excludes"`
	ExcludesCount int      `json:"excludesCount"`
}

// UsageSummary is the pod's workload's measured use of its GPUs.
type UsageSummary struct {
	Pattern     Pattern `json:"pattern"`
	ActiveRatio float64 `json:"activeRatio"`
	Window      string  `json:"window"`
	Suggests    string  `json:"suggests"`
}

// Diagnose explains every pending pod of the snapshot that asks for a GPU;
// pods without a GPU request get a Finding with only a Note. usage may be
// nil.
func Diagnose(s *cluster.Snapshot, usage *Usage) (*Report, error) {
	return DiagnoseContext(context.Background(), s, usage)
}

// DiagnoseContext is Diagnose that stops, returning ctx's error, soon after
// ctx is done (a signal): it looks at ctx before each pending pod, so a
// snapshot of thousands of pending pods on thousands of nodes is not
// diagnosed to the end for nobody.
func DiagnoseContext(ctx context.Context, s *cluster.Snapshot, usage *Usage) (*Report, error) {
	if usage == nil {
		usage = &Usage{}
	}
	states, warnings, err := placement.States(s)
	if err != nil {
		return nil, err
	}
	e := &engine{s: s, usage: usage, states: states, holders: s.PodsOn(), workloads: kueueIndex(s.Kueue)}
	for _, p := range s.Pods {
		e.antiAffinity = e.antiAffinity || (p.Bound() && len(p.PodAntiAffinity) > 0)
	}
	e.classify()
	rep := &Report{Nodes: len(s.Nodes), GPUs: s.GPUCount(), Warnings: warnings, UnknownModels: s.UnknownModels()}
	pending := s.Pending()
	e.like = map[string]int{}
	for _, p := range pending {
		e.like[e.fingerprint(p)]++
	}
	done := map[string]int{}         // pod fingerprint -> finding index
	firsts := map[int]*cluster.Pod{} // finding index -> the pod it was made for
	for k, p := range pending {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("diagnosis stopped after %d of %d pending pods: %w", k, len(pending), err)
		}
		rep.Pending++
		key := e.fingerprint(p)
		if i, ok := done[key]; ok {
			f := rep.Findings[i]
			f.Pod = p.Key()
			f.Remedies = retarget(f.Remedies, podObject(firsts[i]), p)
			rep.Findings = append(rep.Findings, f)
			continue
		}
		f, err := e.diagnose(p)
		if err != nil {
			return nil, err
		}
		e.unreached(&f, p)
		done[key] = len(rep.Findings)
		firsts[len(rep.Findings)] = p
		rep.Findings = append(rep.Findings, f)
	}
	rep.Findings = append(rep.Findings, e.quotaFindings()...)
	rep.Failures = e.failureFindings()
	// Once every pod's remedies are written (a pod that shares another's
	// finding gets its remedies retargeted from them), the names are
	// checked.
	for _, fs := range [][]Finding{rep.Findings, rep.Failures} {
		for i := range fs {
			checkNames(fs[i].Remedies)
		}
	}
	return rep, nil
}

// engine holds what every pod's diagnosis shares: node states, classes of
// identical nodes, and the holders of each node.
type engine struct {
	s       *cluster.Snapshot
	usage   *Usage
	states  []*placement.NodeState
	holders [][]*cluster.Pod
	classes []nodeClass
	// workloads maps each pod that owns a Kueue Workload to it.
	workloads map[string]*cluster.KueueWorkload
	// antiAffinity: some bound pod has required pod anti-affinity, so a
	// pending pod's labels may keep it off nodes.
	antiAffinity bool
	// like counts the pending pods by fingerprint: the replicas that get
	// the same finding.
	like map[string]int
	// omit are the label keys classes leave out (topologyOnlyKeys).
	omit map[string]bool
	// demand is the pod's demand under diagnosis, prefiltered.
	demand *placement.Demand
}

// nodeClass is a set of nodes that Fit cannot tell apart: same spec, same
// state. Each question is put to its first node only.
type nodeClass struct {
	nodes []int // snapshot order
	empty *placement.NodeState
}

func (e *engine) classify() {
	e.omit = topologyOnlyKeys(e.s)
	index := map[string]int{}
	var buf []byte
	for i, st := range e.states {
		buf = st.AppendKeyOmitting(buf[:0], e.omit)
		k, ok := index[string(buf)]
		if !ok {
			k = len(e.classes)
			index[string(buf)] = k
			e.classes = append(e.classes, nodeClass{})
		}
		e.classes[k].nodes = append(e.classes[k].nodes, i)
	}
	for k := range e.classes {
		e.classes[k].empty = placement.NewNodeState(e.s.Nodes[e.classes[k].nodes[0]])
	}
}

// topologyOnlyKeys are the node label keys that pods read only as topology
// keys of spread constraints and pod (anti-)affinity terms, never in a
// pending pod's nodeSelector or node affinity: kubernetes.io/hostname,
// most often. Classes leave them out, so that a node's hostname does not
// make it a class of its own, and each pod with cross-node rules splits
// the classes by what those rules say (splitByTopology).
func topologyOnlyKeys(s *cluster.Snapshot) map[string]bool {
	keys := map[string]bool{}
	for _, p := range s.Pods {
		for _, t := range p.PodAntiAffinity {
			keys[t.TopologyKey] = true
		}
		if p.Bound() {
			continue
		}
		for _, c := range p.SpreadConstraints {
			keys[c.TopologyKey] = true
		}
		for _, t := range p.PodAffinity {
			keys[t.TopologyKey] = true
		}
	}
	for _, p := range s.Pods {
		if p.Bound() {
			continue
		}
		for k := range p.NodeSelector {
			delete(keys, k)
		}
		for _, t := range p.RequiredAffinity {
			for _, r := range t.MatchExpressions {
				delete(keys, r.Key)
			}
		}
	}
	return keys
}

// splitByTopology is the classes split by what the demand's cross-node
// rules say of each node, for a demand that has them when classes leave
// topology keys out: nodes of a class then differ only in those labels.
func (e *engine) splitByTopology(d *placement.Demand) []nodeClass {
	var out []nodeClass
	var buf []byte
	for _, c := range e.classes {
		index := map[string]int{}
		for _, i := range c.nodes {
			buf = d.AppendTopologyKey(buf[:0], e.s.Nodes[i])
			j, ok := index[string(buf)]
			if !ok {
				j = len(out)
				index[string(buf)] = j
				out = append(out, nodeClass{empty: c.empty})
			}
			out[j].nodes = append(out[j].nodes, i)
		}
	}
	for k := range out {
		if out[k].empty.Node != e.s.Nodes[out[k].nodes[0]] {
			out[k].empty = placement.NewNodeState(e.s.Nodes[out[k].nodes[0]])
		}
	}
	return out
}

func (e *engine) rep(k int) *placement.NodeState { return e.states[e.classes[k].nodes[0]] }

// fingerprint identifies pods that get the same finding but for their name.
func (e *engine) fingerprint(p *cluster.Pod) string {
	if placement.JudgesClaims(p) {
		return p.Key() // the finding names the pod's own claims
	}
	facts, ok := e.usage.Pods[p.Key()]
	var model vram.ModelSpec
	if facts.Model != nil {
		model = *facts.Model
	}
	// The cross-node rules read the pod's namespace and labels, and the
	// other pods' anti-affinity its labels.
	var rules []any
	if p.HasPodRules() || e.antiAffinity {
		rules = []any{p.Namespace, p.Labels, spreadKey(p.SpreadConstraints), affinityKey(p.PodAffinity), affinityKey(p.PodAntiAffinity)}
	}
	return fmt.Sprintf("%v|%d|%d|%q|%v|%v|%v|%d|%q|%v|%v|%v|%v", p.GPU, p.CPU, p.Memory, p.GPUModels, p.NodeSelector,
		p.RequiredAffinity, p.Tolerations, p.Isolation, []any{p.TenantName(), p.SchedulingGates, p.Scheduler(), e.workloadKey(p), p.Labels[cluster.KueueQueueLabel]}, ok, facts.Measured, []any{facts.ActiveRatio, facts.Pattern, facts.VRAMUsedP95, facts.GPUMemory, model}, rules)
}

// workloadKey names the Kueue Workload the pod owns, empty for none.
func (e *engine) workloadKey(p *cluster.Pod) string {
	if w := e.workloads[p.Key()]; w != nil {
		return w.Key()
	}
	return ""
}

// spreadKey and affinityKey print the rules with their pointers followed,
// for fingerprints.
func spreadKey(cs []cluster.SpreadConstraint) string {
	var b strings.Builder
	for _, c := range cs {
		minDomains := c.MinDomainsOrOne()
		fmt.Fprintf(&b, "%d|%q|%q|%v|%q|%d|%q|%q;", c.MaxSkew, c.TopologyKey, c.WhenUnsatisfiable, selectorKey(c.LabelSelector), c.MatchLabelKeys, minDomains, c.NodeAffinityPolicy, c.NodeTaintsPolicy)
	}
	return b.String()
}

func affinityKey(ts []cluster.PodAffinityTerm) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%q|%v|%q|%v|%q|%q;", t.TopologyKey, selectorKey(t.LabelSelector), t.Namespaces, selectorKey(t.NamespaceSelector), t.MatchLabelKeys, t.MismatchLabelKeys)
	}
	return b.String()
}

func selectorKey(s *cluster.LabelSelector) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("%v%v", s.MatchLabels, s.MatchExpressions)
}

// classVerdict is what one class of nodes says about one pod.
type classVerdict struct {
	now   []placement.Reason // Fit with the pod's full need
	sched []placement.Reason // Fit with the request as the scheduler sees it
	rules []placement.Reason // the reasons a rule or the node's configuration gives
	alloc bool               // allocation: rules pass, held GPUs stop it, fits the empty node
	mem   bool               // memory: rules pass, GPU memory or MIG slices stop it
	place bool               // placement: only rules stop it; fits with them relaxed
	// placeHeld: rules stop it, and with them relaxed it would fit this
	// node once its held GPUs were freed.
	placeHeld bool
}

func (e *engine) diagnose(p *cluster.Pod) (Finding, error) {
	f := Finding{Pod: p.Key(), Request: p.GPU.String()}
	if !p.WantsGPU() && len(missingClaims(p)) == 0 {
		f.Note = "no GPU request; skipped (not a GPU pod, so not diagnosed)"
		return f, nil
	}
	c := e.s.Catalogue
	d, err := placement.NewDemand(p, c)
	if err != nil {
		return f, err
	}
	if placement.JudgesClaims(p) {
		return f, e.diagnoseClaims(&f, p, d)
	}
	facts := e.usage.Pods[p.Key()]
	need := memoryNeed(p, facts, c)
	full, relaxed, err := fullDemands(p, d, need, c)
	if err != nil {
		return f, err
	}
	d.PreFilter(e.states, e.s.NamespaceLabels)
	if full != d {
		full.PreFilter(e.states, e.s.NamespaceLabels)
	}
	e.demand = d
	if d.HasTopology() && len(e.omit) > 0 {
		all := e.classes
		e.classes = e.splitByTopology(d)
		defer func() { e.classes = all }()
	}
	migTooSmall := p.GPU.Kind == cluster.MIGSlice && need.stated > need.perDevice
	j, kinds := e.judgeClasses(p, d, full, relaxed, migTooSmall)
	verdicts := j.verdicts
	e.summarize(&f, p, j.stock, j.stockOK, verdicts)
	for _, v := range verdicts {
		f.CrossNode = f.CrossNode || slices.ContainsFunc(v.now, func(r placement.Reason) bool { return crossNode(r.Code) })
	}
	holds := map[Cause]bool{Allocation: len(kinds.alloc) > 0 && !migTooSmall, Memory: len(kinds.mem) > 0 || migTooSmall, Placement: len(kinds.place) > 0 || len(kinds.layout) > 0}
	switch {
	case len(kinds.fitsNow) > 0 && !migTooSmall:
		e.fitsNow(&f, kinds.fitsNow)
		if facts.Measured && facts.Pattern.Underused() {
			e.usageOf(&f, facts)
		}
	case len(kinds.cross) > 0:
		// Nodes have free GPUs that only a spread constraint or pod
		// (anti-)affinity keeps the pod off: the pods fit in total, and the
		// rule is what to change, though freeing GPUs where the rule
		// points would do too (Also: allocation).
		e.placement(&f, p, kinds.place, verdicts, false)
		if holds[Allocation] {
			f.Also = append(f.Also, Allocation)
		}
	case holds[Allocation]:
		e.allocation(&f, p, need, kinds.alloc)
	case holds[Memory]:
		e.memory(&f, p, need, kinds.mem, verdicts, migTooSmall)
	case holds[Placement] && len(kinds.place) == 0:
		e.migLayout(&f, p, kinds.layout)
	case holds[Placement]:
		e.placement(&f, p, kinds.place, verdicts, false)
	case len(kinds.placeHeld) > 0:
		// The rules point the pod away from the only hardware that could
		// run it, which is full as well: the rules are the first thing to
		// change, so this is placement rather than quota or hardware.
		e.placement(&f, p, kinds.placeHeld, verdicts, true)
	default:
		e.beyond(&f, p, full, relaxed, need, verdicts)
	}
	if f.Cause == Allocation || f.Cause == Memory || f.Cause == Placement {
		for _, cause := range []Cause{Memory, Placement} {
			if holds[cause] && cause != f.Cause && !(f.Cause == Placement && cause == Memory) {
				f.Also = append(f.Also, cause)
			}
		}
	}
	return f, nil
}

// fullDemands are the pod's demand with its full memory need (d itself
// where the request states it, or the need is only a MIG profile's), and
// that demand with the pod's rules relaxed.
func fullDemands(p *cluster.Pod, d *placement.Demand, n need, c *gpu.Catalogue) (full, relaxed *placement.Demand, err error) {
	full = d
	if n.perDevice > 0 && n.Source != "request" && n.Source != "mig-profile" && p.GPU.Kind != cluster.MIGSlice {
		q := *p
		q.GPU.Memory = n.perDevice
		if full, err = placement.NewDemand(&q, c); err != nil {
			return nil, nil, err
		}
	}
	relaxed, err = placement.NewDemand(relaxPod(full.Pod), c)
	if err != nil {
		return nil, nil, err
	}
	return full, relaxed, nil
}

// classKinds are the classes of nodes (indices into engine.classes) by
// what a pod finds on them: it fits now; held GPUs stop it (alloc); GPU
// memory or MIG slices do (mem); only rules do, and with them relaxed it
// fits now (place; cross where the rules are all cross-node ones) or once
// the held GPUs are freed (placeHeld); another MIG layout would serve it
// (layout).
type classKinds struct {
	fitsNow, alloc, mem, place, placeHeld, layout, cross []int
}

// classJudgement is what fitting a pod on each class of nodes gives: each
// class's verdict and stock status, and whether every status could be
// told.
type classJudgement struct {
	verdicts []classVerdict
	stock    []statusGroup
	stockOK  bool
}

func (e *engine) newClassJudgement() classJudgement {
	return classJudgement{verdicts: make([]classVerdict, len(e.classes)), stock: make([]statusGroup, len(e.classes)), stockOK: true}
}

// setStock sets the stock status of the class k, of nodes nodes like
// cur, from the reasons of the request as the scheduler sees it.
func (j *classJudgement) setStock(d *placement.Demand, k, nodes int, cur *placement.NodeState, sched []placement.Reason) {
	st, ok := stockStatus(d, cur, sched)
	j.stockOK = j.stockOK && ok
	j.stock[k] = statusGroup{nodes: nodes, NodeStatus: st}
}

// judgeClasses fits the pod on each class of nodes: with its full need (now),
// as the scheduler sees its request (sched), with its rules relaxed and
// the node reconfigured, and on the class's empty node; it gives each
// class's verdict and stock status, and the classes by kind.
func (e *engine) judgeClasses(p *cluster.Pod, d, full, relaxed *placement.Demand, migTooSmall bool) (classJudgement, classKinds) {
	j := e.newClassJudgement()
	var ks classKinds
	for k := range e.classes {
		v := &j.verdicts[k]
		cur := e.rep(k)
		_, v.now = placement.Fit(full, cur)
		v.sched = v.now
		if full != d {
			_, v.sched = placement.Fit(d, cur)
		}
		j.setStock(d, k, len(e.classes[k].nodes), cur, v.sched)
		if len(v.now) == 0 {
			ks.fitsNow = append(ks.fitsNow, k)
			continue
		}
		v.rules = ruleReasons(v.now)
		if len(v.rules) > 0 {
			if _, rs := placement.Fit(relaxed, reconfigure(cur, p.GPU, false)); len(rs) == 0 {
				v.place = true
				ks.place = append(ks.place, k)
				if crossNodeOnly(v.rules) {
					ks.cross = append(ks.cross, k)
				}
			} else if _, rs := placement.Fit(relaxed, reconfigure(e.classes[k].empty, p.GPU, false)); len(rs) == 0 {
				v.placeHeld = true
				ks.placeHeld = append(ks.placeHeld, k)
			}
			continue
		}
		if heldOnly(v.now) {
			if _, rs := placement.Fit(full, e.classes[k].empty); len(rs) == 0 {
				v.alloc = true
				ks.alloc = append(ks.alloc, k)
				continue
			}
		}
		if p.GPU.Kind == cluster.MIGSlice && !migTooSmall && e.hasRelayout(e.classes[k].nodes[:1], p) {
			ks.layout = append(ks.layout, k)
			continue
		}
		if memoryShort(v.now, p) {
			v.mem = true
			ks.mem = append(ks.mem, k)
		}
	}
	return j, ks
}

// ruleReasons are the reasons that a pod rule or the node's configuration
// gives, as opposed to what is allocated or how big the hardware is.
func ruleReasons(rs []placement.Reason) []placement.Reason {
	var out []placement.Reason
	for _, r := range rs {
		switch r.Code {
		case placement.NodeUnschedulable, placement.NodeSelectorMismatch, placement.NodeAffinityMismatch,
			placement.TaintNotTolerated, placement.GPUModelMismatch:
			out = append(out, r)
		case placement.SharingModeMismatch:
			if !r.Unresolvable {
				out = append(out, r)
			}
		}
		if crossNode(r.Code) {
			out = append(out, r)
		}
	}
	return out
}

// crossNode reports whether the code is of a rule that reads other nodes'
// pods: topology spread, pod (anti-)affinity, the existing pods'
// anti-affinity.
func crossNode(c placement.Code) bool {
	switch c {
	case placement.SpreadMissingLabel, placement.SpreadSkew, placement.PodAffinityMismatch,
		placement.PodAntiAffinityMismatch, placement.ExistingAntiAffinity:
		return true
	}
	return false
}

// crossNodeOnly reports whether every rule reason is a cross-node one.
func crossNodeOnly(rs []placement.Reason) bool {
	for _, r := range rs {
		if !crossNode(r.Code) {
			return false
		}
	}
	return len(rs) > 0
}

// heldOnly reports whether the GPU reason is that GPUs are held (or shared
// with pods the pod may not join).
func heldOnly(rs []placement.Reason) bool {
	for _, r := range rs {
		if (r.Code == placement.InsufficientGPU && !r.Unresolvable) || r.Code == placement.IsolationConflict {
			return true
		}
	}
	return false
}

// memoryShort reports whether GPU memory, or the MIG slices that carve it,
// stop the pod.
func memoryShort(rs []placement.Reason, p *cluster.Pod) bool {
	for _, r := range rs {
		if r.Code == placement.InsufficientVRAM || (p.GPU.Kind == cluster.MIGSlice && r.Code == placement.InsufficientGPU) {
			return true
		}
	}
	return false
}

// relaxPod is the pod without its placement rules: any node, any GPU
// model, every taint tolerated, no spread or pod (anti-)affinity (the
// anti-affinity of other pods stays, but its demand is not prefiltered).
func relaxPod(p *cluster.Pod) *cluster.Pod {
	q := *p
	q.NodeSelector, q.RequiredAffinity, q.GPUModels = nil, nil, nil
	q.SpreadConstraints, q.PodAffinity, q.PodAntiAffinity = nil, nil, nil
	q.Tolerations = []cluster.Toleration{{Operator: "Exists"}}
	return &q
}

// reconfigure is the what-if of a node uncordoned and with its idle GPUs
// (all of them when all is set, for an empty node) set up to serve the
// request form: whole GPUs exclusive, fractions fractional, MIG slices on a
// layout that has the profile.
func reconfigure(st *placement.NodeState, req cluster.Request, all bool) *placement.NodeState {
	n := *st.Node
	n.Unschedulable = false
	n.GPUs = slices.Clone(n.GPUs)
	out := st.Clone()
	out.Node = &n
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if !all && !st.GPUs[i].Idle() {
			continue
		}
		switch req.Kind {
		case cluster.WholeGPUs:
			if g.Sharing == cluster.MIG {
				g.Sharing, g.Layout = cluster.Exclusive, nil
			}
		case cluster.Fraction, cluster.GPUMemory:
			if g.Sharing == cluster.Exclusive || g.Sharing == cluster.MIG {
				g.Sharing, g.Layout = cluster.Fractional, nil
			}
		case cluster.MIGSlice:
			if g.Model.MIG == nil || (g.Sharing == cluster.MIG && !all) {
				continue
			}
			if l, err := g.Model.MIG.Fit([]string{req.Profile}); err == nil {
				g.Sharing, g.Layout, g.Replicas = cluster.MIG, l, 0
			}
		}
		out.GPUs[i] = placement.NewNodeState(&cluster.Node{GPUs: []cluster.GPU{*g}}).GPUs[0]
	}
	return out
}

// need is a pod's GPU memory need per device and where it comes from.
type need struct {
	perDevice gpu.MiB
	Source    string
	estimate  *vram.Estimate
	// stated is the per-device need from the usage file (stated or
	// estimated), 0 when none; for a MIG pod it is compared with the slice.
	stated gpu.MiB
}

func memoryNeed(p *cluster.Pod, facts PodFacts, c *gpu.Catalogue) need {
	devices := gpu.MiB(max(p.GPU.Count, 1))
	var n need
	switch {
	case p.GPU.Kind == cluster.MIGSlice:
		n.perDevice, n.Source = migMemory(c, p.GPU.Profile), "mig-profile"
	case p.GPU.Memory > 0:
		n.perDevice, n.Source = p.GPU.Memory, "request"
	}
	if facts.GPUMemory > 0 {
		n.stated = (facts.GPUMemory + devices - 1) / devices
		if n.stated > n.perDevice {
			n.perDevice, n.Source = n.stated, "stated"
		}
	} else if facts.Model != nil {
		est := vram.EstimateMemory(*facts.Model)
		n.estimate = &est
		n.stated = (est.Total + devices - 1) / devices
		if n.stated > n.perDevice {
			n.perDevice, n.Source = n.stated, "estimate"
		}
	}
	if p.GPU.Kind == cluster.MIGSlice {
		n.perDevice, n.Source = migMemory(c, p.GPU.Profile), "mig-profile"
	}
	return n
}

// nodesOf lists the nodes of the classes in snapshot order.
func (e *engine) nodesOf(ks []int) []int {
	var out []int
	for _, k := range ks {
		out = append(out, e.classes[k].nodes...)
	}
	slices.Sort(out)
	return out
}

func (e *engine) names(idx []int) ([]string, int) {
	out := make([]string, 0, min(len(idx), MaxListed))
	for _, i := range idx[:min(len(idx), MaxListed)] {
		out = append(out, e.s.Nodes[i].Name)
	}
	return out, len(idx)
}

// usableGPUs counts the GPUs on the nodes of the models the pod may use.
func usableGPUs(p *cluster.Pod, nodes []*cluster.Node) (int, []string) {
	count := 0
	models := map[string]bool{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if len(p.GPUModels) == 0 || slices.Contains(p.GPUModels, g.Model.Name) {
				count++
				models[g.Model.Name] = true
			}
		}
	}
	names := make([]string, 0, len(models))
	for m := range models {
		names = append(names, m)
	}
	sort.Strings(names)
	return count, names
}

func (e *engine) nodeList(idx []int) []*cluster.Node {
	out := make([]*cluster.Node, len(idx))
	for i, n := range idx {
		out[i] = e.s.Nodes[n]
	}
	return out
}

func pct(r float64) string { return fmt.Sprintf("%.0f%%", 100*r) }

// JoinNames lists names, adding "and N more" when total exceeds them; the
// evidence lists are capped, and edges format them with it too.
func JoinNames(names []string, total int) string {
	s := strings.Join(names, ", ")
	if total > len(names) {
		s += fmt.Sprintf(" and %d more", total-len(names))
	}
	return s
}

// migMemory is the memory of a MIG profile, 0 when no model has it.
func migMemory(c *gpu.Catalogue, profile string) gpu.MiB {
	p, _ := c.MIGProfile(profile)
	return p.Memory
}
