package placement

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// ClaimShortfall is, as data, why a node cannot serve one request of a
// pod's ResourceClaim: the devices of the node that the request's class
// selects (Offered), of those the ones its selectors accept too
// (Accepted), of those the ones no bound pod's allocation holds (Free),
// and how many it needs. For a request with alternatives (firstAvailable)
// the figures are the first alternative's, and Alternatives has each.
type ClaimShortfall struct {
	// Claim is the ResourceClaim's name, or the pod's claim entry while
	// the claim of a template is not made yet.
	Claim string
	// Request is the request's name, "request/subrequest" for an
	// alternative.
	Request  string
	Class    string
	Offered  int
	Accepted int
	Free     int
	// Needed is the count asked for; with All it is Accepted (at least
	// one), each of which must be free.
	Needed int
	All    bool
	// Held are the accepted devices of the node that bound pods hold.
	Held []cluster.Device
	// Counter is set when shared counters (partitionable devices) keep
	// accepted devices that no pod holds from being allocated: the counter
	// that excludes the most of them.
	Counter *CounterShortfall `json:",omitempty"`
	// Untolerated are the accepted devices of the node that no pod holds
	// but that a taint keeps from the request (not counted in Free).
	Untolerated []UntoleratedDevice `json:",omitempty"`
	// Capacity are the accepted devices, free or shared, that refuse the
	// request by their capacity (DRAConsumableCapacity), one shortfall
	// each; they are not counted Free.
	Capacity     []CapacityShortfall `json:",omitempty"`
	Alternatives []ClaimShortfall    `json:",omitempty"`
}

// UntoleratedDevice is a device that a request's class and selectors
// accept and no pod holds, with the first of its NoSchedule or NoExecute
// taints that the request does not tolerate.
type UntoleratedDevice struct {
	Device cluster.Device
	// ID is the device's DeviceID, driver/pool/device.
	ID    string
	Taint cluster.DeviceTaint
}

// claimDemand is what a pending pod's claims ask, prepared once: the pod's
// claims that do not exist, and each request of its other unallocated
// claims that the loader evaluated.
type claimDemand struct {
	missing  []string
	requests []claimRequest
	// constraints are the claims' evaluated constraints.
	constraints []claimConstraint
	// extended is the extended resource (nvidia.com/gpu) when the only
	// claim judged is the one through which a DeviceClass serves it
	// (extendedResourceName): on a node whose device plugin advertises
	// the resource, the scheduler fits the plain request instead.
	extended string
}

// pluginServes reports whether the node's device plugin advertises the
// extended resource that the claims stand for, so that the kube-scheduler
// judges the plain request there (NodeResourcesFit) and leaves the claim
// alone, as it does for a resource that the node's allocatable lists.
func (cd *claimDemand) pluginServes(n *cluster.Node) bool {
	if cd.extended == "" {
		return false
	}
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.DRA == nil && g.Sharing != cluster.MIG && !g.SharedResource {
			return true
		}
	}
	return false
}

// JudgesClaimsOn reports whether Fit judges the pod's claims on the node
// (JudgesClaims, and the node's device plugin does not serve the extended
// resource that they stand for), as opposed to its GPU request.
func JudgesClaimsOn(d *Demand, n *cluster.Node) bool {
	return d.claims != nil && !d.claims.pluginServes(n)
}

type claimRequest struct {
	claim string
	// index is the claim's index among the pod's claims.
	index int
	alts  []claimAlt
}

// claimAlt is one way to serve a request: a request without alternatives
// has one.
type claimAlt struct {
	name    string
	class   string
	count   int
	all     bool
	accepts map[cluster.DRADeviceID]bool
	errors  map[cluster.DRADeviceID]string
	// tolerations are the request's tolerations of device taints.
	tolerations []cluster.DeviceToleration
	// capacity is the request's capacity requests, by capacity name.
	capacity map[string]cluster.Quantity
}

