package diagnose

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/usage"
	"github.com/gpupack/gpupack/vram"
)

// quietRatio is the activity under which a holder's GPU is offered as a
// candidate for sharing.
const quietRatio = 0.5

func (e *engine) allocation(f *Finding, p *cluster.Pod, n need, ks []int) {
	f.Cause = Allocation
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	f.Evidence.GPUs, f.Evidence.GPUModels = usableGPUs(p, e.nodeList(idx))
	h, idlePods := e.holderStats(idx, n)
	f.Evidence.Holders = h
	var idle []string
	for _, x := range h.Listed {
		if x.Pattern == usage.IdleHeld {
			idle = append(idle, x.Pod)
		}
	}
	if h.IdleHeld > 0 {
		f.addFix(fmt.Sprintf("reclaim the GPUs of the %d idle-held holder(s) (%s): they hold GPUs without work", h.IdleHeld, JoinNames(idle, h.IdleHeld)), reclaimRemedy(idlePods))
	}
	methods, isolation := "time-slicing or MPS", ""
	if e.anyMIG(idx) {
		methods, isolation = "time-slicing, MPS or MIG", ", MIG for isolation"
	}
	switch {
	case len(h.ShareCandidates) > 0:
		f.addAdvice(fmt.Sprintf("share GPUs whose holders use a sliver (time-slicing or MPS within one trust boundary%s); these could host the pod if shared: %s", isolation, strings.Join(h.ShareCandidates, ", ")),
			adviceSharing)
	case h.Measured == 0:
		f.addAdvice("measure the holders (give --usage) to find idle ones; where holders use a sliver, share their GPUs with "+methods,
			"nothing to change until the holders are measured")
	default:
		f.addAdvice(fmt.Sprintf("the holders are busy (mean activity %s): the GPUs are used; add %s GPUs or wait", pct(*h.MeanActiveRatio), strings.Join(f.Evidence.GPUModels, "/")),
			adviceHardware)
	}
}

// anyMIG reports whether a GPU of the nodes can be partitioned with MIG:
// a model the catalogue gives MIG geometry (not one known only from node
// labels, whose geometry is unknown).
func (e *engine) anyMIG(idx []int) bool {
	for _, i := range idx {
		for _, g := range e.s.Nodes[i].GPUs {
			if g.Model.MIG != nil {
				return true
			}
		}
	}
	return false
}

// holderStats aggregates the GPU pods bound to the nodes; it returns the
// idle-held ones too, all of them, least active first.
func (e *engine) holderStats(idx []int, n need) (*HolderStats, []*cluster.Pod) {
	var held []*cluster.Pod
	for _, i := range idx {
		held = append(held, e.holders[i]...)
	}
	return e.holderStatsOf(held, n)
}

// holderStatsOf aggregates the GPU pods of held, bound or not (a pending
// pod holds a quota's GPUs, not a node's); it returns the idle-held ones
// too, all of them, least active first.
func (e *engine) holderStatsOf(held []*cluster.Pod, n need) (*HolderStats, []*cluster.Pod) {
	h := &HolderStats{}
	if e.usage.Window > 0 {
		h.Window = windowString(e.usage.Window)
	}
	type cand struct {
		ratio float64
		name  string
	}
	var all []Holder
	var cands []cand
	type idlePod struct {
		ratio float64
		pod   *cluster.Pod
	}
	var idle []idlePod
	sum := 0.0
	for _, q := range held {
		if !q.WantsGPU() {
			continue
		}
		h.Pods++
		x := Holder{Pod: q.Key(), Node: q.NodeName, Request: q.GPU.String()}
		if facts, ok := e.usage.Pods[q.Key()]; ok && facts.Measured {
			x.Measured, x.ActiveRatio, x.Pattern, x.VRAMUsedP95 = true, &facts.ActiveRatio, facts.Pattern, facts.VRAMUsedP95
			h.Measured++
			sum += facts.ActiveRatio
			if facts.Pattern == usage.IdleHeld {
				h.IdleHeld++
				idle = append(idle, idlePod{facts.ActiveRatio, q})
			}
			if node, bound := e.s.Node(q.NodeName); bound {
				if where, ok := shareCandidate(node, q, facts, n.perDevice); ok {
					cands = append(cands, cand{facts.ActiveRatio, where})
				}
			}
		}
		all = append(all, x)
	}
	if h.Measured > 0 {
		mean := sum / float64(h.Measured)
		h.MeanActiveRatio = &mean
	}
	sort.SliceStable(all, func(a, b int) bool {
		x, y := all[a], all[b]
		if x.Measured != y.Measured {
			return x.Measured
		}
		if (x.Pattern == usage.IdleHeld) != (y.Pattern == usage.IdleHeld) {
			return x.Pattern == usage.IdleHeld
		}
		return x.Measured && *x.ActiveRatio < *y.ActiveRatio
	})
	h.Listed = all[:min(len(all), MaxListed)]
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].ratio < cands[b].ratio })
	for _, c := range cands[:min(len(cands), MaxListed)] {
		h.ShareCandidates = append(h.ShareCandidates, c.name)
	}
	sort.SliceStable(idle, func(a, b int) bool { return idle[a].ratio < idle[b].ratio })
	idlePods := make([]*cluster.Pod, len(idle))
	for i, x := range idle {
		idlePods[i] = x.pod
	}
	return h, idlePods
}

