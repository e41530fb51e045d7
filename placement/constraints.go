package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// claimConstraint is an evaluated constraint of one of the pod's claims
// (spec.devices.constraints), with the attribute's value on each device
// its requests accept.
type claimConstraint struct {
	claim string
	index int // the claim's index among the pod's claims
	// at is the constraint's index in the claim's constraints.
	at     int
	spec   cluster.ClaimConstraint
	match  bool
	values map[cluster.DRADeviceID]string
	// others are the requests of other drivers' devices (a NIC) that a
	// matchAttribute constraint covers: gpupack does not allocate them,
	// but the value the GPUs share must be one that enough of their free
	// devices on the node have. allowed is that set of values on the node
	// judged (onNode); nil when others is empty.
	others  []otherRequest
	allowed map[string]bool
}

// otherRequest is a request of another driver's devices: how many it
// takes and the devices it accepts.
type otherRequest struct {
	name    string
	count   int
	devices []cluster.OtherDevice
}

// ConstraintShortfall is, as data, why no choice of a node's devices
// meets a claim's constraint: the requests it covers take Needed devices,
// which must all have the attribute, with one value (Match) or distinct
// values; of the free devices those requests accept, Best have the most
// common value (BestValue) and Distinct values are found, and Without lack
// the attribute.
type ConstraintShortfall struct {
	Claim string
	// Index is the constraint's index in the claim's constraints.
	Index     int
	Attribute string
	Match     bool
	// Requests are the requests the constraint covers; empty: all.
	Requests  []string `json:",omitempty"`
	Needed    int
	Best      int
	BestValue string `json:",omitempty"`
	Distinct  int
	Without   int
	// Others are the requests of other drivers' devices (a NIC) that the
	// constraint covers, and OtherValues the values that enough of their
	// free devices on the node have: the GPUs' value must be one of them.
	Others      []string `json:",omitempty"`
	OtherValues []string `json:",omitempty"`
}

// maxConstraintTries bounds the choices constrainedReasons tries on one
// node: the values of matchAttribute constraints, each with the devices
// distinctAttribute constraints drop.
const maxConstraintTries = 64

func (cd *claimDemand) addConstraints(index int, claim string, in []cluster.ClaimConstraint, requests []cluster.ClaimRequest) {
	judged := false
	for _, r := range cd.requests {
		judged = judged || r.index == index
	}
	if !judged {
		return
	}
	for at, k := range in {
		if !k.Evaluated {
			continue
		}
		c := claimConstraint{claim: claim, index: index, at: at, spec: k, match: k.MatchAttribute != "", values: make(map[cluster.DRADeviceID]string, len(k.Values))}
		for id, v := range k.Values {
			c.values[cluster.SplitDRADeviceID(id)] = v
		}
		if c.match {
			c.others = otherRequests(k, requests)
		}
		cd.constraints = append(cd.constraints, c)
	}
}

// otherRequests are the claim's requests of other drivers' devices that
// the constraint covers, with a count (allocationMode All, and
// alternatives, are not judged).
func otherRequests(k cluster.ClaimConstraint, requests []cluster.ClaimRequest) []otherRequest {
	var out []otherRequest
	for _, r := range requests {
		if r.OthersRead && len(r.FirstAvailable) == 0 && !r.All && r.Count > 0 && k.Applies(r.Name) {
			out = append(out, otherRequest{name: r.Name, count: r.Count, devices: r.Others})
		}
	}
	return out
}

// onNode is the demand as judged on the node: each constraint that covers
// other drivers' requests allows only the values that enough of their
// free devices on the node have.
func (cd *claimDemand) onNode(node string) *claimDemand {
	needs := false
	for k := range cd.constraints {
		needs = needs || len(cd.constraints[k].others) > 0
	}
	if !needs {
		return cd
	}
	out := *cd
	out.constraints = append([]claimConstraint(nil), cd.constraints...)
	for k := range out.constraints {
		c := &out.constraints[k]
		if len(c.others) > 0 {
			c.allowed = c.allowedOn(node)
		}
	}
	return &out
}

// allowedOn is the set of values that every other request's free devices
// on the node have enough of.
func (c *claimConstraint) allowedOn(node string) map[string]bool {
	var allowed map[string]bool
	for _, r := range c.others {
		count := map[string]int{}
		for _, d := range r.devices {
			if v, ok := c.values[cluster.SplitDRADeviceID(d.ID)]; ok && d.Node == node && !d.Held {
				count[v]++
			}
		}
		next := map[string]bool{}
		for v, n := range count {
			if n >= r.count && (allowed == nil || allowed[v]) {
				next[v] = true
			}
		}
		allowed = next
	}
	return allowed
}

// applies reports whether the constraint covers the device a request's
// alternative takes.
func (c *claimConstraint) applies(cd *claimDemand, req int, alt string) bool {
	return cd.requests[req].index == c.index && c.spec.Applies(alt)
}

