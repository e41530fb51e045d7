package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/placement"
)

// CapacityFacts is one device whose consumable capacity
// (DRAConsumableCapacity) refuses a claim's request: what the request
// takes of the capacity after the device's request policy, what the
// device's allocations leave, and the pods whose claims hold shares of it.
type CapacityFacts struct {
	Node     string `json:"node"`
	Device   string `json:"device"`
	Capacity string `json:"capacity"`
	// Asked is the request's own amount, empty when it omits the
	// capacity.
	Asked     string `json:"asked,omitempty"`
	Requested string `json:"requested"`
	Free      string `json:"free"`
	Total     string `json:"total"`
	Refusal   string `json:"refusal,omitempty"`
	// Holders are the pods whose allocated claims consume the capacity,
	// least active first, with what each consumes.
	Holders []string `json:"holders,omitempty"`
}

// byCapacity reports whether the claims' reason on the nodes of ks is
// their capacity (placement.ClaimCapacityInsufficient) on every one.
func byCapacity(ks []int, verdicts []classVerdict) bool {
	for _, k := range ks {
		if r := claimOf(verdicts[k].now); r == nil || r.Code != placement.ClaimCapacityInsufficient {
			return false
		}
	}
	return true
}

// claimCapacity: devices that the claim's request accepts are there, but
// their consumable capacity refuses what it asks (cause Allocation: other
// claims' shares hold it; Placement: the amount is more than a device has
// or its request policy allows). The fix is the nearest change: the
// largest amount that the policy allows and the roomiest device has free
// (a patch of the claim's capacity request), and, for allocation, the
// pods whose shares hold the device.
func (e *engine) claimCapacity(f *Finding, p *cluster.Pod, ks []int, verdicts []classVerdict, cause Cause) {
	f.Cause = cause
	idx := e.nodesOf(ks)
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(idx)
	f.Evidence.Claims = e.claimFacts(p, ks, verdicts)
	type candidate struct {
		node int
		sf   *placement.ClaimShortfall
		c    placement.CapacityShortfall
	}
	// The roomiest refusing device of each failing request, over the nodes.
	best := map[string]candidate{}
	var order []string
	for _, k := range ks {
		r := claimOf(verdicts[k].now)
		shorts := r.Claim.Alternatives
		if len(shorts) == 0 {
			shorts = []placement.ClaimShortfall{*r.Claim}
		}
		for i := range shorts {
			sf := &shorts[i]
			key := sf.Claim + "\x00" + sf.Request
			for _, c := range sf.Capacity {
				room := c.Free
				if c.Refusal != "" {
					room = 0
				}
				prev, seen := best[key]
				if !seen {
					order = append(order, key)
				}
				if !seen || room > prev.c.Free || (room == prev.c.Free && e.classes[k].nodes[0] < prev.node) {
					best[key] = candidate{node: e.classes[k].nodes[0], sf: sf, c: c}
				}
			}
		}
	}
	for _, key := range order {
		b := best[key]
		node := e.s.Nodes[b.node]
		facts := CapacityFacts{Node: node.Name, Device: b.c.Device, Capacity: b.c.Capacity, Requested: b.c.Requested.String(),
			Free: b.c.Free.String(), Total: b.c.Total.String(), Refusal: b.c.Refusal, Holders: e.shareHolders(b.node, b.c)}
		if b.c.Asked > 0 {
			facts.Asked = b.c.Asked.String()
		}
		for i := range f.Evidence.Claims {
			if cf := &f.Evidence.Claims[i]; cf.Claim == b.sf.Claim && cf.Request == b.sf.Request {
				cf.Capacity = append(cf.Capacity, facts)
			}
		}
		what := fmt.Sprintf("claim %s, request %s", b.sf.Claim, b.sf.Request)
		c := b.c
		limit := c.Free
		if cause == Placement {
			limit = c.Total
		}
		var dc *cluster.DeviceCapacity
		if g := node.GPUs[c.At.GPU].DRA; g != nil {
			if k := g.CapacityIndex(c.Capacity); k >= 0 {
				dc = &g.Capacity[k]
			}
		}
		cf := ClaimFacts{Claim: b.sf.Claim, Request: b.sf.Request}
		switch smaller, ok := largestAllowed(dc, limit); {
		case dc == nil:
			f.addAdvice(fmt.Sprintf("%s asks for capacity %s, which device %s on %s does not publish: drop that capacity request, or use a class whose devices have it", what, c.Capacity, c.Device, node.Name),
				"which capacities the workload needs is its own choice")
		case ok && smaller > 0:
			change := fmt.Sprintf("%s: %s; ask for %s of %s (the most its request policy allows within what device %s on %s has", what, c.String(), smaller, c.Capacity, c.Device, node.Name)
			if cause == Allocation {
				change += " free), or free shares of it held by " + orNone(facts.Holders)
			} else {
				change += ")"
			}
			f.addFix(change, e.capacityRemedy(p, cf, c.Capacity, smaller))
		case cause == Allocation:
			f.addAdvice(fmt.Sprintf("%s: %s; no smaller request that its policy allows fits what is free: free shares of it held by %s", what, c.String(), orNone(facts.Holders)),
				"which share to end is the workloads' choice; the holders are listed least active first")
		default:
			f.addAdvice(fmt.Sprintf("%s: %s; no device it accepts can serve it: use devices with more %s, or a request their policy allows", what, c.String(), c.Capacity),
				adviceHardware)
		}
	}
}

// largestAllowed is placement.LargestAllowed for a capacity that may be
// unknown.
func largestAllowed(c *cluster.DeviceCapacity, limit cluster.Quantity) (cluster.Quantity, bool) {
	if c == nil {
		return 0, false
	}
	return placement.LargestAllowed(c, limit)
}

func orNone(pods []string) string {
	if len(pods) == 0 {
		return "no pod the snapshot names"
	}
	return strings.Join(pods, ", ")
}

// shareHolders are the pods on the node whose allocated claims consume
// the shortfall's capacity of its device, least active first, each with
// what it consumes.
func (e *engine) shareHolders(node int, c placement.CapacityShortfall) []string {
	type holder struct {
		pod    *cluster.Pod
		amount string
	}
	var hs []holder
	var pods []*cluster.Pod
	for _, p := range e.holders[node] {
		for _, cl := range p.Claims {
			for _, d := range cl.Allocated {
				if q, ok := d.ConsumedCapacity[c.Capacity]; ok && d.ID() == c.Device {
					hs = append(hs, holder{p, q})
					pods = append(pods, p)
				}
			}
		}
	}
	e.leastActiveFirst(pods)
	out := make([]string, 0, len(hs))
	for _, p := range pods {
		i := slices.IndexFunc(hs, func(h holder) bool { return h.pod == p })
		out = append(out, fmt.Sprintf("%s (%s)", p.Key(), hs[i].amount))
	}
	return out
}

// capacityRemedy sets the request's capacity request to amount: a patch
// of the claim (or its template), which adds the capacity request when
// the request has none.
func (e *engine) capacityRemedy(p *cluster.Pod, cf ClaimFacts, capacity string, amount cluster.Quantity) Remedy {
	req := requestOf(p, cf.Claim, cf.Request)
	if len(req.Capacity) == 0 {
		return claimSpecPatch(p, cf.Claim, cf.Request, "add", "capacity", map[string]any{"requests": map[string]string{capacity: amount.String()}})
	}
	return claimSpecPatch(p, cf.Claim, cf.Request, "add", "capacity/requests/"+pointerEscape.Replace(capacity), amount.String())
}
