package placement

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// CapacityShortfall is, as data, why one device refuses a claim request
// by its capacity (DRAConsumableCapacity): the capacity, what the request
// takes of it after the device's request policy (Requested), what the
// device's allocations leave of it (Free) and its whole value (Total).
type CapacityShortfall struct {
	// Device is the DeviceID, At where it is on the node.
	Device   string
	At       cluster.Device
	Capacity string
	// Asked is the request's own amount; 0 when it omits the capacity
	// (Requested is then the policy's default or the whole capacity).
	Asked     cluster.Quantity
	Requested cluster.Quantity
	Free      cluster.Quantity
	Total     cluster.Quantity
	// Refusal, when set, is why the device refuses the request whatever
	// its allocations: the request policy does not allow Requested, the
	// device has no such capacity, or the amount is not representable.
	// Empty: Requested is more than Free.
	Refusal string `json:",omitempty"`
}

// Structural reports whether no freeing of the device would serve the
// request: the policy or the device refuses it, or it asks more than the
// whole capacity.
func (c *CapacityShortfall) Structural() bool { return c.Refusal != "" || c.Requested > c.Total }

// String words the shortfall for details and evidence.
func (c *CapacityShortfall) String() string {
	asked := "omits it, so takes " + c.Requested.String()
	if c.Asked > 0 {
		asked = "asks " + c.Asked.String()
		if c.Requested != c.Asked {
			asked += ", " + c.Requested.String() + " after the device's request policy"
		}
	}
	if c.Refusal != "" {
		return fmt.Sprintf("device %s, capacity %s: the request %s; %s", c.Device, c.Capacity, asked, c.Refusal)
	}
	return fmt.Sprintf("device %s, capacity %s: the request %s; %s free of %s", c.Device, c.Capacity, asked, c.Free, c.Total)
}

// capacityTake is what a request (its capacity requests by name) takes of
// each capacity of a device (caps; used and allocating aligned with it:
// what the device's allocations and the pod's earlier requests hold), as
// the kube-scheduler's allocator judges it (k8s.io/dynamic-resource-allocation
// v0.37.2, structured/internal/incubating, CmpRequestOverCapacity): a
// requested capacity the device lacks refuses it; an omitted capacity takes
// the policy's default, else the whole value; a requested one is rounded
// up by the policy (to min, then to the next step from min; to the next
// valid value); the result must be allowed by the policy and fit what is
// left. take is appended to; the shortfall is the first capacity, by name,
// that refuses.
//
// Only a refusal's words are built (explain); ok is false when the device
// refuses.
func capacityTake(caps []cluster.DeviceCapacity, used, allocating []cluster.Quantity, req map[string]cluster.Quantity, take []cluster.Quantity, explain bool) ([]cluster.Quantity, CapacityShortfall, bool) {
	for name, q := range req {
		if !hasCapacity(caps, name) {
			return nil, CapacityShortfall{Capacity: name, Asked: q, Requested: q, Refusal: "the device has no capacity " + name}, false
		}
	}
	for i := range caps {
		c := &caps[i]
		asked, ok := req[c.Name]
		amount, err := consumedBy(c, asked, ok)
		if err != nil {
			return nil, CapacityShortfall{Capacity: c.Name, Asked: asked, Requested: asked, Total: c.Value, Refusal: err.Error()}, false
		}
		take = append(take, amount)
	}
	for i := range caps {
		c := &caps[i]
		held := at(used, i) + at(allocating, i)
		sf := CapacityShortfall{Capacity: c.Name, Asked: req[c.Name], Requested: take[i], Free: max(c.Value-held, 0), Total: c.Value}
		if violated(c.Policy, take[i]) {
			if explain {
				sf.Refusal = violates(c.Policy, take[i])
			} else {
				sf.Refusal = "violates the request policy"
			}
			return nil, sf, false
		}
		if take[i] > c.Value-held {
			return nil, sf, false
		}
	}
	return take, CapacityShortfall{}, true
}

func hasCapacity(caps []cluster.DeviceCapacity, name string) bool {
	for i := range caps {
		if caps[i].Name == name {
			return true
		}
	}
	return false
}

func at(q []cluster.Quantity, i int) cluster.Quantity {
	if i < len(q) {
		return q[i]
	}
	return 0
}

// consumedBy is what a request takes of the capacity (upstream
// calculateConsumedCapacity): without a request the default or the whole
// value; with one, rounded up by the range or the valid values.
func consumedBy(c *cluster.DeviceCapacity, asked cluster.Quantity, requested bool) (cluster.Quantity, error) {
	p := c.Policy
	switch {
	case !requested && p != nil && p.Default != nil:
		return *p.Default, nil
	case !requested:
		return c.Value, nil
	case p == nil:
		return asked, nil
	case p.Min != nil:
		if asked < *p.Min {
			return *p.Min, nil
		}
		if p.Step == nil || *p.Step <= 0 {
			return asked, nil
		}
		n := (asked - *p.Min) / *p.Step
		if (asked-*p.Min)%*p.Step != 0 {
			n++
		}
		if n > (math.MaxInt64-*p.Min) / *p.Step {
			return 0, fmt.Errorf("rounding the request %s up to the next step of %s passes the largest quantity", asked, *p.Step)
		}
		return *p.Min + n**p.Step, nil
	case len(p.ValidValues) > 0:
		for _, v := range p.ValidValues {
			if asked <= v {
				return v, nil
			}
		}
	}
	return asked, nil
}

// violated reports whether the policy refuses the amount, as violates
// says why, without words.
func violated(p *cluster.CapacityPolicy, v cluster.Quantity) bool {
	switch {
	case p == nil, p.Default != nil && v == *p.Default:
		return false
	case p.Min != nil:
		return (p.Max != nil && v > *p.Max) || (p.Step != nil && *p.Step > 0 && (v-*p.Min)%*p.Step != 0)
	case len(p.ValidValues) > 0:
		for _, x := range p.ValidValues {
			if x == v {
				return false
			}
		}
		return true
	}
	return false
}