// shareCandidate says whether the holder's GPU could also host a pod that
// needs need MiB (0: unknown) if it were shared: the holder is quiet and
// leaves the VRAM.
func shareCandidate(n *cluster.Node, q *cluster.Pod, facts PodFacts, need gpu.MiB) (string, bool) {
	if facts.ActiveRatio >= quietRatio || facts.Pattern == usage.Busy || facts.Pattern == usage.MemoryBound || facts.VRAMUsedP95 == 0 || len(n.GPUs) == 0 {
		return "", false
	}
	g := n.GPUs[0]
	where := fmt.Sprintf("%s (GPU of %s", n.Name, q.Key())
	if len(q.Devices) > 0 && q.Devices[0].GPU < len(n.GPUs) {
		g = n.GPUs[q.Devices[0].GPU]
		where = fmt.Sprintf("%s/gpu%d (held by %s", n.Name, q.Devices[0].GPU, q.Key())
	}
	if facts.VRAMUsedP95+need > g.Memory {
		return "", false
	}
	return fmt.Sprintf("%s, %s active, %s of %s VRAM used)", where, pct(facts.ActiveRatio), facts.VRAMUsedP95, g.Memory), true
}

func (e *engine) memory(f *Finding, p *cluster.Pod, n need, ks []int, verdicts []classVerdict, migTooSmall bool) {
	f.Cause = Memory
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	f.Evidence.GPUs, f.Evidence.GPUModels = usableGPUs(p, e.nodeList(idx))
	mf, total := e.memoryFacts(p, n, idx)
	f.Evidence.Memory = mf

	if migTooSmall {
		better := ""
		for _, o := range mf.Options {
			if o.MIGProfile != "" {
				better = fmt.Sprintf(" such as %s on %s", o.MIGProfile, o.Model)
				break
			}
		}
		f.addAdvice(fmt.Sprintf("the pod needs %s but MIG profile %s gives %s: ask for a bigger profile%s, or a whole GPU", n.stated, p.GPU.Profile, n.perDevice, better),
			"the request is in a container's resources, which the snapshot does not record by container")
	}
	if node, ok := e.vramHeldBySharers(ks, verdicts); ok {
		advice := fmt.Sprintf("time-sliced GPUs on %s have replicas free but their VRAM is held by co-tenants (time-slicing does not partition VRAM): move the pod to MIG or MPS, which do, or move a co-tenant", node)
		if hog := e.largestCoTenant(node); hog != nil {
			mf.CoTenant = hog
			advice += fmt.Sprintf(": %s holds %s of its GPU's %s and uses %s of its time (its own figures, measured by gpupack agent)", hog.Pod, hog.VRAMUsedP95, hog.GPUMemory, pct(hog.ActiveRatio))
		}
		f.addAdvice(advice, adviceSharing)
	}
	if n.estimate != nil {
		var parts []string
		for _, dt := range []vram.DType{"fp8", "int4"} {
			if dt.Bytes() < n.estimate.Spec.DType.Bytes() {
				spec := n.estimate.Spec
				spec.DType = dt
				parts = append(parts, fmt.Sprintf("%s needs %s", strings.ToUpper(string(dt)), vram.EstimateMemory(spec).Total))
			}
		}
		if len(parts) > 0 {
			f.addAdvice("quantise: "+strings.Join(parts, ", "), "quantising changes the model the workload serves, not a Kubernetes object")
		}
	}
	e.hardwareAdvice(f, p, n, mf, total, migTooSmall)
}

