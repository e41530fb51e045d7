package diagnose

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/placement"
)

// ClaimFacts is one request of a pending pod's ResourceClaims that no node
// serves, with what the cluster offers it; the figures are summed over the
// nodes, and MostAccepted is the most that one node accepts (a claim's
// devices come from one node).
type ClaimFacts struct {
	Claim     string   `json:"claim"`
	Request   string   `json:"request"`
	Class     string   `json:"class"`
	Selectors []string `json:"selectors,omitempty"`
	Needed    int      `json:"needed"`
	All       bool     `json:"all,omitempty"`
	Offered   int      `json:"offered"`
	Accepted  int      `json:"accepted"`
	Free      int      `json:"free"`
	// MostAccepted is the most devices that one node accepts, on
	// MostAcceptedNode.
	MostAccepted     int    `json:"mostAccepted"`
	MostAcceptedNode string `json:"mostAcceptedNode,omitempty"`
	// Products are the product names of the class's devices, with how
	// many of each there are and are free, most first.
	Products []ProductCount `json:"products,omitempty"`
	// Holders are the pods holding accepted devices on the nodes where
	// freeing them would let the claim be allocated (allocation).
	Holders []string `json:"holders,omitempty"`
	// SelectorErrors is on how many devices of the class a selector failed
	// to evaluate (devices the allocator skips while they are in use);
	// SelectorError is the first such error, by device.
	SelectorErrors int    `json:"selectorErrors,omitempty"`
	SelectorError  string `json:"selectorError,omitempty"`
	// Counter is the shared counter of a partitionable GPU that keeps the
	// accepted devices no claim holds from being made, on CounterNode
	// (the first node where one does).
	Counter     *placement.CounterShortfall `json:"counter,omitempty"`
	CounterNode string                      `json:"counterNode,omitempty"`
	// Tainted is how many devices it accepts and no pod holds a taint
	// keeps from it (not counted in Free); Taints names them, on the
	// nodes of the finding's evidence.
	Tainted int             `json:"tainted,omitempty"`
	Taints  []TaintedDevice `json:"taints,omitempty"`
	// Capacity is, when devices' consumable capacity refuses the request,
	// the roomiest such device with what it has and who holds it.
	Capacity []CapacityFacts `json:"capacity,omitempty"`
	// SelectorsOnCapacity are, for a request whose selectors read the
	// devices' capacity (device.capacity: memory), how many devices the
	// class and its other selectors accept and those refuse (Rejected),
	// and how many devices of the class they accept (Accepted), over the
	// cluster; nil for other requests.
	SelectorsOnCapacity *SelectorCapacityFacts `json:"selectorsOnCapacity,omitempty"`
}

// SelectorCapacityFacts is what a request's selectors on device capacity
// refuse and accept (ClaimFacts.SelectorsOnCapacity).
type SelectorCapacityFacts struct {
	Rejected int `json:"rejected"`
	Accepted int `json:"accepted"`
}

// ProductCount is how many devices of a product a class offers.
type ProductCount struct {
	Product string `json:"product"`
	Devices int    `json:"devices"`
	Free    int    `json:"free"`
}

// ClaimMissing: a ResourceClaim that the pod names, or the template of
// one, does not exist; the kube-scheduler does not try the pod until it
// does (its DynamicResources PreEnqueue check).
const ClaimMissing Cause = "claim-missing"