// violates says why the policy does not allow the amount (upstream
// violatesPolicy), "" when it does: the default is always allowed; a range
// allows up to max, in steps from min; valid values allow only themselves.
func violates(p *cluster.CapacityPolicy, v cluster.Quantity) string {
	switch {
	case p == nil, p.Default != nil && v == *p.Default:
		return ""
	case p.Min != nil:
		if p.Max != nil && v > *p.Max {
			return fmt.Sprintf("the request policy allows at most %s", *p.Max)
		}
		if p.Step != nil && *p.Step > 0 && (v-*p.Min)%*p.Step != 0 {
			return fmt.Sprintf("the request policy allows only %s plus steps of %s", *p.Min, *p.Step)
		}
	case len(p.ValidValues) > 0:
		for _, x := range p.ValidValues {
			if x == v {
				return ""
			}
		}
		vals := make([]string, len(p.ValidValues))
		for i, x := range p.ValidValues {
			vals[i] = x.String()
		}
		return "the request policy allows only " + strings.Join(vals, ", ")
	}
	return ""
}

// LargestAllowed is the largest amount of the capacity, at most limit,
// that a request may ask and take as asked under the device's request
// policy (a value that rounding leaves alone); false when none is.
func LargestAllowed(c *cluster.DeviceCapacity, limit cluster.Quantity) (cluster.Quantity, bool) {
	p := c.Policy
	limit = min(limit, c.Value)
	switch {
	case limit <= 0:
		return 0, false
	case p == nil:
		return limit, true
	case p.Min != nil:
		if p.Max != nil {
			limit = min(limit, *p.Max)
		}
		if limit < *p.Min {
			return 0, false
		}
		if p.Step == nil || *p.Step <= 0 {
			return limit, true
		}
		return *p.Min + (limit-*p.Min) / *p.Step * *p.Step, true
	case len(p.ValidValues) > 0:
		best, ok := cluster.Quantity(0), false
		for _, v := range p.ValidValues {
			if v <= limit {
				best, ok = v, true
			}
		}
		return best, ok
	}
	return limit, true
}

// addQuantities returns a new slice, aligned with the longer of a and b,
// holding their sums: a GPUState's Consumed is replaced, never changed in
// place, so that clones of a state do not share changes.
func addQuantities(a, b []cluster.Quantity) []cluster.Quantity {
	out := make([]cluster.Quantity, max(len(a), len(b)))
	for i := range out {
		out[i] = at(a, i) + at(b, i)
	}
	return out
}

// addClaimConsumption adds to the node states the capacity that allocated
// claims consume of devices (consumedCapacity of each allocation result),
// each claim once however many pods share it, and the claims of pods not
// bound yet too: the allocator counts every allocated claim. It returns a
// warning for each amount it cannot read.
func addClaimConsumption(s *cluster.Snapshot, states []*NodeState) []string {
	type where struct{ node, gpu int }
	devices := map[cluster.DRADeviceID]where{}
	for i, n := range s.Nodes {
		for j := range n.GPUs {
			if d := n.GPUs[j].DRA; d != nil && d.Device != "" && len(d.Capacity) > 0 {
				devices[cluster.NewDRADeviceID(d.Driver, d.Pool, d.Device)] = where{i, j}
			}
		}
	}
	if len(devices) == 0 {
		return nil
	}
	var warnings []string
	seen := map[string]bool{}
	for _, p := range s.Pods {
		for _, c := range p.Claims {
			key := p.Namespace + "/" + c.Name
			if len(c.Allocated) == 0 || seen[key] {
				continue
			}
			seen[key] = true
			for _, r := range c.Allocated {
				w, ok := devices[cluster.NewDRADeviceID(r.Driver, r.Pool, r.Device)]
				if !ok || len(r.ConsumedCapacity) == 0 {
					continue
				}
				g := &s.Nodes[w.node].GPUs[w.gpu]
				took := make([]cluster.Quantity, len(g.DRA.Capacity))
				for name, text := range r.ConsumedCapacity {
					q, err := cluster.ParseQuantity(text)
					k := g.DRA.CapacityIndex(name)
					switch {
					case err != nil:
						warnings = append(warnings, fmt.Sprintf("claim %s: consumed capacity %s of device %s: %v; not counted", key, name, r.ID(), err))
						continue
					case k < 0:
						warnings = append(warnings, fmt.Sprintf("claim %s: consumes capacity %s of device %s, which the device does not publish; not counted", key, name, r.ID()))
						continue
					}
					took[k] = q
				}
				st := &states[w.node].GPUs[w.gpu]
				st.Consumed = addQuantities(st.Consumed, took)
			}
		}
	}
	return warnings
}

// appendCapacityKey appends a capacity, its policy and what is consumed of
// it to a NodeState key.
func appendCapacityKey(b []byte, c *cluster.DeviceCapacity, consumed cluster.Quantity) []byte {
	b = strconv.AppendQuote(append(b, '$'), c.Name)
	for _, v := range []cluster.Quantity{c.Value, consumed} {
		b = strconv.AppendInt(append(b, ','), int64(v), 10)
	}
	if p := c.Policy; p != nil {
		for _, q := range []*cluster.Quantity{p.Default, p.Min, p.Max, p.Step} {
			b = append(b, ',')
			if q != nil {
				b = strconv.AppendInt(b, int64(*q), 10)
			}
		}
		for _, v := range p.ValidValues {
			b = strconv.AppendInt(append(b, ';'), int64(v), 10)
		}
	}
	return b
}