// memoryFacts are the GPU memory the pod needs and what the nodes idx
// offer: the largest free and largest usable GPU (an MPS client's share of
// one), the nodes that have it, and the GPUs of the catalogue that would
// hold the need; total is the need over all the pod's devices.
func (e *engine) memoryFacts(p *cluster.Pod, n need, idx []int) (mf *MemoryFacts, total gpu.MiB) {
	mf = &MemoryFacts{Need: n.perDevice, Source: n.Source, Estimate: n.estimate}
	largestOn := make([]gpu.MiB, len(idx)) // each node's largest usable GPU
	for x, i := range idx {
		node, st := e.s.Nodes[i], e.states[i]
		for gi, g := range node.GPUs {
			if len(p.GPUModels) > 0 && !slices.Contains(p.GPUModels, g.Model.Name) {
				continue
			}
			free, capacity := st.GPUs[gi].FreeMemory, g.Memory
			if g.Sharing == cluster.MPS && g.Replicas > 0 {
				capacity = g.Memory / gpu.MiB(g.Replicas)
				free = min(free, capacity)
			}
			mf.LargestFree, mf.LargestGPU = max(mf.LargestFree, free), max(mf.LargestGPU, capacity)
			largestOn[x] = max(largestOn[x], capacity)
		}
	}
	var largest []int
	for x, i := range idx {
		if largestOn[x] == mf.LargestGPU && mf.LargestGPU > 0 {
			largest = append(largest, i)
		}
	}
	mf.LargestGPUNodes, mf.LargestGPUNodeCount = e.names(largest)
	devices := gpu.MiB(max(p.GPU.Count, 1))
	total = n.stated * devices
	if n.stated == 0 || n.Source == "request" {
		total = n.perDevice * devices
	}
	need := vram.Need(total)
	if n.estimate != nil && n.Source == "estimate" {
		// A model's estimate splits across a tensor-parallel group by its
		// weights and KV heads, not evenly.
		need = *n.estimate
	}
	mf.Options = vram.Options(e.s.Catalogue, need)
	return mf, total
}

// hardwareAdvice advises the GPUs that would hold the pod: one GPU of a
// model with enough memory (those the cluster has first), and, when no
// GPU of the nodes holds the total, tensor parallelism across the fewest
// GPUs.
func (e *engine) hardwareAdvice(f *Finding, p *cluster.Pod, n need, mf *MemoryFacts, total gpu.MiB, migTooSmall bool) {
	var single, multi []string
	present := map[string]bool{}
	for _, m := range e.s.ModelNames() {
		present[m] = true
	}
	var parallel []vram.Option
	for _, o := range mf.Options {
		if o.GPUs == 1 && !migTooSmall {
			if present[o.Model] {
				single = append([]string{inCluster(o.Model, present)}, single...)
			} else {
				single = append(single, o.Model)
			}
		} else if o.GPUs > 1 {
			parallel = append(parallel, o)
		}
	}
	// GPUs the cluster has first, then the fewest GPUs.
	sort.SliceStable(parallel, func(i, j int) bool {
		if present[parallel[i].Model] != present[parallel[j].Model] {
			return present[parallel[i].Model]
		}
		return parallel[i].GPUs < parallel[j].GPUs
	})
	for _, o := range parallel[:min(len(parallel), 3)] {
		multi = append(multi, fmt.Sprintf("%d x %s", o.GPUs, inCluster(o.Model, present)))
	}
	if len(single) > 0 && p.GPU.Kind != cluster.MIGSlice {
		f.addAdvice(fmt.Sprintf("a GPU with at least %s: %s", n.perDevice, strings.Join(single[:min(len(single), 4)], ", ")), adviceHardware)
	}
	if total > mf.LargestGPU && len(multi) > 0 {
		f.addAdvice(fmt.Sprintf("tensor parallelism across GPUs (%s needed in all): %s", total, strings.Join(multi, ", ")),
			"splitting the model across GPUs is a change to the workload's serving configuration")
	}
}