// diagnoseClaims diagnoses a pending pod whose ResourceClaims placement
// judges (placement.JudgesClaims), in the order of the causes: a claim
// that does not exist; a selector that fails to evaluate; fits now
// (other); allocation (devices the class and selectors accept exist, held
// by bound pods); placement (device taints that a request does not
// tolerate keep enough free devices from it, or the pod's rules keep it off
// nodes where its claims would be allocated); memory or no such hardware
// (selectors on the devices' capacity refuse the devices that the others
// accept); placement (no node has enough devices that the class and
// selectors accept); other.
func (e *engine) diagnoseClaims(f *Finding, p *cluster.Pod, d *placement.Demand) error {
	j, kinds, err := e.judgeClaimClasses(p, d)
	if err != nil {
		return err
	}
	verdicts, selectorError := j.verdicts, kinds.selectorError
	e.summarize(f, p, j.stock, j.stockOK, verdicts)
	missing := missingClaims(p)
	switch {
	case len(missing) > 0:
		f.Summary, f.StockNote = "", "the kube-scheduler does not try a pod whose ResourceClaim does not exist (DynamicResources' PreEnqueue check), so there is no FailedScheduling message"
	case selectorError != "":
		f.StockNote = "a selector fails to evaluate, so the kube-scheduler's DynamicResources filter aborts the pod's scheduling with that error instead of a \"0/N nodes are available\" message"
	}
	switch {
	case len(missing) > 0:
		f.Cause = ClaimMissing
		for _, m := range missing {
			f.addAdvice(fmt.Sprintf("create %s, or point the pod's spec.resourceClaims at one that exists (a pod's resourceClaims cannot change: recreate the pod, or fix its workload's pod template)", m),
				"the claim's devices are the workload's to choose; the snapshot has no manifest of the missing object")
		}
	case selectorError != "":
		f.Cause = Placement
		f.addAdvice("fix the selector that fails to evaluate: "+selectorError+" (guard the attribute with has() or compare values of its type); a claim's or template's spec cannot change, so recreate it",
			"the selector's intent is the workload's; the error names the selector and the device")
	case len(kinds.fitsNow) > 0:
		e.fitsNow(f, kinds.fitsNow)
	case len(kinds.alloc) > 0 && byCapacity(kinds.alloc, verdicts):
		e.claimCapacity(f, p, kinds.alloc, verdicts, Allocation)
		if len(kinds.place) > 0 {
			f.Also = []Cause{Placement}
		}
	case len(kinds.alloc) > 0:
		e.claimAllocation(f, p, kinds.alloc, verdicts)
		if len(kinds.place)+len(kinds.taint) > 0 {
			f.Also = []Cause{Placement}
		}
	case len(kinds.taint) > 0:
		e.claimTaint(f, p, kinds.taint, verdicts)
	case len(kinds.constraint) > 0:
		e.claimConstraint(f, p, kinds.constraint, verdicts)
	case len(kinds.place) > 0:
		e.placement(f, p, kinds.place, verdicts, false)
	case len(kinds.claim) > 0 && byCapacity(kinds.claim, verdicts):
		e.claimCapacity(f, p, kinds.claim, verdicts, Placement)
	case len(kinds.claim) > 0 && e.claimSelectorMemory(f, p, kinds.claim, verdicts):
	case len(kinds.claim) > 0:
		e.claimPlacement(f, p, kinds.claim, verdicts)
	default:
		f.Cause = Other
		var rs [][]placement.Reason
		for _, v := range verdicts {
			rs = append(rs, v.now)
		}
		f.Evidence.Blocking = e.distinct(rs, false)
		f.addAdvice("no device is the limit on the nodes where the claims could be allocated: free or add the CPU, memory or pod capacity named above, or lower the pod's request",
			"which node to grow, or how far to lower the request, is a choice the evidence does not make")
	}
	return nil
}

// claimKinds are the classes of nodes (indices into engine.classes) by
// what a pod with claims finds on them: it fits now; devices the claims
// accept are held (alloc); only rules stop it, and with them relaxed it
// fits (place); too few devices are accepted, out of counters or of
// capacity (claim); device taints keep them (taint); a claim's constraint
// cannot be met (constraint). selectorError is the first selector error
// met.
type claimKinds struct {
	fitsNow, alloc, place, claim, taint, constraint []int
	selectorError                                   string
}