// newClaimDemand prepares the claims of a pending pod that placement
// judges; nil when there are none: the pod is bound, or its claims are
// allocated, or were not evaluated (judged as the plain GPU request they
// stand for).
func newClaimDemand(p *cluster.Pod) *claimDemand {
	if !JudgesClaims(p) {
		return nil
	}
	var cd claimDemand
	extendedOnly := true
	for ci, c := range p.Claims {
		if len(c.Allocated) > 0 {
			continue
		}
		if c.ExtendedResource != "" {
			cd.extended = c.ExtendedResource
		} else {
			extendedOnly = false
		}
		name := c.Ref()
		if c.Missing {
			missing := c.Name
			if c.Template != "" {
				missing = "template " + c.Template
			}
			cd.missing = append(cd.missing, missing)
			continue
		}
		for _, r := range c.Requests {
			if !evaluated(&r) {
				continue
			}
			cr := claimRequest{claim: name, index: ci}
			for _, alt := range r.Alternatives() {
				a := claimAlt{name: alt.Name, class: alt.DeviceClass, count: alt.Count, all: alt.All, accepts: make(map[cluster.DRADeviceID]bool, len(alt.Accepts)), tolerations: alt.Tolerations, capacity: alt.Capacity}
				if len(r.FirstAvailable) > 0 {
					a.name = r.Name + "/" + alt.Name
				}
				for _, id := range alt.Accepts {
					a.accepts[cluster.SplitDRADeviceID(id)] = true
				}
				for id, msg := range alt.SelectorErrors {
					if a.errors == nil {
						a.errors = map[cluster.DRADeviceID]string{}
					}
					a.errors[cluster.SplitDRADeviceID(id)] = msg
				}
				cr.alts = append(cr.alts, a)
			}
			cd.requests = append(cd.requests, cr)
		}
		cd.addConstraints(ci, name, c.Constraints, c.Requests)
	}
	if !extendedOnly {
		cd.extended = ""
	}
	return &cd
}

// JudgesClaims reports whether Fit judges the pod's ResourceClaims on the
// nodes' DRA devices in place of its GPU request: the pod is pending and
// has a claim that does not exist, or unallocated claims whose requests
// the loader evaluated (the claim of an extended resource that a
// DeviceClass serves included; JudgesClaimsOn says on which nodes).
func JudgesClaims(p *cluster.Pod) bool {
	if p.NodeName != "" {
		return false
	}
	for _, c := range p.Claims {
		if len(c.Allocated) > 0 {
			continue
		}
		if c.Missing {
			return true
		}
		for i := range c.Requests {
			if evaluated(&c.Requests[i]) {
				return true
			}
		}
	}
	return false
}

// evaluated reports whether the loader evaluated every alternative of the
// request.
func evaluated(r *cluster.ClaimRequest) bool {
	if len(r.FirstAvailable) == 0 {
		return r.Evaluated
	}
	for i := range r.FirstAvailable {
		if !r.FirstAvailable[i].Evaluated {
			return false
		}
	}
	return true
}

// draUnit is one DRA device of a node: a whole GPU (Slice -1), a MIG
// slice or a partition of a partitionable GPU (part), which consumes
// counters (uses).
type draUnit struct {
	dev   cluster.Device
	key   cluster.DRADeviceID
	class []string
	// req and alt are, in a chosen unit, the index of the request in the
	// demand and the name of the alternative that took it.
	req    int
	alt    string
	free   bool
	shared bool
	part   bool
	uses   []cluster.CounterUse
	// taints are the taints of the unit's GPU; those of this device name
	// it (key.device).
	taints []cluster.DeviceTaint
	// caps and used are a whole device's capacities and what its
	// allocations hold of them; take is what the pod's request takes of
	// them, in a chosen unit.
	caps []cluster.DeviceCapacity
	used []cluster.Quantity
	take []cluster.Quantity
}

// untolerated is the taint that keeps the device from the request, if
// any.
func (u *draUnit) untolerated(alt *claimAlt) (cluster.DeviceTaint, bool) {
	if len(u.taints) == 0 {
		return cluster.DeviceTaint{}, false
	}
	return cluster.Untolerated(u.taints, u.key.Device(), alt.tolerations)
}