// vramHeldBySharers names a time-sliced node among the classes whose
// GPUs have room in total but not free: co-tenants hold the VRAM.
func (e *engine) vramHeldBySharers(ks []int, verdicts []classVerdict) (string, bool) {
	for _, k := range ks {
		st := e.rep(k)
		for _, r := range verdicts[k].now {
			if r.Code == placement.InsufficientVRAM && !r.Unresolvable && len(st.Node.GPUs) > 0 && st.Node.GPUs[0].Sharing == cluster.TimeSliced {
				return st.Node.Name, true
			}
		}
	}
	return "", false
}

// largestCoTenant is the pod on node holding the most VRAM of a shared
// GPU by its own figures (usage.PodFacts.PerProcess, from gpupack agent);
// nil when no pod there was measured per process: DCGM's figures are the
// whole GPU's and name no pod.
func (e *engine) largestCoTenant(node string) *CoTenant {
	n, ok := e.s.Node(node)
	if !ok || len(n.GPUs) == 0 {
		return nil
	}
	var hog *CoTenant
	for _, q := range e.s.Pods {
		facts, measured := e.usage.Pods[q.Key()]
		if q.NodeName != node || !measured || !facts.PerProcess || !facts.VRAMMeasured {
			continue
		}
		if hog == nil || facts.VRAMUsedP95 > hog.VRAMUsedP95 {
			g := n.GPUs[0]
			if len(q.Devices) > 0 && q.Devices[0].GPU < len(n.GPUs) {
				g = n.GPUs[q.Devices[0].GPU]
			}
			hog = &CoTenant{Pod: q.Key(), VRAMUsedP95: facts.VRAMUsedP95, ActiveRatio: facts.ActiveRatio, GPUMemory: g.Memory}
		}
	}
	return hog
}

// placement reports the rules that keep the pod off the nodes ks. held says
// that those nodes are full too: the rules point the pod away from the only
// hardware that could run it, which must also be freed.
func (e *engine) placement(f *Finding, p *cluster.Pod, ks []int, verdicts []classVerdict, held bool) {
	f.Cause = Placement
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	if held {
		f.Evidence.GPUs, f.Evidence.GPUModels = usableGPUs(relaxPod(p), e.nodeList(idx))
	} else {
		f.Evidence.GPUs, f.Evidence.GPUModels = e.roomyGPUs(p, idx)
	}
	type ruleNodes struct {
		rule  Rule
		nodes []int
	}
	byRule := map[string]*ruleNodes{}
	var order []string
	nearest := -1
	for _, k := range ks {
		for _, r := range verdicts[k].rules {
			text := ruleText(r)
			rn, ok := byRule[text]
			if !ok {
				rn = &ruleNodes{rule: Rule{Code: r.Code, Rule: text, Message: r.Message()}}
				byRule[text] = rn
				order = append(order, text)
			}
			rn.nodes = append(rn.nodes, e.classes[k].nodes...)
		}
		if nearest < 0 || nearer(verdicts[k].rules, verdicts[nearest].rules, e.classes[k].nodes[0], e.classes[nearest].nodes[0]) {
			nearest = k
		}
	}
	for _, text := range order {
		rn := byRule[text]
		slices.Sort(rn.nodes)
		rn.rule.Excludes, rn.rule.ExcludesCount = e.names(rn.nodes)
		f.Evidence.Rules = append(f.Evidence.Rules, rn.rule)
	}
	node := e.s.Nodes[e.classes[nearest].nodes[0]]
	var changes []string
	for _, r := range verdicts[nearest].rules {
		changes = append(changes, ruleFix(r, node))
	}
	remedies := ruleRemedies(e.s.Catalogue, p, node, e.rep(nearest), verdicts[nearest].rules, held)
	if held {
		f.Evidence.RulesExcludeHeld = true
		f.addFix(fmt.Sprintf("nearest change: %s; then it could run on %s (%d node(s) like it), which is fully allocated too: free GPUs there as well",
			strings.Join(changes, " and "), node.Name, len(e.classes[nearest].nodes)), remedies...)
		return
	}
	f.addFix(fmt.Sprintf("nearest change: %s; then it fits %s now (%d node(s) like it have free GPUs)",
		strings.Join(changes, " and "), node.Name, len(e.classes[nearest].nodes)), remedies...)
	e.spreadDomains(f, p, verdicts[nearest].rules)
}

