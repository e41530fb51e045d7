package diagnose

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// QuotaFacts is the evidence of a quota-exhausted finding: the quota that
// refused the workload's pod and, per GPU resource it exceeded, the
// amounts.
type QuotaFacts struct {
	Quota Object `json:"quota"`
	// Pod is the name the apiserver gave the pod it refused; Refusals how
	// many times the controller was refused.
	Pod       string          `json:"pod,omitempty"`
	Refusals  int             `json:"refusals,omitempty"`
	Resources []QuotaResource `json:"resources"`
	// Holders are the namespace's GPU pods, which the quota's usage counts.
	Holders *HolderStats `json:"holders,omitempty"`
}

// QuotaResource is one GPU resource a quota refused: what one pod asks
// for, what the quota counts as used and its hard limit (from the quota's
// status where the snapshot has it, else from the refusal), and Needed,
// the hard limit that admits the pod: Used + Requested.
type QuotaResource struct {
	Resource  string `json:"resource"`
	Requested int64  `json:"requested"`
	Used      int64  `json:"used"`
	Hard      int64  `json:"hard"`
	Needed    int64  `json:"needed"`
}

// Subject is what the finding explains: the pod's "namespace/name", or
// for a workload without pods its "kind namespace/name" (Object.String).
func (f *Finding) Subject() string {
	if f.Workload != nil {
		return f.Workload.String()
	}
	return f.Pod
}

// quotaFindings explains each workload that a ResourceQuota kept from
// creating a pod: it has no pending pod, so it is a finding of its own.
func (e *engine) quotaFindings() []Finding {
	var out []Finding
	for _, r := range e.s.QuotaRefusals {
		out = append(out, e.quotaFinding(r))
	}
	return out
}

func (e *engine) quotaFinding(r cluster.QuotaRefusal) Finding {
	w := Object{Kind: r.Workload.Kind, Namespace: r.Workload.Namespace, Name: r.Workload.Name}
	quota := Object{Kind: "ResourceQuota", Namespace: w.Namespace, Name: r.Quota}
	f := Finding{Workload: &w, Cause: QuotaExhausted, Fit: []NodeGroup{}}
	facts := &QuotaFacts{Quota: quota, Pod: r.Pod, Refusals: r.Count}
	var status *cluster.ResourceQuota
	for i := range e.s.Quotas {
		if q := &e.s.Quotas[i]; q.Namespace == w.Namespace && q.Name == r.Quota {
			status = q
		}
	}
	var asks, raise []string
	hard := map[string]string{}
	for _, res := range r.Resources() {
		x := QuotaResource{Resource: res, Requested: r.Requested[res], Used: r.Used[res], Hard: r.Limited[res]}
		if status != nil {
			if h, ok := status.Hard[res]; ok {
				x.Hard, x.Used = h, status.Used[res]
			}
		}
		x.Needed = x.Used + x.Requested
		facts.Resources = append(facts.Resources, x)
		asks = append(asks, fmt.Sprintf("%s=%d", res, x.Requested))
		if x.Needed > x.Hard {
			raise = append(raise, fmt.Sprintf("%s from %d to %d", res, x.Hard, x.Needed))
			hard[res] = strconv.FormatInt(x.Needed, 10)
		}
	}
	f.Request = strings.Join(asks, ",") + " per pod"
	var held []*cluster.Pod
	for _, p := range e.s.Pods {
		if p.Namespace == w.Namespace && p.WantsGPU() {
			held = append(held, p)
		}
	}
	var idlePods []*cluster.Pod
	if len(held) > 0 {
		facts.Holders, idlePods = e.holderStatsOf(held, need{})
	}
	f.Evidence.Quota = facts
	f.StockNote = "no pod exists for the scheduler to try: the apiserver refused to create it, over quota"
	if len(raise) == 0 {
		f.addAdvice(fmt.Sprintf("%s has room for the pod now: the %s's controller creates it on its next try", quota, strings.ToLower(w.Kind)),
			"nothing to change: the quota's usage fell since the refusal")
		return f
	}
	patch := patchOf(StrategicPatch, map[string]any{"spec": map[string]any{"hard": hard}})
	f.addFix(fmt.Sprintf("raise the hard limit of %s: %s, enough for one more pod of %s (each further pod it lacks needs %s more)", quota, strings.Join(raise, ", "), w, strings.Join(asks, ",")),
		Remedy{Kind: QuotaChange, Targets: []Object{quota}, Patch: patch,
			Commands: []string{commandLine("kubectl", "patch", "resourcequota", "-n", quota.Namespace, quota.Name, "--type="+patch.Type, "-p", string(patch.Body))},
			Note:     "a quota is the namespace's share of the cluster's GPUs: raise it only where the GPUs are there to run the pods"})
	if h := facts.Holders; h != nil && h.IdleHeld > 0 {
		var idle []string
		for _, p := range idlePods {
			idle = append(idle, p.Key())
		}
		f.addFix(fmt.Sprintf("free the quota's GPUs held by the %d idle-held pod(s) of %s (%s): they count against the quota without work", h.IdleHeld, w.Namespace, JoinNames(idle[:min(len(idle), MaxListed)], len(idle))),
			reclaimRemedy(idlePods))
	}
	return f
}
