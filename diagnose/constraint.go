package diagnose

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/placement"
)

// claimConstraint: on the nodes of ks, the devices the pod's claims ask
// for are there, but no choice of them meets a claim's constraint
// (matchAttribute or distinctAttribute). The nearest change is named on
// the node whose devices come closest: the count the constraint can give
// there, or dropping the constraint (a claim-spec patch).
func (e *engine) claimConstraint(f *Finding, p *cluster.Pod, ks []int, verdicts []classVerdict) {
	f.Cause = Placement
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(e.nodesOf(ks))
	var best *placement.ConstraintShortfall
	bestK := ks[0]
	for _, k := range ks {
		c := claimOf(verdicts[k].now).Constraint
		if best == nil || c.Reach() > best.Reach() {
			best, bestK = c, k
		}
	}
	node := e.s.Nodes[e.classes[bestK].nodes[0]].Name
	var claim cluster.Claim
	for _, c := range p.Claims {
		if c.Ref() == best.Claim {
			claim = c
		}
	}
	nearest := fmt.Sprintf("on %s, at most %d of the device(s) they accept share one value (%s = %s)", node, best.Best, best.Attribute, placement.ValueWords(best.BestValue))
	if !best.Match {
		nearest = fmt.Sprintf("on %s, the devices they accept have %d distinct value(s) of %s", node, best.Distinct, best.Attribute)
	}
	switch {
	case best.Best == 0 && best.Match && len(best.Others) > 0:
		nearest = fmt.Sprintf("no free GPU they accept on %s shares a value of %s with the free devices of request(s) %s (%s)", node, best.Attribute, strings.Join(best.Others, ", "), otherValuesWords(best))
	case best.Best == 0 && best.Match:
		nearest = fmt.Sprintf("no free device they accept on %s has %s", node, best.Attribute)
	}
	f.addFix(fmt.Sprintf("claim %s: its constraint %s %s cannot be met: the requests it covers take %d device(s); %s; free devices that share the attribute's value there, ask at most that many devices, or drop the constraint if the workload does not need it",
		best.Claim, best.Kind(), best.Attribute, best.Needed, nearest),
		claimPathPatch(p, claim, fmt.Sprintf("/spec/devices/constraints/%d", best.Index), "remove", nil))
}

// otherValuesWords says which values the other drivers' free devices have.
func otherValuesWords(f *placement.ConstraintShortfall) string {
	if len(f.OtherValues) == 0 {
		return "none free has one their GPUs could share"
	}
	words := make([]string, len(f.OtherValues))
	for i, v := range f.OtherValues {
		words[i] = placement.ValueWords(v)
	}
	return "they have " + strings.Join(words, ", ")
}