// roomyGPUs counts the GPUs of the nodes idx that could each take one
// device of the pod with its rules relaxed now, their idle GPUs set up for
// its request as the placement verdict reads them (reconfigure), with
// their models: the GPUs that have room, not every GPU of those nodes.
func (e *engine) roomyGPUs(p *cluster.Pod, idx []int) (int, []string) {
	relaxed, err := placement.NewDemand(relaxPod(p), e.s.Catalogue)
	if err != nil {
		return usableGPUs(relaxPod(p), e.nodeList(idx))
	}
	count := 0
	models := map[string]bool{}
	var buf [16]int
	for _, i := range idx {
		st := reconfigure(e.states[i], p.GPU, false)
		seen := map[int]bool{}
		for _, g := range placement.Hosts(relaxed, st, buf[:0]) {
			if !seen[g] {
				seen[g] = true
				count++
				models[st.Node.GPUs[g].Model.Name] = true
			}
		}
	}
	return count, slices.Sorted(maps.Keys(models))
}

// nearer reports whether rules a (of a class whose first node is i) are a
// smaller change than rules b (first node j): fewer rules, then a smaller
// spread skew to allow, then the earlier node.
func nearer(a, b []placement.Reason, i, j int) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	if sa, sb := skewOf(a), skewOf(b); sa != sb {
		return sa < sb
	}
	return i < j
}

func skewOf(rs []placement.Reason) int64 {
	var total int64
	for _, r := range rs {
		if r.Code == placement.SpreadSkew {
			total += r.Requested
		}
	}
	return total
}

// spreadDomains adds, for a spread constraint that keeps the pod off the
// nearest node, what lets every pending pod like it run (spreadAll) and
// the fix that needs no change to the rule: room in the domain with the
// fewest matching pods, where the next pod may go and lift the minimum.
func (e *engine) spreadDomains(f *Finding, p *cluster.Pod, rules []placement.Reason) {
	for _, r := range rules {
		if r.Code != placement.SpreadSkew {
			continue
		}
		counts, least, domain, ok := e.demand.SpreadDomains(r.Term)
		if !ok {
			return
		}
		c := p.SpreadConstraints[r.Term]
		e.spreadAll(f, p, r, counts)
		if domain == "" {
			f.addAdvice(fmt.Sprintf("or add GPU nodes with a %s label of a new value: fewer domains than minDomains %d have eligible nodes, so the fewest matching pods count as 0 and no domain may hold more than %d",
				c.TopologyKey, c.MinDomainsOrOne(), c.MaxSkew), adviceHardware)
			continue
		}
		f.addAdvice(fmt.Sprintf("or make room in %s=%s, the domain with the fewest matching pods (%d): add GPU nodes there or free GPUs on its nodes; each pod placed there raises the minimum, so that every other domain may take one more",
			c.TopologyKey, domain, least), adviceHardware)
	}
}

