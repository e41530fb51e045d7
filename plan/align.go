package plan

import (
	"fmt"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/placement"
)

// unalignedShares checks each MIG share of a workload whose claim aligns
// its GPU with another driver's devices (a NIC on one NUMA node): the
// proof must place every pod of it on a GPU whose value of the attribute
// enough free devices of each other request on that node have. It says,
// per workload the proof does not place so, why; the plan then keeps that
// workload's GPUs.
func (pl *Plan) unalignedShares(s *cluster.Snapshot) map[string]string {
	out := map[string]string{}
	for _, d := range pl.Decisions {
		a := d.w.aligned()
		if a == nil || d.Method != MIG || d.Action == Keep || d.Action == Unplaceable {
			continue
		}
		if why := pl.proveAligned(s, d, a); why != "" {
			out[d.w.Key] = why
		}
	}
	return out
}

// proveAligned says why the proof's place for a pod of the aligned MIG
// share d loses its alignment; "" when every pod keeps it. The devices
// the workload's own pods hold count as free: the move frees them. Each
// device serves one pod.
func (pl *Plan) proveAligned(s *cluster.Snapshot, d *Decision, a *alignment) string {
	own := map[string]bool{}
	for _, p := range d.w.Pods {
		for _, c := range p.Claims {
			for _, dev := range c.Allocated {
				own[dev.ID()] = true
			}
		}
	}
	for _, r := range a.others {
		if r.All || len(r.FirstAvailable) > 0 {
			return fmt.Sprintf("its request %s asks every device or alternatives, which the proof does not place", r.Name)
		}
	}
	taken := map[string]bool{}
	attr := a.constraint.MatchAttribute
	for _, p := range d.w.Pods {
		key := p.Key()
		node, placed := pl.Proof.placed[key]
		j, onGPU := pl.Proof.gpuOf[key]
		if !placed || !onGPU {
			return fmt.Sprintf("the proof finds no %s MIG device for pod %s", d.Profile, key)
		}
		i, _ := s.NodeIndex(node)
		g := &s.Nodes[i].GPUs[j]
		value, ok := "", false
		if g.DRA != nil && g.DRA.Device != "" {
			value, ok = a.constraint.Values[cluster.DeviceID(g.DRA.Driver, g.DRA.Pool, g.DRA.Device)]
		}
		if !ok {
			return fmt.Sprintf("the proof puts pod %s on GPU %d of %s, whose %s gpupack did not read", key, j, node, attr)
		}
		for _, r := range a.others {
			if need := max(1, r.Count) - takeAligned(r, node, value, a.constraint, own, taken); need > 0 {
				return fmt.Sprintf("the proof puts pod %s on GPU %d of %s (%s %s), where %d more free device(s) of request %s with that value would be needed", key, j, node, attr, placement.ValueWords(value), need, r.Name)
			}
		}
	}
	return ""
}

// takeAligned takes, for one pod, the free devices of the other driver's
// request r on node whose value of the constraint's attribute is value,
// up to the count r asks; it gives how many it took.
func takeAligned(r cluster.ClaimRequest, node, value string, k *cluster.ClaimConstraint, own, taken map[string]bool) int {
	got := 0
	for _, o := range r.Others {
		if got == max(1, r.Count) {
			break
		}
		if o.Node == node && (!o.Held || own[o.ID]) && !taken[o.ID] && k.Values[o.ID] == value {
			taken[o.ID] = true
			got++
		}
	}
	return got
}
