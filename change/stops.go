package change

import (
	"cmp"
	"slices"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/plan"
)

// workloadOf maps each GPU pod to its workload.
func workloadOf(s *cluster.Snapshot) map[*cluster.Pod]*plan.Workload {
	out := map[*cluster.Pod]*plan.Workload{}
	for _, w := range plan.Workloads(s, nil) {
		for _, p := range w.Pods {
			out[p] = w
		}
	}
	return out
}

// podsByNode lists the bound pods of each node.
func podsByNode(s *cluster.Snapshot) map[string][]*cluster.Pod {
	out := map[string][]*cluster.Pod{}
	for _, p := range s.Pods {
		if p.Bound() {
			out[p.NodeName] = append(out[p.NodeName], p)
		}
	}
	return out
}

// stops lists the pods of node n that must stop before its switch, sorted
// by pod: on a re-partition every pod holding a device-plugin GPU resource
// (DRA: every pod holding a touched GPU); otherwise the excess of each
// resource the new config offers less of, chosen among its holders from
// the last by name, so that a replica set keeps its first pods.
func stops(n *cluster.Node, pods []*cluster.Pod, node Node, owners map[*cluster.Pod]*plan.Workload) []Stop {
	var out []Stop
	add := func(p *cluster.Pod, why string) {
		r, count := Resource(p)
		st := Stop{Pod: cluster.PodKey{Namespace: p.Namespace, Name: p.Name}, Resource: r, Count: count, Why: why}
		if r == "" { // a DRA pod: the GPUs of its devices
			st.Resource, st.Count = "dra", len(p.Devices)
		}
		for _, d := range p.Devices {
			st.GPUs += heldShare(n, d)
		}
		if len(p.Devices) == 0 {
			st.GPUs = requestShare(n, r, count)
		}
		if w := owners[p]; w != nil {
			st.Owner, st.Job = w.Key, w.Job
		}
		out = append(out, st)
	}
	touched := map[int]bool{}
	for _, g := range node.GPUs {
		touched[g.Index] = true
	}
	switch {
	case node.DRA:
		for _, p := range pods {
			if p.UsesDRA() && slices.ContainsFunc(p.Devices, func(d cluster.Device) bool { return touched[d.GPU] }) {
				add(p, ForRepartition)
			}
		}
	case node.Repartition:
		for _, p := range pods {
			if r, _ := Resource(p); r != "" {
				add(p, ForRepartition)
			}
		}
	default:
		excess := Excess(node.Allocatable, pods)
		byName := slices.Clone(pods)
		slices.SortFunc(byName, func(a, b *cluster.Pod) int { return cmp.Compare(b.Key(), a.Key()) })
		for _, p := range byName {
			r, count := Resource(p)
			if r != "" && excess[r] > 0 {
				excess[r] -= int64(count)
				add(p, ForExcess)
			}
		}
	}
	slices.SortFunc(out, func(a, b Stop) int { return cmp.Compare(a.Pod.String(), b.Pod.String()) })
	return out
}

// fits lists the pending GPU pods that the proof places on the node.
func fits(s *cluster.Snapshot, pl *plan.Plan, node string) []cluster.PodKey {
	var out []cluster.PodKey
	for _, p := range s.Pods {
		if p.Bound() || !p.WantsGPU() {
			continue
		}
		key := cluster.PodKey{Namespace: p.Namespace, Name: p.Name}
		if on, ok := pl.Proof.PlacedOn(key); ok && on == node {
			out = append(out, key)
		}
	}
	return out
}

// heldShare is the share of a GPU a device holds: its compute share when
// recorded, else what its GPU's configuration gives one holder (a whole
// GPU, one of its time slices or MPS clients, or its MIG slice's compute
// slices).
func heldShare(n *cluster.Node, d cluster.Device) float64 {
	if d.Milli > 0 {
		return float64(d.Milli) / float64(gpu.WholeGPU)
	}
	if d.GPU < 0 || d.GPU >= len(n.GPUs) {
		return 0
	}
	g := n.GPUs[d.GPU]
	if g.Sharing == cluster.MIG && g.Model != nil && g.Model.MIG != nil && d.Slice >= 0 && d.Slice < len(g.Layout) {
		if p, ok := g.Model.MIG.Profile(g.Layout[d.Slice].Profile); ok && g.Model.MIG.ComputeSlices > 0 {
			return float64(p.Compute) / float64(g.Model.MIG.ComputeSlices)
		}
	}
	return 1 / float64(max(1, g.Shares()))
}

// requestShare is the share of GPUs a pod with no recorded devices holds:
// count times what one of the resource is on the node's first GPU that
// offers it.
func requestShare(n *cluster.Node, resource string, count int) float64 {
	for i, g := range n.GPUs {
		if g.DRA != nil {
			continue
		}
		switch {
		case g.Sharing == cluster.MIG:
			for j, sl := range g.Layout {
				if resourceMIGPrefix+sl.Profile == resource {
					return float64(count) * heldShare(n, cluster.Device{GPU: i, Slice: j})
				}
			}
		case Offered([]cluster.GPU{g})[resource] > 0:
			return float64(count) * heldShare(n, cluster.Device{GPU: i, Slice: -1})
		}
	}
	return 0
}