// draUnits lists the node's DRA devices in GPU order, with whether each is
// free: a whole device that no bound pod holds (a device that allows
// multiple allocations always is), a slice or partition not taken. Whether
// the counters of a partitionable GPU leave room for a free device is
// claimReasons' to judge.
func draUnits(s *NodeState, out []draUnit) []draUnit {
	for i := range s.Node.GPUs {
		g, st := &s.Node.GPUs[i], &s.GPUs[i]
		if g.DRA == nil {
			continue
		}
		if g.DRA.Device != "" {
			free := g.DRA.Shared || (st.Holders == 0 && st.UsedSlices == 0)
			if g.DRA.Partitionable() {
				// Partitions held leave the whole device unheld; their
				// counters exclude it.
				free = !wholeHeld(st)
			}
			out = append(out, draUnit{dev: cluster.Device{GPU: i, Slice: -1}, key: cluster.NewDRADeviceID(g.DRA.Driver, g.DRA.Pool, g.DRA.Device), class: g.DRA.Classes,
				free: free, shared: g.DRA.Shared, uses: g.DRA.Consumes, taints: g.DRA.Taints, caps: g.DRA.Capacity, used: st.Consumed})
		}
		for j := range g.DRA.Partitions {
			p := &g.DRA.Partitions[j]
			out = append(out, draUnit{dev: cluster.Device{GPU: i, Slice: j}, key: cluster.NewDRADeviceID(g.DRA.Driver, g.DRA.Pool, p.Device), class: p.Classes,
				free: st.UsedSlices&(1<<j) == 0, part: true, uses: p.Consumes, taints: g.DRA.Taints})
		}
		for j, name := range g.DRA.SliceDevices {
			out = append(out, draUnit{dev: cluster.Device{GPU: i, Slice: j}, key: cluster.NewDRADeviceID(g.DRA.Driver, g.DRA.Pool, name), class: g.DRA.Classes, free: st.UsedSlices&(1<<j) == 0, taints: g.DRA.Taints})
		}
	}
	return out
}

// claimReasons judges the pod's claims on the node as the kube-scheduler's
// allocator does: each request in turn takes devices that its class and
// selectors accept and that are free (not held by a bound pod, not taken
// by an earlier request of the pod), the count asked or, with All, every
// accepted one; alternatives are tried in order. A selector that failed to
// evaluate on a device fails the pod where the allocator meets it
// (structured/internal/stable, v0.37.2): with All on any device of the
// node, with a count on a device not in use, before enough are found. It returns the devices
// taken (when collect is set), or the reason for the first request that
// cannot be served. A device with a NoSchedule or NoExecute taint that the
// request does not tolerate is passed over, as the allocator does after
// the selectors (so for All, such a device fails the request). The
// allocator backtracks over devices where gpupack takes the first free
// ones in GPU order; the two differ only when one request's devices would
// serve a later request that nothing else can.
func claimReasons(cd *claimDemand, s *NodeState, collect bool) ([]draUnit, *Reason) {
	if len(cd.constraints) > 0 {
		return constrainedReasons(cd, s, collect)
	}
	return allocate(cd, s, collect)
}

// allocate is claimReasons without the claims' constraints.
func allocate(cd *claimDemand, s *NodeState, collect bool) ([]draUnit, *Reason) {
	if len(cd.missing) > 0 {
		return nil, &Reason{Code: ClaimNotFound, Detail: "the pod's " + strings.Join(cd.missing, ", ") + " does not exist"}
	}
	var unitBuf [maxStackGPUs]draUnit
	var takenBuf [maxStackGPUs]bool
	var takeBuf [4]cluster.Quantity
	d := nodeDevices{units: draUnits(s, unitBuf[:0]), takeBuf: takeBuf[:0]}
	if len(d.units) > len(takenBuf) {
		d.taken = make([]bool, len(d.units))
	} else {
		d.taken = takenBuf[:len(d.units)]
	}
	a := allocation{s: s, collect: collect}
	for _, u := range d.units {
		if len(u.uses) > 0 {
			a.left = ledgers{}
			break
		}
	}
	for ri := range cd.requests {
		if r := a.serve(d, &cd.requests[ri], ri, ri == len(cd.requests)-1); r != nil {
			return nil, r
		}
	}
	return a.chosen, nil
}

// nodeDevices are the node's DRA units as the pod's requests take them:
// the units, which an earlier request took, and a buffer for what a
// unit's capacities give a request. They are kept apart from allocation
// and passed by value so that their buffers stay on allocate's stack.
type nodeDevices struct {
	units   []draUnit
	taken   []bool
	takeBuf []cluster.Quantity
}