// spreadAll works out the maxSkew that lets every pending pod like p (the
// same finding but for the name) run, placing them one by one where the
// spread is evenest, as the scheduler's scoring prefers: each goes to the
// domain of fewest matching pods that still has room for it, and the
// largest skew one of them makes is the maxSkew needed. Room is counted
// on the nodes of the domains with the spread constraint left out and the
// pod's other rules kept. It adds the fix, with its patch, when more than
// one pod waits.
func (e *engine) spreadAll(f *Finding, p *cluster.Pod, r placement.Reason, counts map[string]int) {
	like := e.like[e.fingerprint(p)]
	if like < 2 {
		return
	}
	c := p.SpreadConstraints[r.Term]
	d := e.demand.WithoutSpread(r.Term)
	room := map[string]int{}
	for _, st := range e.states {
		v, ok := st.Node.Labels[c.TopologyKey]
		if _, counted := counts[v]; !ok || !counted {
			continue
		}
		room[v] += fitsTimes(d, st, like-room[v])
	}
	self := 0
	if c.Selector(p.Labels).Matches(p.Labels) {
		self = 1
	}
	need, placed := 0, 0
	for ; placed < like; placed++ {
		least, target := math.MaxInt, ""
		for v, n := range counts {
			least = min(least, n)
			if room[v] > 0 && (target == "" || n < counts[target] || (n == counts[target] && v < target)) {
				target = v
			}
		}
		if len(counts) < c.MinDomainsOrOne() {
			least = 0
		}
		if target == "" {
			break
		}
		need = max(need, counts[target]+self-least)
		counts[target] += self
		room[target]--
	}
	if placed < like {
		f.addAdvice(fmt.Sprintf("%d pending pods like it wait; only %d of them find room on the nodes of the %s domains whatever maxSkew says: the rest need GPUs freed or added there", like, placed, c.TopologyKey), adviceHardware)
		return
	}
	path := fmt.Sprintf("/spec/topologySpreadConstraints/%d/maxSkew", r.Term)
	f.addFix(fmt.Sprintf("%d pending pods like it wait and they fit in total: to run them all, raise maxSkew of topologySpreadConstraints[%d] (%s) from %d to %d (placed one by one where the spread is evenest), or make it whenUnsatisfiable: ScheduleAnyway",
		like, r.Term, c.TopologyKey, c.MaxSkew, need),
		Remedy{Kind: PodSpec, Targets: []Object{podObject(p)}, Note: "apply this to the pod template of the workload that made these pods (the same path under /spec/template): a pod's topologySpreadConstraints cannot change once it exists",
			Patch: patchOf(JSONPatch, []patchOp{{Op: "test", Path: path, Value: c.MaxSkew}, {Op: "replace", Path: path, Value: need}})})
}

// fitsTimes is how many of the demand, up to most, fit one after the
// other on a copy of the node's state.
func fitsTimes(d *placement.Demand, st *placement.NodeState, most int) int {
	s := st.Clone()
	n := 0
	for ; n < most; n++ {
		a, rs := placement.Fit(d, s)
		if len(rs) > 0 {
			break
		}
		s.Assign(d, a)
	}
	return n
}

// ruleText names the rule behind a reason, the same for every node it
// excludes.
func ruleText(r placement.Reason) string {
	switch r.Code {
	case placement.NodeSelectorMismatch:
		return r.Mismatch.Selector()
	case placement.NodeAffinityMismatch:
		return r.Detail
	case placement.TaintNotTolerated:
		return r.Message()
	case placement.GPUModelMismatch:
		return "gpuModels " + r.Mismatch.Models()
	case placement.NodeUnschedulable:
		return "node is cordoned (unschedulable)"
	case placement.SpreadSkew:
		return fmt.Sprintf("topologySpreadConstraints[%d] on %s, maxSkew %d", r.Term, r.Resource, r.Capacity)
	case placement.SpreadMissingLabel:
		return fmt.Sprintf("topologySpreadConstraints[%d] needs the node label %s", r.Term, r.Resource)
	case placement.PodAffinityMismatch:
		return "required podAffinity"
	case placement.PodAntiAffinityMismatch:
		return fmt.Sprintf("required podAntiAffinity[%d]", r.Term)
	case placement.ExistingAntiAffinity:
		return "podAntiAffinity of pods running there"
	}
	return r.Message() + ": " + r.Detail
}