// met reports whether the chosen devices meet the constraint, and the
// first device that breaks it (index in chosen).
func (c *claimConstraint) met(cd *claimDemand, chosen []draUnit) (int, bool) {
	seen := map[string]bool{}
	first := ""
	for i := range chosen {
		u := &chosen[i]
		if !c.applies(cd, u.req, u.alt) {
			continue
		}
		v, ok := c.values[u.key]
		switch {
		case !ok:
			return i, false
		case c.match && c.allowed != nil && !c.allowed[v]:
			return i, false
		case c.match && first == "":
			first = v
		case c.match && v != first:
			return i, false
		case !c.match && seen[v]:
			return i, false
		}
		seen[v] = true
	}
	return -1, true
}

// constrainedReasons is claimReasons for a pod whose claims have
// constraints, as the allocator judges them (matchAttribute: every device
// the covered requests take has the attribute, with one value;
// distinctAttribute: each a different value; structured/internal/stable
// and incubating, v0.37.2). It allocates as claimReasons does, then, while
// a constraint is broken, searches: each value of the matchAttribute
// constraints in turn (the covered requests accept only devices with it),
// and within each, drops the devices that break a distinctAttribute
// constraint and allocates again, at most maxConstraintTries times. A pod
// that does not fit without its constraints gets that reason; one that
// fits only without them gets ClaimConstraintUnsatisfied.
func constrainedReasons(cd *claimDemand, s *NodeState, collect bool) ([]draUnit, *Reason) {
	cd = cd.onNode(s.Node.Name)
	chosen, r := allocate(cd, s, true)
	if r != nil {
		return nil, r
	}
	if cd.broken(chosen) < 0 {
		return chosen, nil
	}
	units := draUnits(s, nil)
	tries := 0
	for _, values := range cd.matchValues(units) {
		try := cd.restricted(values)
		for tries < maxConstraintTries {
			tries++
			got, r := allocate(try, s, true)
			if r != nil {
				break
			}
			k := try.broken(got)
			if k < 0 {
				return got, nil
			}
			c := &try.constraints[k]
			if c.match {
				break // a device without the value's attribute: none is accepted
			}
			// Drop the device that repeats a value, so that another with a
			// new value is taken.
			i, _ := c.met(try, got)
			try.drop(k, got[i])
		}
		if tries >= maxConstraintTries {
			break
		}
	}
	return nil, cd.constraintReason(units, chosen)
}

// broken is the index of the first constraint the chosen devices break,
// -1 when they meet all.
func (cd *claimDemand) broken(chosen []draUnit) int {
	for k := range cd.constraints {
		if _, ok := cd.constraints[k].met(cd, chosen); !ok {
			return k
		}
	}
	return -1
}

// matchValues are the choices of one value per matchAttribute constraint
// to try: each value found on a free device its requests accept, in GPU
// order, combined over the constraints (at most maxConstraintTries); one
// empty choice when there is no matchAttribute constraint.
func (cd *claimDemand) matchValues(units []draUnit) [][]string {
	out := [][]string{nil}
	for k := range cd.constraints {
		c := &cd.constraints[k]
		if !c.match {
			out = extend(out, "")
			continue
		}
		values := c.freeValues(cd, units)
		var next [][]string
		for _, prefix := range out {
			for _, v := range values.order {
				if len(next) < maxConstraintTries {
					next = append(next, append(append([]string(nil), prefix...), v))
				}
			}
		}
		out = next
	}
	return out
}

func extend(choices [][]string, v string) [][]string {
	for i := range choices {
		choices[i] = append(choices[i], v)
	}
	return choices
}

// valueCount is how many free devices that the constraint's requests
// accept have each value of its attribute, the values in GPU order, and
// how many lack the attribute.
type valueCount struct {
	order   []string
	count   map[string]int
	without int
}

func (c *claimConstraint) freeValues(cd *claimDemand, units []draUnit) valueCount {
	vc := valueCount{count: map[string]int{}}
	for i := range units {
		u := &units[i]
		if !u.free || !cd.accepted(c, u.key) {
			continue
		}
		v, ok := c.values[u.key]
		if !ok {
			vc.without++
			continue
		}
		if c.allowed != nil && !c.allowed[v] {
			continue
		}
		if vc.count[v] == 0 {
			vc.order = append(vc.order, v)
		}
		vc.count[v]++
	}
	return vc
}

// accepted reports whether an alternative of a request the constraint
// covers accepts the device.
func (cd *claimDemand) accepted(c *claimConstraint, key cluster.DRADeviceID) bool {
	for ri := range cd.requests {
		for a := range cd.requests[ri].alts {
			alt := &cd.requests[ri].alts[a]
			if c.applies(cd, ri, alt.name) && alt.accepts[key] {
				return true
			}
		}
	}
	return false
}

