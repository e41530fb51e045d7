package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// profileSelector finds a comparison of the profile attribute (NVIDIA's
// MIG profile) with a string literal in a CEL selector.
var profileSelector = regexp.MustCompile(`(\.profile\s*==\s*)(?:'([^']*)'|"([^"]*)")`)

// counterFix: shared counters of a partitionable GPU on the nearest node
// keep the claim's devices from being made (DRAPartitionableDevices). The
// fix reclaims the fewest pods holding partitions (or the whole device) of
// that GPU, least active first, after which the claim fits there; the
// nearest change to the claim instead is the largest smaller profile that
// the node's GPUs can make now.
func (e *engine) counterFix(f *Finding, p *cluster.Pod, r *placement.ClaimShortfall, best int, holders []*cluster.Pod) {
	c := r.Counter
	node := e.s.Nodes[best]
	what := fmt.Sprintf("claim %s, request %s: on %s GPU %d the shared counter %s of counter set %s has %s left where a device of class %s needs %s (partitionable devices: the partitions and the whole GPU consume the same counters)",
		r.Claim, r.Request, node.Name, c.GPU, c.Counter, c.Set, counterAmount(c.Counter, c.Left), r.Class, counterAmount(c.Counter, c.Needed))
	names := make([]string, len(holders))
	for i, h := range holders {
		names[i] = h.Key()
	}
	switch reclaim := e.fewestToFree(p, best, holders); {
	case len(holders) == 0:
		f.addAdvice(what+"; the snapshot names no pod holding its devices", "the holders are not in the snapshot")
	case reclaim == nil:
		f.addAdvice(fmt.Sprintf("%s; held by %s, and freeing them all does not let the claim be allocated there", what, strings.Join(names, ", ")),
			"gpupack found no set of holders whose reclaim makes room")
	default:
		f.addFix(fmt.Sprintf("%s; held by %s: reclaim %d of them (least active first) and the claim can be allocated there", what, strings.Join(names, ", "), len(reclaim)), reclaimRemedy(reclaim))
	}
	if profile, from, ok := e.smallerProfile(p, r, best); ok {
		cf := ClaimFacts{Claim: r.Claim, Request: r.Request}
		req := requestOf(p, r.Claim, r.Request)
		rem := Remedy{Kind: Advice, Note: "gpupack rewrites only a single selector that compares the profile attribute"}
		if len(req.Selectors) == 1 {
			expr := profileSelector.ReplaceAllString(req.Selectors[0], "${1}'"+profile+"'")
			rem = e.claimSpecRemedy(p, cf, "selectors/0/cel/expression", expr)
		}
		f.addFix(fmt.Sprintf("or ask for the smaller profile %s in place of %s: %s can make one now", profile, from, node.Name), rem)
	}
}

// fewestToFree is the shortest prefix of holders (pods bound to node i)
// whose reclaim lets pod p fit there; nil when none does.
func (e *engine) fewestToFree(p *cluster.Pod, i int, holders []*cluster.Pod) []*cluster.Pod {
	pd, err := placement.NewDemand(p, e.s.Catalogue)
	if err != nil {
		return nil
	}
	var demands []*placement.Demand
	var owners []*cluster.Pod
	for _, q := range e.holders[i] {
		d, err := placement.NewDemand(q, e.s.Catalogue)
		if err != nil {
			continue // States refused it too; it holds nothing there
		}
		demands = append(demands, d)
		owners = append(owners, q)
	}
	for k := 1; k <= len(holders); k++ {
		var keep []*placement.Demand
		for j, d := range demands {
			if !slices.Contains(holders[:k], owners[j]) {
				keep = append(keep, d)
			}
		}
		st, _ := placement.RebuildNode(e.s.Nodes[i], keep)
		if _, rs := placement.Fit(pd, st); len(rs) == 0 {
			return holders[:k]
		}
	}
	return nil
}

// smallerProfile is the largest profile smaller than the one the request's
// selector names that a GPU of node i can make now, among the partitions
// of the request's class; false when the selector names no profile or none
// is smaller.
func (e *engine) smallerProfile(p *cluster.Pod, r *placement.ClaimShortfall, i int) (profile, from string, ok bool) {
	for _, s := range requestOf(p, r.Claim, r.Request).Selectors {
		if m := profileSelector.FindStringSubmatch(s); m != nil {
			from = m[2] + m[3]
		}
	}
	if from == "" {
		return "", "", false
	}
	n, st := e.s.Nodes[i], e.states[i]
	var want cluster.Partition
	for _, g := range n.GPUs {
		if g.DRA == nil {
			continue
		}
		for _, part := range g.DRA.Partitions {
			if part.Profile == from {
				want = part
			}
		}
	}
	var best cluster.Partition
	for gi, g := range n.GPUs {
		for _, j := range placement.MakeablePartitions(st, gi) {
			part := g.DRA.Partitions[j]
			if part.Profile != "" && part.Memory < want.Memory && part.Memory > best.Memory && slices.Contains(part.Classes, r.Class) {
				best = part
			}
		}
	}
	return best.Profile, from, best.Profile != ""
}

// counterAmount prints a counter's value, a memory counter's (bytes, as
// NVIDIA's driver counts it) with its size beside it.
func counterAmount(counter string, v int64) string {
	if counter == "memory" && v >= 1<<20 {
		return fmt.Sprintf("%d (%s)", v, gpu.MiB(v>>20))
	}
	return strconv.FormatInt(v, 10)
}

// partitionsOf counts the GPU's partitions of the class.
func partitionsOf(g *cluster.GPU, class string) int {
	n := 0
	for _, p := range g.DRA.Partitions {
		if slices.Contains(p.Classes, class) {
			n++
		}
	}
	return n
}

// makeableOf counts the partitions of the class that GPU i of the node
// can make now.
func makeableOf(st *placement.NodeState, i int, class string) int {
	n := 0
	for _, j := range placement.MakeablePartitions(st, i) {
		if slices.Contains(st.Node.GPUs[i].DRA.Partitions[j].Classes, class) {
			n++
		}
	}
	return n
}