// judgeClaimClasses fits the pod with claims on each class of nodes, and
// with its rules relaxed or on the class's empty node where that tells
// the kind; it gives each class's verdict and stock status, and the
// classes by kind.
func (e *engine) judgeClaimClasses(p *cluster.Pod, d *placement.Demand) (classJudgement, claimKinds, error) {
	// The pod without its rules, made when a node's rules stop it: most
	// DRA nodes have none, and each demand holds the claims' accepted
	// devices.
	var relaxed *placement.Demand
	j := e.newClassJudgement()
	var ks claimKinds
	for k := range e.classes {
		v := &j.verdicts[k]
		cur := e.rep(k)
		_, v.now = placement.Fit(d, cur)
		v.sched = v.now
		j.setStock(d, k, len(e.classes[k].nodes), cur, v.now)
		if len(v.now) == 0 {
			ks.fitsNow = append(ks.fitsNow, k)
			continue
		}
		r := claimOf(v.now)
		if r != nil && r.Code == placement.ClaimSelectorError && ks.selectorError == "" {
			ks.selectorError = r.Detail
		}
		if v.rules = ruleReasons(v.now); len(v.rules) > 0 {
			if relaxed == nil {
				var err error
				if relaxed, err = placement.NewDemand(relaxPod(p), e.s.Catalogue); err != nil {
					return j, ks, err
				}
			}
			if _, rs := placement.Fit(relaxed, cur); len(rs) == 0 {
				v.place = true
				ks.place = append(ks.place, k)
			}
			continue
		}
		if r != nil && r.Code == placement.ClaimTaintNotTolerated && len(v.now) == 1 {
			// Held devices that no taint keeps would serve it too:
			// allocation comes first.
			ks.taint = append(ks.taint, k)
			if len(r.Claim.Held) > 0 {
				if _, rs := placement.Fit(d, e.classes[k].empty); len(rs) == 0 {
					v.alloc = true
					ks.alloc = append(ks.alloc, k)
				}
			}
			continue
		}
		if r != nil && r.Code == placement.ClaimConstraintUnsatisfied && len(v.now) == 1 {
			ks.constraint = append(ks.constraint, k)
			continue
		}
		if r == nil || (r.Code != placement.ClaimUnallocatable && r.Code != placement.ClaimCounterExhausted && r.Code != placement.ClaimCapacityInsufficient) || len(v.now) > 1 {
			continue // CPU, memory or pods short too
		}
		ks.claim = append(ks.claim, k)
		if !r.Unresolvable {
			if _, rs := placement.Fit(d, e.classes[k].empty); len(rs) == 0 {
				v.alloc = true
				ks.alloc = append(ks.alloc, k)
			}
		}
	}
	return j, ks, nil
}

// claimOf is the claims' reason among a node's reasons, nil when none.
func claimOf(rs []placement.Reason) *placement.Reason {
	for i := range rs {
		switch rs[i].Code {
		case placement.ClaimUnallocatable, placement.ClaimCounterExhausted, placement.ClaimCapacityInsufficient, placement.ClaimSelectorError, placement.ClaimNotFound, placement.ClaimTaintNotTolerated, placement.ClaimConstraintUnsatisfied:
			return &rs[i]
		}
	}
	return nil
}

// missingClaims names the pod's claims that do not exist, as objects.
func missingClaims(p *cluster.Pod) []string {
	var out []string
	for _, c := range p.Claims {
		switch {
		case !c.Missing:
		case c.Name != "" && c.Template == "":
			out = append(out, fmt.Sprintf("ResourceClaim %s/%s (the pod's claim %s)", p.Namespace, c.Name, c.PodClaim))
		default:
			out = append(out, fmt.Sprintf("ResourceClaimTemplate %s/%s (the pod's claim %s)", p.Namespace, c.Template, c.PodClaim))
		}
	}
	return out
}