// allocation is allocate's state while the pod's requests take devices
// in turn.
type allocation struct {
	s *NodeState
	// collect says to collect the devices taken and to explain capacity
	// refusals; Fits asks only whether the pod fits.
	collect bool
	// left is the counters left on the node's partitionable GPUs, made
	// when a request first meets one; each alternative counts on a copy.
	// Nil when no unit consumes counters.
	left ledgers
	// allocating is what the pod's earlier requests take of shared
	// devices' capacities, by unit; nil until one does.
	allocating [][]cluster.Quantity
	chosen     []draUnit
}

// serve takes the devices for the request (the ri-th of the pod's, last
// its last) by the first of its alternatives that the node's devices
// serve; it gives the reason when none does.
func (a *allocation) serve(d nodeDevices, r *claimRequest, ri int, last bool) *Reason {
	var tried []ClaimShortfall
	for i := range r.alts {
		alt := &r.alts[i]
		sf, reason := a.survey(d, r, alt)
		if reason != nil {
			return reason
		}
		if sf.Free < sf.Needed || (alt.all && sf.Free < sf.Accepted) {
			tried = append(tried, sf)
			continue
		}
		a.take(d, alt, sf.Needed, ri, last)
		return nil
	}
	return claimReason(tried)
}

// survey counts, for one alternative of the request, the node's devices
// its class offers, those its selectors accept, and of those the ones
// held, taken by an earlier request, tainted, out of counters or of
// capacity, and free; Needed is what it asks (for All, every accepted
// device). A selector that fails to evaluate where the allocator meets it
// gives its reason instead.
func (a *allocation) survey(d nodeDevices, r *claimRequest, alt *claimAlt) (ClaimShortfall, *Reason) {
	sf := ClaimShortfall{Claim: r.claim, Request: alt.name, Class: alt.class, Needed: alt.count, All: alt.all}
	// The counters this alternative has counted so far, copied from
	// left on the first device it counts on a GPU.
	var scratch ledgers
	var tally counterTally
	counted := func(gpu int) counterLedger {
		if l, ok := scratch[gpu]; ok {
			return l
		}
		return a.left.of(a.s, gpu)
	}
	for k := range d.units {
		u := &d.units[k]
		// The allocator evaluates selectors on every device for All,
		// and for a count on the devices not in use, in order, until
		// it has enough: a selector error on such a device aborts.
		if msg, bad := alt.errors[u.key]; bad && (alt.all || (u.free && !d.taken[k] && sf.Free < alt.count)) {
			return sf, &Reason{Code: ClaimSelectorError, Detail: msg}
		}
		if containsString(u.class, alt.class) {
			sf.Offered++
		}
		if !alt.accepts[u.key] {
			continue
		}
		sf.Accepted++
		t, blocked := u.untolerated(alt)
		switch {
		case !u.free:
			sf.Held = append(sf.Held, u.dev)
		case d.taken[k]:
		case blocked:
			sf.Untolerated = append(sf.Untolerated, UntoleratedDevice{Device: u.dev, ID: u.key.String(), Taint: t})
		case len(u.uses) > 0 && !counted(u.dev.GPU).fits(u.uses):
			counted(u.dev.GPU).shortOf(u.uses, func(set, counter string, needed, left int64) {
				tally.add(u.dev.GPU, set, counter, needed, left)
			})
		default:
			if _, short, ok := a.fits(d, alt, k, u); !ok {
				if a.collect { // Fits asks only whether it fits
					sf.Capacity = append(sf.Capacity, short)
				}
				break
			}
			sf.Free++
			if len(u.uses) > 0 {
				if _, ok := scratch[u.dev.GPU]; !ok {
					if scratch == nil {
						scratch = ledgers{}
					}
					scratch[u.dev.GPU] = a.left.of(a.s, u.dev.GPU).clone()
				}
				scratch[u.dev.GPU].take(u.uses)
			}
		}
	}
	if alt.all {
		sf.Needed = max(sf.Accepted, 1)
	}
	sf.Counter = tally.best
	return sf, nil
}

