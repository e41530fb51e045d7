package placement

import (
	"fmt"

	"github.com/gpupack/gpupack/cluster"
)

// States builds the state of every node of a snapshot from its bound pods,
// in snapshot order. A bound pod's recorded devices are taken as they are;
// a GPU pod without recorded devices gets the default choice of Fit. A pod
// that no longer fits its node (the snapshot is overcommitted) is still
// counted, and named in the returned warnings.
func States(s *cluster.Snapshot) ([]*NodeState, []string, error) {
	states := make([]*NodeState, len(s.Nodes))
	for i, n := range s.Nodes {
		states[i] = NewNodeState(n)
		states[i].Index = i
	}
	var warnings []string
	for _, p := range s.Pods {
		if !p.Bound() {
			continue
		}
		i, _ := s.NodeIndex(p.NodeName)
		st := states[i]
		d, err := NewDemand(p, s.Catalogue)
		if err != nil {
			return nil, nil, err
		}
		if len(p.Devices) > 0 {
			gpus := make([]int, len(p.Devices))
			for k, dev := range p.Devices {
				gpus[k] = dev.GPU
			}
			a := AssignmentOn(d, st, gpus)
			for k, dev := range p.Devices {
				if dev.Slice >= 0 {
					a.Devices[k].Slice = dev.Slice
				}
			}
			st.Assign(d, a)
			continue
		}
		a, reasons := Fit(d, st)
		if len(reasons) > 0 {
			warnings = append(warnings, fmt.Sprintf("pod %s is bound to %s but does not fit there: %s", p.Key(), p.NodeName, reasons[0]))
			var buf [maxStackGPUs]int
			hosts := Hosts(d, st, buf[:0])
			if len(hosts) > d.Devices {
				hosts = hosts[:d.Devices]
			}
			a = AssignmentOn(d, st, hosts)
		}
		st.Assign(d, a)
	}
	return states, warnings, nil
}
