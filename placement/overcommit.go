package placement

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// OvercommitError is a node whose bound pods ask for more GPU than it
// has: a state no cluster can be in, since the kubelet admits a pod only
// when its node has the devices it asks for.
type OvercommitError struct {
	Node string
	// Bound are the pods bound to the node with their GPU requests, as
	// "namespace/name (request)".
	Bound []string
	// Requested sums the bound requests in their units ("20 GPU, 1 MIG
	// 3g.40gb").
	Requested string
	// Capacity is what the node has ("8 x H100-80GB (exclusive)").
	Capacity string
	// Detail is the first bound pod that does not fit, and why.
	Detail string
}

func (e *OvercommitError) Error() string {
	return fmt.Sprintf("node %s is over-committed: its bound pods ask for %s (%s), but it has %s; %s. No node can run more than it has: correct the pods' node or GPU request",
		e.Node, e.Requested, strings.Join(e.Bound, ", "), e.Capacity, e.Detail)
}

// CheckBound reports the first node of the snapshot whose bound pods ask
// for more GPU than it has, as an *OvercommitError, or nil. Only GPU
// capacity counts: the pods are rebuilt onto their nodes by States with
// their GPU requests alone, onto nodes without taints, so that a taint, a selector, a CPU shortfall or
// a VRAM annotation that came after the binding is no error here.
func CheckBound(s *cluster.Snapshot) error {
	on := s.PodsOn()
	for i, n := range s.Nodes {
		if len(on[i]) == 0 {
			continue
		}
		pods := make([]*cluster.Pod, 0, len(on[i]))
		for _, p := range on[i] {
			if !p.WantsGPU() {
				continue
			}
			r := p.GPU
			if r.Kind == cluster.WholeGPUs || r.Kind == cluster.Fraction {
				r.Memory = 0 // a stated VRAM need is gpupack's, not the kubelet's
			}
			pods = append(pods, &cluster.Pod{Namespace: p.Namespace, Name: p.Name, GPU: r, NodeName: p.NodeName, Devices: p.Devices})
		}
		if len(pods) == 0 {
			continue
		}
		bare := &cluster.Node{Name: n.Name, CPU: n.CPU, Memory: n.Memory, GPUs: n.GPUs}
		one, err := cluster.NewSnapshot(s.Catalogue, []*cluster.Node{bare}, pods)
		if err != nil {
			return err
		}
		_, warnings, err := States(one)
		if err != nil {
			return err
		}
		if len(warnings) == 0 {
			continue
		}
		e := &OvercommitError{Node: n.Name, Capacity: capacityText(n), Detail: warnings[0]}
		totals := map[string]int{}
		var units []string
		for _, p := range pods {
			e.Bound = append(e.Bound, fmt.Sprintf("%s (%s)", p.Key(), p.GPU))
			unit, k := requestUnit(p.GPU)
			if _, seen := totals[unit]; !seen {
				units = append(units, unit)
			}
			totals[unit] += k
		}
		parts := make([]string, len(units))
		for k, u := range units {
			parts[k] = fmt.Sprintf("%d %s", totals[u], u)
		}
		e.Requested = strings.Join(parts, ", ") + " in all"
		return e
	}
	return nil
}

// requestUnit names the unit a request is counted in and how many of it.
func requestUnit(r cluster.Request) (string, int) {
	switch r.Kind {
	case cluster.WholeGPUs:
		if r.SharedResource {
			return "shared GPU", r.Count
		}
		return "GPU", r.Count
	case cluster.Fraction:
		return "milli-GPU", int(r.Milli)
	case cluster.GPUMemory:
		return "MiB of GPU memory", int(r.Memory)
	case cluster.MIGSlice:
		return "MIG " + r.Profile, 1
	}
	return "no GPU", 0
}

// capacityText describes a node's GPUs, runs of alike GPUs together:
// "8 x H100-80GB (exclusive)", "2 x A100-80GB (mig 3g.40gb@0,3g.40gb@4)".
func capacityText(n *cluster.Node) string {
	var parts []string
	var last string
	count := 0
	flush := func() {
		if count > 0 {
			parts = append(parts, fmt.Sprintf("%d x %s", count, last))
		}
	}
	for k := range n.GPUs {
		g := &n.GPUs[k]
		mode := g.Sharing.String()
		switch g.Sharing {
		case cluster.TimeSliced, cluster.MPS:
			mode = fmt.Sprintf("%s, %d replicas", mode, g.Replicas)
		case cluster.MIG:
			mode = fmt.Sprintf("%s %s", mode, g.Layout)
		}
		text := fmt.Sprintf("%s (%s)", g.Model.Name, mode)
		if text != last {
			flush()
			last, count = text, 0
		}
		count++
	}
	flush()
	if len(parts) == 0 {
		return "no GPU"
	}
	return strings.Join(parts, " and ")
}