// ruleFix words the change to one rule that lets the pod onto the node.
func ruleFix(r placement.Reason, n *cluster.Node) string {
	switch r.Code {
	case placement.NodeSelectorMismatch:
		return fmt.Sprintf("change %s to match %s (it has %s)", r.Mismatch.Selector(), n.Name, r.Mismatch.NodeLabel())
	case placement.NodeAffinityMismatch:
		return fmt.Sprintf("widen the %s to admit %s", r.Detail, n.Name)
	case placement.TaintNotTolerated:
		return fmt.Sprintf("tolerate taint {%s} of %s", r.Detail, n.Name)
	case placement.GPUModelMismatch:
		return fmt.Sprintf("allow %s's GPU model %s in gpuModels", n.Name, n.GPUModel().Name)
	case placement.NodeUnschedulable:
		return "uncordon " + n.Name
	case placement.SharingModeMismatch:
		return fmt.Sprintf("reconfigure %s's idle GPUs to serve the request (%s)", n.Name, r.Detail)
	case placement.SpreadSkew:
		return fmt.Sprintf("raise maxSkew of topologySpreadConstraints[%d] (%s) from %d to %d, or make it whenUnsatisfiable: ScheduleAnyway", r.Term, r.Resource, r.Capacity, r.Requested)
	case placement.SpreadMissingLabel:
		return fmt.Sprintf("label %s with %s, or drop topologySpreadConstraints[%d]", n.Name, r.Resource, r.Term)
	case placement.PodAffinityMismatch:
		return fmt.Sprintf("run a pod that its required podAffinity selects in %s's domain, or relax that podAffinity", n.Name)
	case placement.PodAntiAffinityMismatch:
		return fmt.Sprintf("move the pods that its podAntiAffinity[%d] selects out of %s's domain, or relax that term (%s)", r.Term, n.Name, r.Detail)
	case placement.ExistingAntiAffinity:
		return fmt.Sprintf("move the pods whose podAntiAffinity selects it out of %s's domain, or relax their term (%s)", n.Name, r.Detail)
	}
	return r.String()
}

// usageOf adds what usage facts say of a pod that fits now: evidence, and
// what to do once it runs. They do not change the cause: the pod fits now,
// so its wait is outside GPU placement whatever its workload does.
func (e *engine) usageOf(f *Finding, facts PodFacts) {
	u := &UsageSummary{Pattern: facts.Pattern, ActiveRatio: facts.ActiveRatio, Window: windowString(e.usage.Window), Suggests: suggestion(facts.Pattern)}
	f.Evidence.Usage = u
	f.addAdvice(fmt.Sprintf("once it runs, more GPUs would not help: its workload's GPUs are %s (%s active over %s); %s",
		facts.Pattern, pct(facts.ActiveRatio), u.Window, u.Suggests), "the change is to the workload itself, once it runs")
}

func suggestion(p Pattern) string {
	switch p {
	case usage.Bursty:
		return "alternating 0% and short bursts suggests the CPU (a CPU limit, tokenisation, data loading) starves the GPU: raise the CPU limit or add loader workers"
	case usage.FlatLow:
		return "constantly low under load suggests storage or network I/O, or batches too small: cache inputs locally, batch more requests"
	case usage.IdleHeld:
		return "the GPU is held without work: release it when idle (scale to zero, end idle notebooks)"
	}
	return ""
}

func (e *engine) fitsNow(f *Finding, ks []int) {
	f.Cause = Other
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	f.addAdvice(fmt.Sprintf("it fits %s now: the wait is outside GPU placement; check ResourceQuota, priority and the scheduler queue, and gang admission (e.g. kueue)",
		JoinNames(f.Evidence.Nodes, f.Evidence.NodeCount)), adviceOutside)
}

// beyond decides between no such hardware (nothing fits even an empty,
// reconfigured node with the pod's rules relaxed), memory (when what never
// fits is GPU memory) and other (CPU, memory, pods per node).
func (e *engine) beyond(f *Finding, p *cluster.Pod, full, relaxed *placement.Demand, n need, verdicts []classVerdict) {
	var possible bool
	var never [][]placement.Reason
	vram := false
	for k := range e.classes {
		_, rs := placement.Fit(relaxed, reconfigure(e.classes[k].empty, p.GPU, true))
		if len(rs) == 0 {
			possible = true
			break
		}
		never = append(never, rs)
		for _, r := range rs {
			vram = vram || r.Code == placement.InsufficientVRAM
		}
	}
	all := make([]int, len(e.classes))
	for k := range all {
		all[k] = k
	}
	switch {
	case possible:
		f.Cause = Other
		var rs [][]placement.Reason
		for _, v := range verdicts {
			rs = append(rs, v.now)
		}
		f.Evidence.Blocking = e.distinct(rs, false)
		fix := "no GPU is the limit: free or add the CPU or memory named above on GPU nodes, or lower the pod's request"
		if slices.ContainsFunc(f.Evidence.Blocking, func(b Blocking) bool { return b.Code == placement.TooManyPods }) {
			fix = "no GPU is the limit: free or add the CPU, memory or pod capacity named above on GPU nodes (a node's pod limit is the kubelet's maxPods), or lower the pod's request"
		}
		f.addAdvice(fix, "which node to grow, or how far to lower the request, is a choice the evidence does not make")
	case vram:
		e.memory(f, p, n, all, verdicts, false)
	default:
		f.Cause = NoSuchHardware
		f.Evidence.Blocking = e.distinct(never, true)
		for i := range f.Evidence.Blocking {
			f.Evidence.Blocking[i].EvenEmpty = true
		}
		idx := e.nodesOf(all)
		f.Evidence.NodeCount = len(idx)
		f.addAdvice(fmt.Sprintf("no node of this cluster could run it even empty and reconfigured (%s): change the request, or add hardware that has it", strings.Join(e.limits(f.Evidence.Blocking, len(idx)), "; ")),
			adviceHardware)
	}
}

