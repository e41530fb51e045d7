package diagnose

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// claimSelectorMemory diagnoses a claim whose request's selectors on the
// devices' capacity (device.capacity: memory) refuse the devices that its
// class and other selectors accept, so that no node has enough: memory
// when devices of the class have the capacity asked (what the request
// asks of their attributes keeps it from them), no such hardware when no
// device of the class has it. It reports false, finding nothing, when no
// failing request is refused so.
func (e *engine) claimSelectorMemory(f *Finding, p *cluster.Pod, ks []int, verdicts []classVerdict) bool {
	facts := e.claimFacts(p, ks, verdicts)
	var refused []ClaimFacts
	for _, cf := range facts {
		if sc := cf.SelectorsOnCapacity; sc != nil && sc.Rejected > 0 && cf.MostAccepted < cf.Needed {
			refused = append(refused, cf)
		}
	}
	if len(refused) == 0 {
		return false
	}
	f.Cause = NoSuchHardware
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(e.nodesOf(ks))
	f.Evidence.Claims = facts
	for _, cf := range refused {
		what := fmt.Sprintf("claim %s, request %s", cf.Claim, cf.Request)
		sc := cf.SelectorsOnCapacity
		if sc.Accepted > 0 {
			f.Cause = Memory
			f.addAdvice(fmt.Sprintf("%s: its selectors on device capacity (%s) refuse the %d device(s) of class %s that its other selectors accept, while %d device(s) of the class have the capacity: ask for less, or let the other selectors take a device that has it",
				what, strings.Join(capacitySelectors(cf.Selectors), " && "), sc.Rejected, cf.Class, sc.Accepted), adviceSelector)
			continue
		}
		f.addAdvice(fmt.Sprintf("%s: no device of class %s has the capacity that its selectors ask (%s; the class offers %s): ask for less, or add devices that have it",
			what, cf.Class, strings.Join(capacitySelectors(cf.Selectors), " && "), productList(cf.Products)), adviceHardware)
	}
	return true
}

// adviceSelector says why a selector's change is advice: its figure is the
// workload's to choose.
const adviceSelector = "how much the workload needs is its own; the selectors say what it asked"

// capacitySelectors are the selectors that read the devices' capacity.
func capacitySelectors(selectors []string) []string {
	var out []string
	for _, s := range selectors {
		if cluster.ReadsCapacity(s) {
			out = append(out, s)
		}
	}
	return out
}
