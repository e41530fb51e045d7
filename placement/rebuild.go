package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// Misfit is a bound pod that RebuildNode could not take as it stands: its
// recorded devices were not trusted, or the node cannot hold it where it
// is bound (the node is overcommitted). The pod is counted anyway.
type Misfit struct {
	Pod *cluster.Pod
	// Rejected is the record that was not trusted: it names a GPU, slice
	// or share that the node does not have, that does not suit the pod, or
	// that a pod earlier in RebuildNode's order holds. Nil when the record,
	// if any, was taken.
	Rejected []cluster.Device
	// Reason is why the node cannot hold the pod, as Fit gives it; nil
	// when it can.
	Reason *Reason
}

func (m Misfit) String() string {
	var parts []string
	if m.Rejected != nil {
		parts = append(parts, fmt.Sprintf("pod %s: its recorded devices (%s) name a GPU, MIG slice or share that node %s does not have or that another pod holds; it is placed as if it had none", m.Pod.Key(), devicesString(m.Rejected), m.Pod.NodeName))
	}
	if m.Reason != nil {
		parts = append(parts, fmt.Sprintf("pod %s is bound to %s but does not fit there: %s", m.Pod.Key(), m.Pod.NodeName, *m.Reason))
	}
	return strings.Join(parts, "; ")
}

func devicesString(devices []cluster.Device) string {
	parts := make([]string, len(devices))
	for i, d := range devices {
		parts[i] = "GPU " + strconv.Itoa(d.GPU)
		if d.Slice >= 0 {
			parts[i] += " slice " + strconv.Itoa(d.Slice)
		}
	}
	return strings.Join(parts, ", ")
}

// RebuildNode builds the state of node n from the demands of the pods bound
// to it. It is the one rule by which gpupack decides which pod holds which
// GPU, MIG slice or replica, for every caller: diagnose and plan (through
// States, over the live loader's snapshot or a snapshot file) and the
// scheduler plugin.
//
//  1. Pods with recorded devices (cluster.Pod.Devices: the annotation
//     wellknown.AnnotationGPUDevices, a snapshot file's devices, the
//     plugin's reservation) take exactly those, as AssignmentAt checks
//     them. A record that names a device the node lacks, that does not
//     suit the pod, or a share that an earlier record took, is not
//     trusted: the pod joins step 2, and a Misfit says so.
//  2. The other pods get Fit's default choice among the GPUs that can
//     host them. A pod that the node cannot hold (an overcommitted node, a
//     taint added after it was bound) is still counted, on the GPUs that
//     can take it, and a Misfit gives Fit's first reason. A cordon is no
//     such reason: it keeps new pods off, not those bound before it.
//
// Within each step pods go in key order (namespace/name), so the result
// does not depend on the order in which a caller lists them: the
// apiserver lists pods by key, the scheduler's NodeInfo by arrival.
func RebuildNode(n *cluster.Node, demands []*Demand) (*NodeState, []Misfit) {
	st := NewNodeState(n)
	byKey := func(a, b *Demand) int { return cmp.Compare(a.Pod.Key(), b.Pod.Key()) }
	var recorded, rest []*Demand
	for _, d := range demands {
		if d.Devices > 0 && len(d.Pod.Devices) > 0 {
			recorded = append(recorded, d)
		} else {
			rest = append(rest, d)
		}
	}
	slices.SortStableFunc(recorded, byKey)
	var misfits []Misfit
	rejected := map[*Demand]int{} // index in misfits
	for _, d := range recorded {
		if a, ok := AssignmentAt(d, st, d.Pod.Devices); ok {
			st.Assign(d, a)
			continue
		}
		rejected[d] = len(misfits)
		misfits = append(misfits, Misfit{Pod: d.Pod, Rejected: d.Pod.Devices})
		rest = append(rest, d)
	}
	slices.SortStableFunc(rest, byKey)
	for _, d := range rest {
		a, reasons := Fit(d, st)
		reasons = slices.DeleteFunc(reasons, func(r Reason) bool { return r.Code == NodeUnschedulable })
		if len(reasons) == 0 && a.Devices == nil && d.Devices > 0 {
			// Only the cordon stopped Fit, and a cordon keeps new pods off,
			// not the pods bound before it: place the pod as Fit would.
			var buf [maxStackGPUs]int
			a = AssignmentOn(d, st, pickDefault(d, st, Hosts(d, st, buf[:0])))
		}
		if len(reasons) > 0 {
			r := reasons[0]
			if i, ok := rejected[d]; ok {
				misfits[i].Reason = &r
			} else {
				misfits = append(misfits, Misfit{Pod: d.Pod, Reason: &r})
			}
			if d.Devices > 0 {
				var buf [maxStackGPUs]int
				hosts := Hosts(d, st, buf[:0])
				if len(hosts) >= d.Devices {
					hosts = pickDefault(d, st, hosts)
				}
				a = AssignmentOn(d, st, hosts)
			}
		}
		st.Assign(d, a)
	}
	return st, misfits
}
