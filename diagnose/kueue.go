package diagnose

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// KueueProblem is what keeps Kueue from admitting a gated pod's Workload.
type KueueProblem string

// The problems, in the order they are checked.
const (
	// KueueNoWorkload: no Workload owns the pod (Kueue has not made one).
	KueueNoWorkload KueueProblem = "no-workload"
	// KueueWorkloadInactive: the Workload's spec.active is false.
	KueueWorkloadInactive KueueProblem = "workload-inactive"
	// KueueReserved: Kueue has reserved quota for the Workload; the gate
	// goes once its admission checks pass.
	KueueReserved KueueProblem = "quota-reserved"
	// KueueNoLocalQueue: the Workload's LocalQueue does not exist.
	KueueNoLocalQueue KueueProblem = "no-local-queue"
	// KueueLocalQueueStopped: the LocalQueue's stopPolicy holds it.
	KueueLocalQueueStopped KueueProblem = "local-queue-stopped"
	// KueueNoClusterQueue: the LocalQueue's ClusterQueue does not exist.
	KueueNoClusterQueue KueueProblem = "no-cluster-queue"
	// KueueClusterQueueStopped: the ClusterQueue's stopPolicy holds it.
	KueueClusterQueueStopped KueueProblem = "cluster-queue-stopped"
	// KueueClusterQueueInactive: the ClusterQueue's Active condition is
	// false (a flavor or admission check it names is missing).
	KueueClusterQueueInactive KueueProblem = "cluster-queue-inactive"
	// KueueUncovered: the Workload asks for a resource that no resource
	// group of the ClusterQueue covers, so no quota admits it.
	KueueUncovered KueueProblem = "resource-not-covered"
	// KueueQuotaLacking: no flavor has the nominal quota left for what
	// the Workload asks, beside what other Workloads hold.
	KueueQuotaLacking KueueProblem = "quota-lacking"
	// KueueUsageUnknown: the ClusterQueue's status states no reservation
	// for a flavor the Workload could take, so the shortfall is unknown.
	KueueUsageUnknown KueueProblem = "usage-unknown"
	// KueueQuotaFree: a flavor has the quota left; Kueue admits the
	// Workload on its next pass unless something gpupack does not model
	// (Pending quotes Kueue) holds it.
	KueueQuotaFree KueueProblem = "quota-free"
)

// KueueFacts is the evidence of a pod that Kueue's admission gate holds:
// its Workload, queues and, flavor by flavor, what the ClusterQueue's
// quota lacks. Amounts are in Kueue's units (cluster.Kueue).
type KueueFacts struct {
	Problem      KueueProblem `json:"problem"`
	Workload     *Object      `json:"workload,omitempty"`
	LocalQueue   *Object      `json:"localQueue,omitempty"`
	ClusterQueue *Object      `json:"clusterQueue,omitempty"`
	Cohort       string       `json:"cohort,omitempty"`
	// Requests are what the Workload's pods ask for together.
	Requests map[string]int64 `json:"requests,omitempty"`
	// Pending quotes Kueue's QuotaReserved condition.
	Pending string `json:"pending,omitempty"`
	// Inactive quotes the ClusterQueue's Active condition when false.
	Inactive *cluster.KueueCondition `json:"inactive,omitempty"`
	// Uncovered are the resources asked for that no resource group of
	// the ClusterQueue covers.
	Uncovered []string `json:"uncovered,omitempty"`
	// Flavors are the flavors the Workload could take, in Kueue's order,
	// each with the figures of the resources asked for.
	Flavors []KueueFlavorFit `json:"flavors,omitempty"`
}

// KueueFlavorFit is one flavor of one resource group against what the
// Workload asks of that group's resources.
type KueueFlavorFit struct {
	Group     int                `json:"group"`
	Flavor    string             `json:"flavor"`
	Resources []KueueResourceFit `json:"resources"`
	// Fits: every resource's reservation is known and leaves room.
	Fits bool `json:"fits"`
}