// claimFacts gathers, per failing request (and alternative), what the
// nodes of the classes ks offer it.
func (e *engine) claimFacts(p *cluster.Pod, ks []int, verdicts []classVerdict) []ClaimFacts {
	index := map[string]int{}
	var out []ClaimFacts
	for _, k := range ks {
		r := claimOf(verdicts[k].now)
		if r == nil || r.Claim == nil {
			continue
		}
		shorts := r.Claim.Alternatives
		if len(shorts) == 0 {
			shorts = []placement.ClaimShortfall{*r.Claim}
		}
		for _, sf := range shorts {
			key := sf.Claim + "\x00" + sf.Request
			i, ok := index[key]
			if !ok {
				i = len(out)
				index[key] = i
				req := requestOf(p, sf.Claim, sf.Request)
				cf := ClaimFacts{Claim: sf.Claim, Request: sf.Request, Class: sf.Class, Needed: sf.Needed, All: sf.All,
					Selectors: req.Selectors, Products: e.products(sf.Class), SelectorErrors: len(req.SelectorErrors)}
				if len(req.CapacityRejects)+len(req.CapacityAccepts) > 0 {
					cf.SelectorsOnCapacity = &SelectorCapacityFacts{Rejected: len(req.CapacityRejects), Accepted: len(req.CapacityAccepts)}
				}
				if len(req.SelectorErrors) > 0 {
					cf.SelectorError = req.SelectorErrors[slices.Min(slices.Collect(maps.Keys(req.SelectorErrors)))]
				}
				out = append(out, cf)
			}
			cf := &out[i]
			nodes := len(e.classes[k].nodes)
			cf.Offered += nodes * sf.Offered
			cf.Accepted += nodes * sf.Accepted
			cf.Free += nodes * sf.Free
			cf.Tainted += nodes * len(sf.Untolerated)
			for _, u := range sf.Untolerated {
				if len(cf.Taints) < MaxListed {
					cf.Taints = append(cf.Taints, taintedDevice(e.s.Nodes[e.classes[k].nodes[0]].Name, u))
				}
			}
			if node := e.s.Nodes[e.classes[k].nodes[0]].Name; sf.Accepted > cf.MostAccepted || cf.MostAcceptedNode == "" {
				cf.MostAccepted, cf.MostAcceptedNode = sf.Accepted, node
			}
			if sf.Counter != nil && cf.Counter == nil {
				cf.Counter, cf.CounterNode = sf.Counter, e.s.Nodes[e.classes[k].nodes[0]].Name
			}
		}
	}
	return out
}

// requestOf finds the claim's request (or "request/alternative").
func requestOf(p *cluster.Pod, claim, request string) cluster.ClaimRequest {
	name, alt, _ := strings.Cut(request, "/")
	for _, c := range p.Claims {
		if c.Ref() != claim {
			continue
		}
		for _, r := range c.Requests {
			if r.Name != name {
				continue
			}
			for _, a := range r.FirstAvailable {
				if a.Name == alt {
					return a
				}
			}
			return r
		}
	}
	return cluster.ClaimRequest{}
}

// products counts the devices of the class by product name, over the
// cluster, with how many are free.
func (e *engine) products(class string) []ProductCount {
	counts := map[string]*ProductCount{}
	for i, n := range e.s.Nodes {
		st := e.states[i]
		for j, g := range n.GPUs {
			if g.DRA == nil {
				continue
			}
			product := cmp.Or(g.DRA.Product, g.Model.Name)
			pc := counts[product]
			if pc == nil {
				pc = &ProductCount{Product: product}
			}
			if n := partitionsOf(&g, class); n > 0 {
				counts[product] = pc
				pc.Devices += n
				pc.Free += makeableOf(st, j, class)
			}
			if !slices.Contains(g.DRA.Classes, class) {
				continue
			}
			counts[product] = pc
			if g.DRA.Device != "" {
				pc.Devices++
				if g.DRA.Shared || st.GPUs[j].Idle() {
					pc.Free++
				}
			}
			for s := range g.DRA.SliceDevices {
				pc.Devices++
				if st.GPUs[j].UsedSlices&(1<<s) == 0 {
					pc.Free++
				}
			}
		}
	}
	out := make([]ProductCount, 0, len(counts))
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		out = append(out, *counts[name])
	}
	slices.SortStableFunc(out, func(a, b ProductCount) int { return cmp.Compare(b.Devices, a.Devices) })
	return out
}