// distinct lists the reasons of the classes, GPU and node limits only (not
// the pod's rules), optionally only the unresolvable ones, each with the
// nodes it stops the pod on: reasons with the same figures are one, so no
// node's shortage is told of another.
func (e *engine) distinct(perClass [][]placement.Reason, unresolvable bool) []Blocking {
	index := map[string]int{}
	var out []Blocking
	var nodes [][]int
	for k, rs := range perClass {
		for _, r := range rs {
			if len(ruleReasons([]placement.Reason{r})) > 0 || (unresolvable && !r.Unresolvable) {
				continue
			}
			i, ok := index[r.String()]
			if !ok {
				i = len(out)
				index[r.String()] = i
				out = append(out, Blocking{Reason: r})
				nodes = append(nodes, nil)
			}
			nodes[i] = append(nodes[i], e.classes[k].nodes...)
		}
	}
	for i := range out {
		slices.Sort(nodes[i])
		out[i].Nodes, out[i].NodeCount = e.names(nodes[i])
	}
	return out
}

// limits words, per resource, how far the largest node falls short, naming
// the nodes the figures are of, and whether the resource stops the pod on
// every node or only on those named.
func (e *engine) limits(bs []Blocking, nodes int) []string {
	var order []string
	by := map[string][]Blocking{}
	for _, b := range bs {
		if _, ok := by[b.Resource]; !ok {
			order = append(order, b.Resource)
		}
		by[b.Resource] = append(by[b.Resource], b)
	}
	var out []string
	for _, res := range order {
		group := by[res]
		most, count := group[0], 0
		var names []string
		for _, b := range group {
			count += b.NodeCount
			names = append(names, b.Nodes...)
			if b.Capacity > most.Capacity {
				most = b
			}
		}
		if count == nodes {
			out = append(out, fmt.Sprintf("%s: it asks for %d %s, no node has more than %d (%s)", res, most.Requested, most.Unit, most.Capacity, JoinNames(most.Nodes, most.NodeCount)))
			continue
		}
		out = append(out, fmt.Sprintf("%s: it asks for %d %s, more than %s have (at most %d)", res, most.Requested, most.Unit, JoinNames(names[:min(len(names), MaxListed)], count), most.Capacity))
	}
	return out
}

// String is the nodes the reason holds on, and the reason with its
// figures; of a node emptied, only what it asks and what the node has,
// since what is free on an emptied node is not what is free now.
func (b Blocking) String() string {
	nodes := JoinNames(b.Nodes, b.NodeCount)
	if !b.EvenEmpty || b.Unit == "" {
		return nodes + ": " + b.Reason.String()
	}
	s := fmt.Sprintf("%s, even emptied and reconfigured: %s (requested %d, capacity %d %s)", nodes, b.Message(), b.Requested, b.Capacity, b.Unit)
	if b.Detail != "" {
		s += ": " + b.Detail
	}
	return s
}

func inCluster(model string, present map[string]bool) string {
	if present[model] {
		return model + " (in this cluster)"
	}
	return model
}

// windowString prints a window as "1h" or "30m" rather than "1h0m0s".
func windowString(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