// restricted is the demand whose requests, for each matchAttribute
// constraint, accept only the devices with the chosen value (values[k]),
// and for distinctAttribute constraints only devices with the attribute.
func (cd *claimDemand) restricted(values []string) *claimDemand {
	out := *cd
	out.requests = make([]claimRequest, len(cd.requests))
	for ri, r := range cd.requests {
		out.requests[ri] = r
		out.requests[ri].alts = append([]claimAlt(nil), r.alts...)
	}
	for k := range cd.constraints {
		c := &cd.constraints[k]
		for ri := range out.requests {
			for a := range out.requests[ri].alts {
				alt := &out.requests[ri].alts[a]
				if !c.applies(cd, ri, alt.name) {
					continue
				}
				accepts := make(map[cluster.DRADeviceID]bool, len(alt.accepts))
				for key := range alt.accepts {
					if v, ok := c.values[key]; ok && (!c.match || v == values[k]) {
						accepts[key] = true
					}
				}
				alt.accepts = accepts
			}
		}
	}
	return &out
}

// drop takes the device from what the requests of constraint k accept.
func (cd *claimDemand) drop(k int, u draUnit) {
	c := &cd.constraints[k]
	for ri := range cd.requests {
		for a := range cd.requests[ri].alts {
			if alt := &cd.requests[ri].alts[a]; c.applies(cd, ri, alt.name) {
				delete(alt.accepts, u.key)
			}
		}
	}
}

// constraintReason words the constraint that no choice met: the first
// whose free devices cannot meet it by their values, else the first the
// allocation without constraints broke.
func (cd *claimDemand) constraintReason(units, chosen []draUnit) *Reason {
	var sf *ConstraintShortfall
	for k := range cd.constraints {
		c := &cd.constraints[k]
		vc := c.freeValues(cd, units)
		f := ConstraintShortfall{Claim: c.claim, Index: c.at, Attribute: c.spec.Attribute(), Match: c.match, Requests: c.spec.Requests, Distinct: len(vc.order), Without: vc.without}
		for _, r := range c.others {
			f.Others = append(f.Others, r.name)
		}
		if c.allowed != nil {
			f.OtherValues = slices.Sorted(maps.Keys(c.allowed))
		}
		for i := range chosen {
			if c.applies(cd, chosen[i].req, chosen[i].alt) {
				f.Needed++
			}
		}
		for _, v := range vc.order {
			if vc.count[v] > f.Best {
				f.Best, f.BestValue = vc.count[v], v
			}
		}
		short := (c.match && f.Best < f.Needed) || (!c.match && f.Distinct < f.Needed)
		if sf == nil || short {
			sf = &f
		}
		if short {
			break
		}
	}
	return &Reason{Code: ClaimConstraintUnsatisfied, Resource: sf.Attribute, Requested: int64(sf.Needed), Free: int64(sf.Reach()), Capacity: int64(sf.Needed),
		Unit: "devices", Detail: sf.String(), Constraint: sf}
}

// Reach is how many devices one choice can give the covered requests
// under the constraint.
func (f *ConstraintShortfall) Reach() int {
	if f.Match {
		return f.Best
	}
	return f.Distinct
}

// Kind is "matchAttribute" or "distinctAttribute".
func (f *ConstraintShortfall) Kind() string {
	if f.Match {
		return "matchAttribute"
	}
	return "distinctAttribute"
}

// String words the shortfall.
func (f *ConstraintShortfall) String() string {
	over := "all its requests"
	if len(f.Requests) > 0 {
		over = "requests " + strings.Join(f.Requests, ", ")
	}
	s := fmt.Sprintf("claim %s, constraint %s %s (over %s): the requests take %d device(s), ", f.Claim, f.Kind(), f.Attribute, over, f.Needed)
	if f.Match {
		s += "all with one value of it; of the free devices they accept, "
		switch {
		case f.Best > 0:
			s += fmt.Sprintf("at most %d share one (%s = %s)", f.Best, f.Attribute, ValueWords(f.BestValue))
		case len(f.Others) > 0:
			s += fmt.Sprintf("none has a value that the free devices of request(s) %s have (%s)", strings.Join(f.Others, ", "), valuesWords(f.OtherValues))
		default:
			s += "none has it"
		}
	} else {
		s += fmt.Sprintf("each with a different value of it; the free devices they accept have %d value(s)", f.Distinct)
	}
	if f.Without > 0 {
		s += fmt.Sprintf(", %d lack the attribute", f.Without)
	}
	return s
}

// valuesWords prints typed values, or "none".
func valuesWords(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	words := make([]string, len(vs))
	for i, v := range vs {
		words[i] = ValueWords(v)
	}
	return strings.Join(words, ", ")
}

// ValueWords prints a typed attribute value ("string:pci0" as pci0).
func ValueWords(v string) string {
	_, val, _ := strings.Cut(v, ":")
	return val
}