// claimAllocation: devices that the claims accept exist on the nodes of
// ks, and bound pods hold them. The fix names the holders on the node
// where the fewest must go.
func (e *engine) claimAllocation(f *Finding, p *cluster.Pod, ks []int, verdicts []classVerdict) {
	f.Cause = Allocation
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	f.Evidence.Claims = e.claimFacts(p, ks, verdicts)
	// The nearest node: the fewest devices to free.
	best, bestK, bestShort := -1, -1, 0
	for _, k := range ks {
		r := claimOf(verdicts[k].now)
		if short, i := r.Claim.Needed-r.Claim.Free, e.classes[k].nodes[0]; best < 0 || short < bestShort || (short == bestShort && i < best) {
			best, bestK, bestShort = i, k, short
		}
	}
	r := claimOf(verdicts[bestK].now).Claim
	var holders []*cluster.Pod
	for _, h := range e.holders[best] {
		if slices.ContainsFunc(h.Devices, func(d cluster.Device) bool {
			return slices.ContainsFunc(r.Held, func(x cluster.Device) bool { return x.GPU == d.GPU && (x.Slice < 0 || x.Slice == d.Slice) }) ||
				(r.Counter != nil && d.GPU == r.Counter.GPU)
		}) {
			holders = append(holders, h)
		}
	}
	e.leastActiveFirst(holders)
	for i := range f.Evidence.Claims {
		if f.Evidence.Claims[i].Claim == r.Claim && f.Evidence.Claims[i].Request == r.Request {
			for _, h := range holders {
				f.Evidence.Claims[i].Holders = append(f.Evidence.Claims[i].Holders, h.Key())
			}
		}
	}
	node := e.s.Nodes[best].Name
	if len(holders) == 0 {
		f.addAdvice(fmt.Sprintf("claim %s, request %s: %d more of the devices it accepts on %s must be freed, but the snapshot names no pod holding them", r.Claim, r.Request, bestShort, node),
			"the holders are not in the snapshot")
		return
	}
	reclaim := holders[:min(bestShort, len(holders))]
	names := make([]string, len(holders))
	for i, h := range holders {
		names[i] = h.Key()
	}
	if r.Counter != nil {
		e.counterFix(f, p, r, best, holders)
		return
	}
	f.addFix(fmt.Sprintf("claim %s, request %s needs %d device(s) of class %s that its selectors accept; on %s they are held by %s: reclaim %d of them (least active first) and the claim can be allocated there",
		r.Claim, r.Request, r.Needed, r.Class, node, strings.Join(names, ", "), len(reclaim)), reclaimRemedy(reclaim))
}

