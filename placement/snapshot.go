package placement

import (
	"github.com/gpupack/gpupack/cluster"
)

// States builds the state of every node of a snapshot from its bound pods
// with RebuildNode, in snapshot order; the warnings are its Misfits, node
// by node, then those of claims' consumed capacity that cannot be read.
func States(s *cluster.Snapshot) ([]*NodeState, []string, error) {
	demands := make([][]*Demand, len(s.Nodes))
	for _, p := range s.Pods {
		if !p.Bound() {
			continue
		}
		i, _ := s.NodeIndex(p.NodeName)
		d, err := NewDemand(p, s.Catalogue)
		if err != nil {
			return nil, nil, err
		}
		demands[i] = append(demands[i], d)
	}
	states := make([]*NodeState, len(s.Nodes))
	var warnings []string
	for i, n := range s.Nodes {
		st, misfits := RebuildNode(n, demands[i])
		st.Index = i
		states[i] = st
		for _, m := range misfits {
			warnings = append(warnings, m.String())
		}
	}
	warnings = append(warnings, addClaimConsumption(s, states)...)
	return states, warnings, nil
}