// take takes for the alternative the first needed free devices it
// accepts, in GPU order, as the pod's ri-th request (last: its last):
// their counters, and the units or, of a shared device, its capacity.
func (a *allocation) take(d nodeDevices, alt *claimAlt, needed, ri int, last bool) {
	got := 0
	for k := range d.units {
		u := &d.units[k]
		if got >= needed || !alt.accepts[u.key] || !u.free || d.taken[k] {
			continue
		}
		if _, blocked := u.untolerated(alt); blocked {
			continue
		}
		if len(u.uses) > 0 && !a.left.of(a.s, u.dev.GPU).fits(u.uses) {
			continue
		}
		take, _, ok := a.fits(d, alt, k, u)
		if !ok {
			continue
		}
		if len(u.uses) > 0 {
			a.left.of(a.s, u.dev.GPU).take(u.uses)
		}
		if !u.shared {
			d.taken[k] = true
		} else if len(take) > 0 && !last {
			// Later requests of the pod see what this one takes.
			if a.allocating == nil {
				a.allocating = make([][]cluster.Quantity, len(d.units))
			}
			a.allocating[k] = addQuantities(a.allocating[k], take)
		}
		if a.collect {
			c := *u
			c.req, c.alt = ri, alt.name
			if u.shared && len(take) > 0 {
				c.take = append([]cluster.Quantity(nil), take...)
			}
			a.chosen = append(a.chosen, c)
		}
		got++
	}
}

// fits judges the unit's capacity for the alternative, giving what the
// unit's capacities give it: nil when the request and the device have
// none (MIG slices and partitions are not judged).
func (a *allocation) fits(d nodeDevices, alt *claimAlt, k int, u *draUnit) ([]cluster.Quantity, CapacityShortfall, bool) {
	if u.dev.Slice >= 0 || (len(u.caps) == 0 && len(alt.capacity) == 0) {
		return nil, CapacityShortfall{}, true
	}
	var alloc []cluster.Quantity
	if a.allocating != nil {
		alloc = a.allocating[k]
	}
	take, short, ok := capacityTake(u.caps, u.used, alloc, alt.capacity, d.takeBuf[:0], a.collect)
	if !ok && a.collect {
		short.Device, short.At = u.key.String(), u.dev
	}
	return take, short, ok
}

// claimReason words the shortfall of a request whose every alternative
// failed.
func claimReason(tried []ClaimShortfall) *Reason {
	sf := tried[0]
	if len(tried) > 1 {
		sf.Alternatives = tried
	}
	words := make([]string, len(tried))
	for i, t := range tried {
		need := fmt.Sprintf("needs %d", t.Needed)
		if t.All {
			need = "needs all it accepts, at least one"
		}
		tainted := ""
		if len(t.Untolerated) > 0 {
			tainted = fmt.Sprintf(" (%d more not held but tainted: %s)", len(t.Untolerated), t.Untolerated[0].words())
		}
		words[i] = fmt.Sprintf("request %s: the node offers %d device(s) of class %s, the selectors accept %d, %d free%s; it %s", t.Request, t.Offered, t.Class, t.Accepted, t.Free, tainted, need)
		for j := range t.Capacity {
			words[i] += "; " + t.Capacity[j].String()
		}
	}
	detail := "claim " + sf.Claim + ", " + words[0]
	if len(tried) > 1 {
		detail = "claim " + sf.Claim + ": no alternative fits: " + strings.Join(words, "; ")
	}
	for i, t := range tried {
		// The taints are the nearest cure when the devices they keep
		// from an alternative would serve it.
		if len(t.Untolerated) > 0 && t.Free+len(t.Untolerated) >= t.Needed {
			taint := t
			taint.Alternatives = sf.Alternatives
			d := t.Untolerated[0]
			said := fmt.Sprintf("request %s: %s, which the request does not tolerate; %d of the %d device(s) it accepts that no pod holds carry such a taint; it needs %d",
				t.Request, d.words(), len(t.Untolerated), t.Free+len(t.Untolerated), t.Needed)
			detail := "claim " + t.Claim + ", " + said
			if len(tried) > 1 {
				detail = fmt.Sprintf("claim %s: no alternative fits; alternative %d: %s", t.Claim, i+1, said)
			}
			return &Reason{Code: ClaimTaintNotTolerated, Resource: t.Class, Requested: int64(t.Needed), Free: int64(t.Free), Capacity: int64(t.Accepted),
				Unit: "devices", Detail: detail, Claim: &taint}
		}
	}
	unresolvable := true
	for _, t := range tried {
		usable := t.Accepted
		for i := range t.Capacity {
			if t.Capacity[i].Structural() {
				usable--
			}
		}
		unresolvable = unresolvable && usable < t.Needed
	}
	if len(sf.Capacity) > 0 && sf.Free+len(sf.Capacity) >= sf.Needed {
		// Devices are there and free, but their capacity refuses.
		c := sf.Capacity[0]
		return &Reason{Code: ClaimCapacityInsufficient, Resource: c.Capacity, Requested: int64(c.Requested), Free: int64(c.Free), Capacity: int64(c.Total),
			Unresolvable: unresolvable, Detail: detail, Claim: &sf}
	}
	code := ClaimUnallocatable
	if c := sf.Counter; c != nil {
		code = ClaimCounterExhausted
		detail += fmt.Sprintf("; on GPU %d the shared counter %s of counter set %s has %d left where a device needs %d, which keeps %d accepted device(s) no claim holds from being made", c.GPU, c.Counter, c.Set, c.Left, c.Needed, c.Blocked)
	}
	return &Reason{Code: code, Resource: sf.Class, Requested: int64(sf.Needed), Free: int64(sf.Free), Capacity: int64(sf.Accepted),
		Unit: "devices", Unresolvable: unresolvable, Detail: detail, Claim: &sf}
}