// leastActiveFirst orders pods by measured activity, unmeasured last, then
// by name.
func (e *engine) leastActiveFirst(pods []*cluster.Pod) {
	slices.SortStableFunc(pods, func(a, b *cluster.Pod) int {
		fa, fb := e.usage.Pods[a.Key()], e.usage.Pods[b.Key()]
		if fa.Measured != fb.Measured {
			if fa.Measured {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(fa.ActiveRatio, fb.ActiveRatio), strings.Compare(a.Key(), b.Key()))
	})
}

// claimPlacement: no node has enough devices that the class and the
// selectors accept, even free. The fix names the nearest change: the
// class offered nowhere, the selectors that accept nothing (with the
// products the class does offer), or the count above what one node has.
func (e *engine) claimPlacement(f *Finding, p *cluster.Pod, ks []int, verdicts []classVerdict) {
	f.Cause = Placement
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	f.Evidence.Claims = e.claimFacts(p, ks, verdicts)
	for _, cf := range f.Evidence.Claims {
		what := fmt.Sprintf("claim %s, request %s", cf.Claim, cf.Request)
		switch {
		case cf.Offered == 0:
			f.addAdvice(fmt.Sprintf("%s: no node offers a device of class %s; use a class the cluster's devices have (%s), or publish devices of it (its driver on GPU nodes)", what, cf.Class, e.classesOffered()),
				"which class the workload should use, or which driver to install, is a choice the evidence does not make")
		case cf.Accepted == 0 && cf.SelectorErrors > 0:
			f.addAdvice(fmt.Sprintf("%s: its selectors fail to evaluate on %d device(s) of class %s (%s); the scheduler skips them while they are in use and aborts on the first free one: fix the selector (guard the attribute with has()) and recreate the claim", what, cf.SelectorErrors, cf.Class, cf.SelectorError),
				"the selector's intent is the workload's; the error names the selector and the device")
		case cf.Accepted == 0:
			f.addFix(fmt.Sprintf("%s: its selectors (%s) accept none of the %d device(s) of class %s; the class offers %s", what, strings.Join(cf.Selectors, " && "), cf.Offered, cf.Class, productList(cf.Products)),
				e.selectorRemedy(p, cf))
		case cf.Counter != nil && cf.MostAccepted >= cf.Needed:
			f.addAdvice(fmt.Sprintf("%s: on %s even free the shared counter %s of counter set %s (GPU %d) cannot hold what the pod's requests take together (%s left where a device needs %s): ask for smaller profiles, or split the requests over pods",
				what, cf.CounterNode, cf.Counter.Counter, cf.Counter.Set, cf.Counter.GPU, counterAmount(cf.Counter.Counter, cf.Counter.Left), counterAmount(cf.Counter.Counter, cf.Counter.Needed)),
				"which profiles the workload can do with is its own choice")
		default:
			f.addFix(fmt.Sprintf("%s needs %d device(s) on one node; at most %d on one node (%s) are of class %s and accepted by its selectors: ask for %d, or add devices it accepts",
				what, cf.Needed, cf.MostAccepted, cf.MostAcceptedNode, cf.Class, cf.MostAccepted), e.countRemedy(p, cf))
		}
	}
}

// classesOffered lists the classes of the cluster's DRA devices with how
// many devices each selects.
func (e *engine) classesOffered() string {
	counts := map[string]int{}
	for _, n := range e.s.Nodes {
		for _, g := range n.GPUs {
			if g.DRA == nil {
				continue
			}
			for _, c := range g.DRA.Classes {
				counts[c] += max(1, len(g.DRA.SliceDevices))
			}
			for _, p := range g.DRA.Partitions {
				for _, c := range p.Classes {
					counts[c]++
				}
			}
		}
	}
	if len(counts) == 0 {
		return "none: the cluster has no DRA device"
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s: %d", c, counts[c]))
	}
	return strings.Join(parts, ", ")
}

func productList(ps []ProductCount) string {
	if len(ps) == 0 {
		return "no device"
	}
	parts := make([]string, len(ps))
	for i, pc := range ps {
		parts[i] = fmt.Sprintf("productName %q (%d, %d free)", pc.Product, pc.Devices, pc.Free)
	}
	return strings.Join(parts, ", ")
}

// productSelector finds a comparison of the productName attribute with a
// string literal in a CEL selector.
var productSelector = regexp.MustCompile(`(\.productName\s*==\s*)(?:'[^']*'|"[^"]*")`)

// selectorRemedy edits the one selector that compares productName to
// name the product of which the class has the most free devices (then the
// most devices); advice
// when the selectors are not of that form.
func (e *engine) selectorRemedy(p *cluster.Pod, cf ClaimFacts) Remedy {
	best := ProductCount{}
	for _, pc := range cf.Products {
		if pc.Free > best.Free || (pc.Free == best.Free && pc.Devices > best.Devices) {
			best = pc
		}
	}
	if len(cf.Selectors) != 1 || best.Product == "" || !productSelector.MatchString(cf.Selectors[0]) {
		return Remedy{Kind: Advice, Note: "gpupack rewrites only a single selector that compares productName; the intent of these selectors is the workload's"}
	}
	expr := productSelector.ReplaceAllString(cf.Selectors[0], "${1}'"+strings.ReplaceAll(best.Product, "'", `\'`)+"'")
	return e.claimSpecRemedy(p, cf, "selectors/0/cel/expression", expr)
}

// countRemedy lowers the request's count to what the best node accepts.
func (e *engine) countRemedy(p *cluster.Pod, cf ClaimFacts) Remedy {
	if cf.All || cf.MostAccepted == 0 {
		return Remedy{Kind: Advice, Note: "the request asks for all matching devices; there is no count to lower"}
	}
	return e.claimSpecRemedy(p, cf, "count", cf.MostAccepted)
}

// ClaimSpec is a remedy that changes a ResourceClaim's or
// ResourceClaimTemplate's requests: Patch is a JSON patch of it. Their
// spec cannot change once created, so the command reads the object,
// patches it locally and replaces it (delete and create).
const ClaimSpec RemedyKind = "claim-spec"

// claimSpecRemedy patches field (under the request, or its alternative)
// of the pod's claim, or of its template when the claim is made from one.
func (e *engine) claimSpecRemedy(p *cluster.Pod, cf ClaimFacts, field string, value any) Remedy {
	return claimSpecPatch(p, cf.Claim, cf.Request, "replace", field, value)
}

// claimSpecPatch is claimSpecRemedy with the JSON patch operation op
// ("replace" a field the request has, "add" one it may lack) on the
// request (or "request/alternative") of the claim.
func claimSpecPatch(p *cluster.Pod, claimName, request, op, field string, value any) Remedy {
	var claim cluster.Claim
	for _, c := range p.Claims {
		if c.Ref() == claimName {
			claim = c
		}
	}
	name, alt, _ := strings.Cut(request, "/")
	path := ""
	for i, r := range claim.Requests {
		if r.Name != name {
			continue
		}
		path = fmt.Sprintf("/spec/devices/requests/%d/exactly/%s", i, field)
		for j, a := range r.FirstAvailable {
			if a.Name == alt {
				path = fmt.Sprintf("/spec/devices/requests/%d/firstAvailable/%d/%s", i, j, field)
			}
		}
	}
	return claimPathPatch(p, claim, path, op, value)
}

// claimPathPatch is the claim-spec remedy that applies the JSON patch
// operation op at path (under the claim's spec) to the claim's object: the
// ResourceClaim, or the ResourceClaimTemplate it is made from.
func claimPathPatch(p *cluster.Pod, claim cluster.Claim, path, op string, value any) Remedy {
	target := Object{Kind: "ResourceClaim", Namespace: p.Namespace, Name: claim.Name}
	note := "a ResourceClaim's spec cannot change: this replaces the claim (delete and create) with the patch applied"
	if claim.Template != "" {
		target = Object{Kind: "ResourceClaimTemplate", Namespace: p.Namespace, Name: claim.Template}
		path = "/spec" + path
		note = "a ResourceClaimTemplate's spec cannot change: this replaces the template with the patch applied; then delete the pod's claim made from the old template (" + cmp.Or(claim.Name, "not made yet") + ") so that a new one is made, or recreate the pod"
	}
	if path == "" || target.Name == "" {
		return Remedy{Kind: Advice, Note: "the snapshot does not name the claim's object"}
	}
	patch := patchOf(JSONPatch, []patchOp{{Op: op, Path: path, Value: value}})
	kind := strings.ToLower(target.Kind)
	return Remedy{Kind: ClaimSpec, Targets: []Object{target}, Patch: patch, Note: note, Commands: []string{
		commandLine("kubectl", "get", kind, "-n", target.Namespace, target.Name, "-o", "yaml") + " | " +
			commandLine("kubectl", "patch", "--local", "-f", "-", "--type=json", "-p", string(patch.Body), "-o", "yaml") + " | " +
			commandLine("kubectl", "replace", "--force", "-f", "-"),
	}}
}
