package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// The node labels that name a node pool, tried in order; nodes without one
// are pooled by GPU model.
var poolLabels = []string{wellknown.LabelPool, "karpenter.sh/nodepool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool"}

// The labels the NVIDIA GPU operator reads to configure a node, and the
// mig-parted configuration that disables MIG (package gpuoperator's).
const (
	DevicePluginConfigLabel = gpuoperator.DevicePluginConfigLabel
	MIGConfigLabel          = gpuoperator.MIGConfigLabel
	MIGDisabled             = gpuoperator.MIGDisabled
)

// pool is the nodes of one pool with one GPU model, and what the plan puts
// on them.
type pool struct {
	name     string
	model    *gpu.Model
	nodes    []int // snapshot indices
	perNode  int   // GPUs per node (the most on any of its nodes)
	conflict bool  // a pool made only of conflicting nodes: left unchanged
	// dra: the pool's GPUs are offered through DRA (a ResourceSlice), so
	// the plan shares them with ResourceClaims rather than device plugin
	// configs.
	dra bool
	// what the plan puts on the pool
	decisions []*Decision
}

// pools groups the GPU nodes by pool label and model. Nodes whose GPUs mix
// models or sharing modes, or whose MIG label contradicts their GPUs, are
// put in no pool (the plan leaves them unchanged) and named in a warning.
func pools(s *cluster.Snapshot) ([]*pool, map[int]*pool, []string) {
	var warnings []string
	byName := map[string]*pool{}
	var out []*pool
	of := map[int]*pool{}
	conflict := &pool{name: "unchanged", conflict: true}
	labelled := map[string]map[string]bool{} // pool label value -> models
	for _, n := range s.Nodes {
		if v := firstNodeLabel(n); v != "" && len(n.GPUs) > 0 {
			if labelled[v] == nil {
				labelled[v] = map[string]bool{}
			}
			labelled[v][n.GPUs[0].Model.Name] = true
		}
	}
	for i, n := range s.Nodes {
		if len(n.GPUs) == 0 {
			continue
		}
		if why := nodeConflict(n); why != "" {
			warnings = append(warnings, fmt.Sprintf("node %s: %s; the plan leaves it unchanged", n.Name, why))
			of[i] = conflict
			continue
		}
		m := n.GPUs[0].Model
		name := gpuoperator.ConfigName(m.Name)
		if v := firstNodeLabel(n); v != "" {
			name = gpuoperator.ConfigName(v)
			if len(labelled[v]) > 1 {
				name = gpuoperator.ConfigName(v, m.Name)
			}
		}
		// DRA nodes never share a pool with device plugin nodes: their
		// GPUs are shared by other means.
		dra := n.GPUs[0].DRA != nil
		if dra {
			name = gpuoperator.ConfigName(name, "dra")
		}
		p, ok := byName[name]
		if !ok {
			p = &pool{name: name, model: m, dra: dra}
			byName[name] = p
			out = append(out, p)
			if m.Unlisted {
				warnings = append(warnings, fmt.Sprintf("pool %s: GPU model %s is not in gpupack's catalogue, so the plan shares its GPUs by time-slicing or MPS only (its MIG geometry is unknown); add the model to a --catalogue file to plan MIG layouts", name, m.Name))
			}
		}
		p.nodes = append(p.nodes, i)
		p.perNode = max(p.perNode, len(n.GPUs))
		of[i] = p
	}
	return out, of, warnings
}

func firstNodeLabel(n *cluster.Node) string {
	for _, k := range poolLabels {
		if v := n.Labels[k]; v != "" {
			return v
		}
	}
	return ""
}

// nodeConflict says what makes a node unsafe to reconfigure, or "".
func nodeConflict(n *cluster.Node) string {
	modes := map[cluster.Sharing]bool{}
	for _, g := range n.GPUs {
		if g.Model != n.GPUs[0].Model {
			return fmt.Sprintf("GPUs of two models (%s and %s)", n.GPUs[0].Model.Name, g.Model.Name)
		}
		if (g.DRA == nil) != (n.GPUs[0].DRA == nil) {
			return "some of its GPUs are offered through DRA and some by the device plugin"
		}
		if g.Sharing != cluster.Exclusive {
			modes[g.Sharing] = true
		}
	}
	if len(modes) > 1 {
		var names []string
		for m := range modes {
			names = append(names, m.String())
		}
		sort.Strings(names)
		return fmt.Sprintf("its GPUs mix sharing strategies (%s); the device plugin applies one per node", strings.Join(names, " and "))
	}
	label, hasLabel := n.Labels[MIGConfigLabel]
	switch {
	case hasLabel && label != MIGDisabled && !modes[cluster.MIG]:
		return fmt.Sprintf("label %s=%s asks for MIG but no GPU is partitioned", MIGConfigLabel, label)
	case hasLabel && label == MIGDisabled && modes[cluster.MIG]:
		return fmt.Sprintf("label %s=%s but its GPUs are partitioned", MIGConfigLabel, label)
	}
	if v := n.Labels[DevicePluginConfigLabel]; v != "" && modes[cluster.MIG] && strings.Contains(v, "time-slic") {
		return fmt.Sprintf("label %s=%s asks for time-slicing but its GPUs are partitioned by MIG", DevicePluginConfigLabel, v)
	}
	return ""
}
