package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// SchedulerFacts is the scheduler a pod names and the schedulers that the
// snapshot saw serving the cluster.
type SchedulerFacts struct {
	Name    string   `json:"name"`
	Running []string `json:"running"`
}

// unreached turns the finding of a GPU pod that no scheduler considers
// into a gated or no-scheduler one: the pod has scheduling gates, or it
// names a scheduler other than the default one that the snapshot does not
// see running. gpupack's fit on the nodes stays (Fit), and what would keep
// the pod waiting once it reaches the scheduler becomes Also and the
// later fixes; the stock scheduler's message is dropped, since no
// scheduler tries the pod.
func (e *engine) unreached(f *Finding, p *cluster.Pod) {
	if f.Cause == "" {
		return // skipped: not a GPU pod
	}
	var cause Cause
	var ev Evidence
	var first Finding // the fixes of the new cause, with their remedies
	switch {
	case len(p.SchedulingGates) > 0:
		cause = Gated
		ev.Gates = slices.Clone(p.SchedulingGates)
		ev.Kueue = e.gateFixes(&first, p)
	case e.noScheduler(p):
		cause = NoScheduler
		ev.Scheduler = &SchedulerFacts{Name: p.Scheduler(), Running: slices.Clone(e.s.Schedulers)}
		others, to := "the default scheduler, "+cluster.DefaultScheduler, cluster.DefaultScheduler
		if len(e.s.Schedulers) > 0 {
			others, to = "a scheduler that runs: "+strings.Join(e.s.Schedulers, ", "), ""
			if len(e.s.Schedulers) == 1 || slices.Contains(e.s.Schedulers, cluster.DefaultScheduler) {
				to = cluster.DefaultScheduler
				if !slices.Contains(e.s.Schedulers, to) {
					to = e.s.Schedulers[0]
				}
			}
		}
		sentence := fmt.Sprintf("install and start the scheduler %q (a scheduler profile with that schedulerName), or set spec.schedulerName to %s in the workload's pod template (an existing pod's schedulerName cannot change: recreate the pod)", p.Scheduler(), others)
		if to == "" {
			first.addAdvice(sentence, "several schedulers run: which one should take the pod is a choice")
		} else {
			first.addFix(sentence, schedulerRemedy(p, to))
		}
	default:
		return
	}
	fits := 0
	for _, g := range f.Fit {
		if len(g.Reasons) == 0 {
			fits += g.NodeCount
		}
	}
	var also []Cause
	switch {
	case fits > 0:
		first.addAdvice(fmt.Sprintf("once the scheduler considers it, it fits %d of %d nodes now", fits, len(e.s.Nodes)), "nothing more to change")
	default:
		also = append([]Cause{f.Cause}, f.Also...)
		// The fixes of the cause it would have next, after these, with
		// their remedies.
		for i, line := range f.Fix {
			f.Fix[i] = "then, for " + string(f.Cause) + ": " + line
		}
		for _, r := range f.Remedies {
			r.Fix += len(first.Fix)
			first.Remedies = append(first.Remedies, r)
		}
		first.Fix = append(first.Fix, f.Fix...)
	}
	f.Cause, f.Also, f.Evidence = cause, also, ev
	f.Summary, f.StockNote = "", "no scheduler tries the pod ("+unreachedWhy(cause)+")"
	f.Fix, f.Remedies = first.Fix, first.Remedies
}

func unreachedWhy(c Cause) string {
	if c == Gated {
		return "it has scheduling gates"
	}
	return "the scheduler it names does not run"
}

// noScheduler reports whether the pod names a scheduler other than the
// default one that the snapshot knows does not run.
func (e *engine) noScheduler(p *cluster.Pod) bool {
	name := p.Scheduler()
	return name != cluster.DefaultScheduler && e.s.Schedulers != nil && !slices.Contains(e.s.Schedulers, name)
}

// gateFixes says, gate by gate, what removes it; for Kueue's admission
// gate, from Kueue's objects where the snapshot has them (the facts it
// returns).
func (e *engine) gateFixes(f *Finding, p *cluster.Pod) *KueueFacts {
	var facts *KueueFacts
	for _, g := range p.SchedulingGates {
		if g == cluster.KueueAdmissionGate && e.s.Kueue != nil {
			n := len(f.Fix)
			facts = e.kueueFacts(f, p)
			for i := n; i < len(f.Fix); i++ {
				f.Fix[i] = "gate " + g + ": " + f.Fix[i]
			}
			continue
		}
		if g == cluster.KueueAdmissionGate {
			f.addAdvice(fmt.Sprintf("gate %s: the pod waits for Kueue to admit its Workload; Kueue removes the gate once its ClusterQueue has quota for it (kubectl get workloads -n <namespace>; kubectl describe clusterqueue <name>): raise the ClusterQueue's nominalQuota or free quota held by other Workloads", g),
				"Kueue removes the gate itself, and the ClusterQueue and its quota are not in the snapshot")
			continue
		}
		f.addFix(fmt.Sprintf("gate %s: the controller that added it removes it when its condition holds; if none will, remove it", g), gateRemedy(p, g))
	}
	return facts
}