// words names the device and its taint, and the DeviceTaintRule that
// adds it.
func (d UntoleratedDevice) words() string {
	s := fmt.Sprintf("device %s has taint %s", d.ID, d.Taint)
	if d.Taint.Rule != "" {
		s += " (DeviceTaintRule " + d.Taint.Rule + ")"
	}
	return s
}

// sliceShare is what MIG slice j of GPU index takes: its profile's
// compute and memory.
func sliceShare(g *cluster.GPU, index, j int) DeviceShare {
	share := DeviceShare{GPU: index, Slice: j}
	if p, ok := migProfile(g, j); ok {
		share.Milli = gpu.Milli(p.Compute) * gpu.WholeGPU / gpu.Milli(g.Model.MIG.ComputeSlices)
		share.Memory = p.Memory
	}
	return share
}

// sliceAt is sliceShare when slice j is in the GPU's layout and not taken.
func sliceAt(g *cluster.GPU, st *GPUState, index, j int) (DeviceShare, bool) {
	if j >= len(g.Layout) || st.UsedSlices&(1<<j) != 0 {
		return DeviceShare{}, false
	}
	return sliceShare(g, index, j), true
}

func migProfile(g *cluster.GPU, slice int) (gpu.Profile, bool) {
	if g.Model.MIG == nil || slice >= len(g.Layout) {
		return gpu.Profile{}, false
	}
	return g.Model.MIG.Profile(g.Layout[slice].Profile)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fitClaims is Fit for a pod whose claims placement judges: the node-level
// reasons, then the claims' in place of the GPU check; when all pass, the
// assignment of the devices the claims take.
func fitClaims(d *Demand, s *NodeState, reasons []Reason) (Assignment, []Reason) {
	chosen, r := claimReasons(d.claims, s, true)
	if r != nil {
		reasons = append(reasons, *r)
	}
	if len(reasons) > 0 {
		return Assignment{}, reasons
	}
	a := Assignment{}
	for _, u := range chosen {
		g, st := &s.Node.GPUs[u.dev.GPU], &s.GPUs[u.dev.GPU]
		share := shareOn(d, g, st, u.dev.GPU)
		if u.part {
			p := &g.DRA.Partitions[u.dev.Slice]
			share = DeviceShare{GPU: u.dev.GPU, Slice: u.dev.Slice, Milli: p.Milli, Memory: p.Memory}
		} else if u.dev.Slice >= 0 {
			share = sliceShare(g, u.dev.GPU, u.dev.Slice)
		}
		share.Consumed = u.take
		a.Devices = append(a.Devices, share)
	}
	return a, nil
}

// claimsFit is FitsGPUs for a pod whose claims placement judges.
func claimsFit(d *Demand, s *NodeState) bool {
	_, r := claimReasons(d.claims, s, false)
	return r == nil
}