// KueueResourceFit is one resource of a flavor: its nominal quota, what
// Workloads hold of it (nil: unknown), what the Workload asks, and Needed,
// the nominal quota that admits it without borrowing: Reserved +
// Requested (nil when Reserved is unknown). Lacks is Needed - Nominal
// when positive.
type KueueResourceFit struct {
	Resource       string `json:"resource"`
	Nominal        int64  `json:"nominal"`
	Reserved       *int64 `json:"reserved"`
	Requested      int64  `json:"requested"`
	Needed         *int64 `json:"needed,omitempty"`
	Lacks          int64  `json:"lacks,omitempty"`
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`
	// index is the quota's place in spec.resourceGroups: group, flavor,
	// resource.
	index [3]int
}

// kueueIndex maps each pod ("namespace/name") to the Workload it owns.
func kueueIndex(k *cluster.Kueue) map[string]*cluster.KueueWorkload {
	if k == nil {
		return nil
	}
	out := map[string]*cluster.KueueWorkload{}
	for i := range k.Workloads {
		w := &k.Workloads[i]
		for _, p := range w.Pods {
			out[w.Namespace+"/"+p] = w
		}
	}
	return out
}

// kueueFit judges what a Workload asks against a ClusterQueue's quota,
// flavor by flavor: per resource group that covers some resource asked
// for, each of its flavors with the figures of those resources. Asked
// resources that no group covers are uncovered. Borrowing from the cohort
// is not counted: Needed is the nominal quota that admits the Workload on
// the ClusterQueue's own quota.
func kueueFit(cq *cluster.KueueClusterQueue, asks map[string]int64) (fits []KueueFlavorFit, uncovered []string) {
	groupOf := map[string]int{}
	for _, q := range cq.Quotas {
		if _, ok := groupOf[q.Resource]; !ok {
			groupOf[q.Resource] = q.Group
		}
	}
	byGroup := map[int][]string{}
	for _, r := range slices.Sorted(maps.Keys(asks)) {
		if asks[r] <= 0 {
			continue
		}
		g, ok := groupOf[r]
		if !ok {
			uncovered = append(uncovered, r)
			continue
		}
		byGroup[g] = append(byGroup[g], r)
	}
	// Flavors of each group in spec order, with the place of each quota
	// in spec.resourceGroups[group].flavors[flavor].resources[resource].
	type gf struct {
		group  int
		flavor string
	}
	var order []gf
	flavorIndex := map[gf]int{}
	perGroup := map[int]int{}
	resources := map[gf]int{}
	places := map[gf]map[string][2]int{}
	for _, q := range cq.Quotas {
		k := gf{q.Group, q.Flavor}
		if _, ok := flavorIndex[k]; !ok {
			flavorIndex[k] = perGroup[q.Group]
			perGroup[q.Group]++
			order = append(order, k)
			places[k] = map[string][2]int{}
		}
		if _, ok := places[k][q.Resource]; !ok {
			places[k][q.Resource] = [2]int{flavorIndex[k], resources[k]}
		}
		resources[k]++
	}
	for _, o := range order {
		rs := byGroup[o.group]
		if len(rs) == 0 {
			continue
		}
		fit := KueueFlavorFit{Group: o.group, Flavor: o.flavor, Fits: true}
		for _, r := range rs {
			x := KueueResourceFit{Resource: r, Requested: asks[r]}
			q := quotaOf(cq, o.group, o.flavor, r)
			if q != nil {
				x.Nominal, x.BorrowingLimit = q.Nominal, q.BorrowingLimit
				if q.Reserved != nil {
					reserved := *q.Reserved
					x.Reserved = &reserved
				}
				p := places[o][r]
				x.index = [3]int{o.group, p[0], p[1]}
			} else {
				// The flavor lists no quota of the resource: Kueue counts
				// none, and none is held.
				zero := int64(0)
				x.Reserved = &zero
				x.index = [3]int{-1, -1, -1}
			}
			if x.Reserved != nil {
				needed := *x.Reserved + x.Requested
				x.Needed = &needed
				x.Lacks = max(0, needed-x.Nominal)
				fit.Fits = fit.Fits && x.Lacks == 0
			} else {
				fit.Fits = false
			}
			fit.Resources = append(fit.Resources, x)
		}
		fits = append(fits, fit)
	}
	return fits, uncovered
}

func quotaOf(cq *cluster.KueueClusterQueue, group int, flavor, resource string) *cluster.KueueQuota {
	for i := range cq.Quotas {
		if q := &cq.Quotas[i]; q.Group == group && q.Flavor == flavor && q.Resource == resource {
			return q
		}
	}
	return nil
}

// kueueFacts explains a pod that Kueue's admission gate holds, from
// Kueue's objects: the Workload that owns the pod, its LocalQueue and
// ClusterQueue, and what keeps Kueue from admitting it, with the fixes.
// It needs Kueue in the snapshot; the caller gives general advice
// without.
func (e *engine) kueueFacts(f *Finding, p *cluster.Pod) *KueueFacts {
	k := e.s.Kueue
	facts := &KueueFacts{}
	w := e.workloads[p.Key()]
	if w == nil {
		facts.Problem = KueueNoWorkload
		queue := p.Labels[cluster.KueueQueueLabel]
		why := "no Workload owns the pod: Kueue's controller makes one for each pod it gates (the pod integration), so check that it runs (kubectl -n kueue-system get pods) and that the pod integration is enabled in its configuration"
		if queue != "" && k.LocalQueue(p.Namespace, queue) == nil {
			lq := Object{Kind: "LocalQueue", Namespace: p.Namespace, Name: queue}
			facts.LocalQueue = &lq
			why += fmt.Sprintf("; the pod's %s label names %s, which does not exist", cluster.KueueQueueLabel, lq)
		}
		f.addAdvice(why, "what keeps Kueue's controller from making the Workload is outside the cluster's Kueue objects")
		return facts
	}
	wo := Object{Kind: "Workload", Namespace: w.Namespace, Name: w.Name}
	facts.Workload, facts.Requests, facts.Pending = &wo, w.Requests, w.Pending
	lq := Object{Kind: "LocalQueue", Namespace: w.Namespace, Name: w.Queue}
	facts.LocalQueue = &lq
	switch {
	case w.Inactive:
		facts.Problem = KueueWorkloadInactive
		patch := patchOf(JSONPatch, []patchOp{{Op: "replace", Path: "/spec/active", Value: true}})
		f.addFix(fmt.Sprintf("%s is deactivated (spec.active: false): activate it", wo), kueuePatch(wo, patch, "Kueue deactivates a Workload that it evicted too often or that exceeded its maximum execution time; reactivate it only once that is dealt with"))
		return facts
	case w.ClusterQueue != "":
		facts.Problem = KueueReserved
		facts.ClusterQueue = &Object{Kind: "ClusterQueue", Name: w.ClusterQueue}
		f.addAdvice(fmt.Sprintf("Kueue has reserved quota for %s in clusterqueue %s: it removes the gate once the Workload's admission checks pass (kubectl -n %s get workload %s -o yaml: status.admissionChecks)", wo, w.ClusterQueue, w.Namespace, w.Name),
			"admission checks are outside what gpupack reads")
		return facts
	}
	local := k.LocalQueue(w.Namespace, w.Queue)
	if local == nil {
		facts.Problem = KueueNoLocalQueue
		e.noLocalQueue(f, lq)
		return facts
	}
	cqo := Object{Kind: "ClusterQueue", Name: local.ClusterQueue}
	facts.ClusterQueue = &cqo
	if cluster.Stopped(local.StopPolicy) {
		facts.Problem = KueueLocalQueueStopped
		f.addFix(fmt.Sprintf("%s is stopped (stopPolicy %s): set its stopPolicy to None", lq, local.StopPolicy),
			kueuePatch(lq, stopPatch(local.StopPolicy), "a queue is stopped on purpose (maintenance, a budget): resume it only once that is over"))
		return facts
	}
	cq := k.ClusterQueue(local.ClusterQueue)
	if cq == nil {
		facts.Problem = KueueNoClusterQueue
		f.addAdvice(fmt.Sprintf("%s points at %s, which does not exist: create it with quota for %s, or point the LocalQueue at a ClusterQueue that exists (%s)", lq, cqo, formatAmounts(w.Requests), existing(k)),
			"a ClusterQueue's flavors and quotas are the cluster's policy, a choice gpupack cannot make")
		return facts
	}
	facts.Cohort = cq.Cohort
	if cluster.Stopped(cq.StopPolicy) {
		facts.Problem = KueueClusterQueueStopped
		f.addFix(fmt.Sprintf("%s is stopped (stopPolicy %s): set its stopPolicy to None", cqo, cq.StopPolicy),
			kueuePatch(cqo, stopPatch(cq.StopPolicy), "a queue is stopped on purpose (maintenance, a budget): resume it only once that is over"))
		return facts
	}
	missing := missingFlavors(k, cq)
	if a := cq.Active; (a != nil && !a.Status) || len(missing) > 0 {
		facts.Problem = KueueClusterQueueInactive
		if a != nil && !a.Status {
			cond := *a
			facts.Inactive = &cond
		}
		e.inactive(f, cqo, cq, missing)
		return facts
	}
	facts.Flavors, facts.Uncovered = kueueFit(cq, w.Requests)
	if len(facts.Uncovered) > 0 {
		facts.Problem = KueueUncovered
		var asks []string
		for _, r := range facts.Uncovered {
			asks = append(asks, r+"="+cluster.FormatKueueAmount(r, w.Requests[r]))
		}
		f.addAdvice(fmt.Sprintf("%s covers no quota of %s, which %s asks for: add it to the coveredResources of a resource group, with a nominalQuota of at least that in each of the group's flavors", cqo, strings.Join(asks, ", "), wo),
			"which resource group and flavors should cover a new resource is the cluster's policy")
		return facts
	}
	e.quotaFixes(f, facts, cqo, cq)
	return facts
}

// quotaFixes judges the flavors: one that fits says Kueue admits the
// Workload on its next pass; else the flavor of each resource group that
// lacks the fewest resources (Kueue's order among equals) gets its
// nominal quota raised to what admits the Workload.
func (e *engine) quotaFixes(f *Finding, facts *KueueFacts, cqo Object, cq *cluster.KueueClusterQueue) {
	best := map[int]*KueueFlavorFit{}
	var groups []int
	unknown := false
	for i := range facts.Flavors {
		fl := &facts.Flavors[i]
		b, seen := best[fl.Group]
		if !seen {
			groups = append(groups, fl.Group)
		}
		if !seen || lacking(fl) < lacking(b) {
			best[fl.Group] = fl
		}
	}
	admits := true
	for _, g := range groups {
		b := best[g]
		if !b.Fits {
			admits = false
		}
		for _, x := range b.Resources {
			if x.Reserved == nil {
				unknown = true
			}
		}
	}
	switch {
	case admits:
		facts.Problem = KueueQuotaFree
		why := "nothing gpupack models holds it"
		if facts.Pending != "" {
			why = "Kueue says: " + facts.Pending
		}
		f.addAdvice(fmt.Sprintf("%s has the quota for %s now: Kueue admits it on its next pass unless something outside quota holds it (%s)", cqo, facts.Workload, why),
			"preemption, fair sharing and admission checks are outside what gpupack models")
		return
	case unknown:
		facts.Problem = KueueUsageUnknown
		f.addAdvice(fmt.Sprintf("%s's status states no reservation for the flavors %s could take, so what its quota lacks is unknown (is Kueue's controller running? kubectl describe clusterqueue %s)", cqo, facts.Workload, cq.Name),
			"without the ClusterQueue's reservation the shortfall cannot be computed")
		return
	}
	facts.Problem = KueueQuotaLacking
	var ops []patchOp
	var raise []string
	pathless := false // a flavor lists no quota of a resource: no path to replace
	for _, g := range groups {
		b := best[g]
		for _, x := range b.Resources {
			if x.Lacks == 0 {
				continue
			}
			raise = append(raise, fmt.Sprintf("nominalQuota of flavor %s for %s from %s to %s (%s held by other Workloads + %s asked)", b.Flavor, x.Resource,
				cluster.FormatKueueAmount(x.Resource, x.Nominal), cluster.FormatKueueAmount(x.Resource, *x.Needed),
				cluster.FormatKueueAmount(x.Resource, *x.Reserved), cluster.FormatKueueAmount(x.Resource, x.Requested)))
			if x.index[0] < 0 {
				pathless = true
				continue
			}
			at := fmt.Sprintf("/spec/resourceGroups/%d/flavors/%d", x.index[0], x.index[1])
			res := fmt.Sprintf("%s/resources/%d", at, x.index[2])
			ops = append(ops, patchOp{Op: "test", Path: at + "/name", Value: b.Flavor},
				patchOp{Op: "test", Path: res + "/name", Value: x.Resource},
				patchOp{Op: "replace", Path: res + "/nominalQuota", Value: cluster.FormatKueueAmount(x.Resource, *x.Needed)})
		}
	}
	sentence := fmt.Sprintf("raise in %s the %s, enough to admit %s", cqo, strings.Join(raise, "; "), facts.Workload)
	note := "a ClusterQueue's nominal quota should be what the cluster's nodes can run: raise it only where the GPUs are there"
	if facts.Cohort != "" {
		note += fmt.Sprintf("; it is in cohort %s, so it may also borrow unused quota of the cohort's other ClusterQueues (up to its borrowingLimit), which gpupack does not count", facts.Cohort)
	}
	if pathless {
		f.addAdvice(sentence, "a flavor of the ClusterQueue lists no quota of the resource: add it to the flavor's resources")
		return
	}
	f.addFix(sentence, kueuePatch(cqo, patchOf(JSONPatch, ops), note))
}

// lacking counts a flavor's resources that lack quota, or whose
// reservation is unknown.
func lacking(fl *KueueFlavorFit) int {
	n := 0
	for _, x := range fl.Resources {
		if x.Reserved == nil || x.Lacks > 0 {
			n++
		}
	}
	return n
}

// noLocalQueue says to create the LocalQueue: a manifest pointing at the
// one ClusterQueue there is, or advice when there are several or none.
func (e *engine) noLocalQueue(f *Finding, lq Object) {
	k := e.s.Kueue
	sentence := fmt.Sprintf("%s does not exist: create it, pointing at a ClusterQueue (%s)", lq, existing(k))
	if len(k.ClusterQueues) != 1 {
		f.addAdvice(sentence, "which ClusterQueue a namespace's queue draws on is the cluster's policy, a choice gpupack cannot make")
		return
	}
	cq := k.ClusterQueues[0].Name
	config := fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: %s\n  name: %s\nspec:\n  clusterQueue: %s\n", lq.Namespace, lq.Name, cq)
	f.addFix(sentence, Remedy{Kind: KueueChange, Targets: []Object{lq}, Config: config,
		Note: fmt.Sprintf("apply the manifest (kubectl apply -f); it points at %s, the only ClusterQueue", cq)})
}

// inactive explains a ClusterQueue whose Active condition is false: a
// ResourceFlavor it names is missing (a manifest creates it), or another
// reason Kueue states.
func (e *engine) inactive(f *Finding, cqo Object, cq *cluster.KueueClusterQueue, missing []string) {
	if len(missing) > 0 {
		var config strings.Builder
		var targets []Object
		for i, fl := range missing {
			if i > 0 {
				config.WriteString("---\n")
			}
			fmt.Fprintf(&config, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: %s\n", fl)
			targets = append(targets, Object{Kind: "ResourceFlavor", Name: fl})
		}
		f.addFix(fmt.Sprintf("%s names the flavor(s) %s, which do not exist, so it admits nothing: create them (or remove them from its resourceGroups)", cqo, strings.Join(missing, ", ")),
			Remedy{Kind: KueueChange, Targets: targets, Config: config.String(),
				Note: "apply the manifest (kubectl apply -f); an empty ResourceFlavor matches every node; give it the nodeLabels (and taints) of the nodes it stands for before applying"})
		return
	}
	a := cq.Active
	f.addAdvice(fmt.Sprintf("%s is inactive (%s: %s): mend what Kueue names", cqo, a.Reason, a.Message),
		"the ClusterQueue's condition names an object outside what gpupack reads (an admission check, a topology)")
}

// missingFlavors lists the flavors the ClusterQueue names that are not
// ResourceFlavors, when the snapshot lists ResourceFlavors at all.
func missingFlavors(k *cluster.Kueue, cq *cluster.KueueClusterQueue) []string {
	if k.Flavors == nil {
		return nil
	}
	var out []string
	for _, q := range cq.Quotas {
		if !slices.Contains(k.Flavors, q.Flavor) && !slices.Contains(out, q.Flavor) {
			out = append(out, q.Flavor)
		}
	}
	return out
}

// existing lists the ClusterQueues for a message.
func existing(k *cluster.Kueue) string {
	if len(k.ClusterQueues) == 0 {
		return "there is none"
	}
	var names []string
	for _, q := range k.ClusterQueues {
		names = append(names, q.Name)
	}
	return "there are: " + JoinNames(names[:min(len(names), MaxListed)], len(names))
}

// formatAmounts writes requests as "cpu=4, nvidia.com/gpu=2", by name.
func formatAmounts(m map[string]int64) string {
	var out []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		out = append(out, r+"="+cluster.FormatKueueAmount(r, m[r]))
	}
	if len(out) == 0 {
		return "what it asks"
	}
	return strings.Join(out, ", ")
}

// stopPatch resumes a stopped queue.
func stopPatch(from string) *Patch {
	return patchOf(JSONPatch, []patchOp{{Op: "test", Path: "/spec/stopPolicy", Value: from}, {Op: "replace", Path: "/spec/stopPolicy", Value: "None"}})
}

// kueuePatch applies a JSON patch to a Kueue object. Kueue's objects are
// custom resources, which take no strategic merge patch.
func kueuePatch(o Object, patch *Patch, note string) Remedy {
	args := []string{"kubectl", "patch", strings.ToLower(o.Kind)}
	if o.Namespace != "" {
		args = append(args, "-n", o.Namespace)
	}
	args = append(args, o.Name, "--type="+patch.Type, "-p", string(patch.Body))
	return Remedy{Kind: KueueChange, Targets: []Object{o}, Patch: patch, Commands: []string{commandLine(args...)}, Note: note}
}
