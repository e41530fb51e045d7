package diagnose

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// RemedyKind says what a remedy changes.
type RemedyKind string

// The kinds of remedy.
const (
	// PodSpec changes the pod's scheduling rules (nodeSelector, required
	// node affinity, tolerations, schedulerName): Patch is a JSON patch of
	// the Pod. Commands apply it in place only where the API lets a pending
	// pod change so (it may gain tolerations); otherwise it goes into the
	// pod template of the workload that made the pod.
	PodSpec RemedyKind = "pod-spec"
	// SchedulingGate removes one scheduling gate from the pod, in place: a
	// strategic merge patch that deletes the gate by name.
	SchedulingGate RemedyKind = "scheduling-gate"
	// QuotaChange raises a ResourceQuota's hard limits: Patch is a
	// strategic merge patch of the ResourceQuota, and Commands apply it.
	QuotaChange RemedyKind = "quota"
	// KueueChange changes a Kueue object: Patch is a JSON patch of a
	// Workload, LocalQueue or ClusterQueue (custom resources take no
	// strategic merge patch) and Commands apply it, or Config is a
	// manifest of the object to create.
	KueueChange RemedyKind = "kueue"
	// NodeChange changes a node with Commands (kubectl uncordon).
	NodeChange RemedyKind = "node"
	// Reclaim deletes the pods that hold GPUs without work: Commands.
	Reclaim RemedyKind = "reclaim"
	// MIGConfig is a mig-parted configuration (Config) and the command
	// that labels the node to select it.
	MIGConfig RemedyKind = "mig-config"
	// Advice is a fix that no change written down from the evidence alone
	// carries out (which GPUs to buy, whether to quantise, which quota to
	// raise): it has no artifact, and Note says why.
	Advice RemedyKind = "advice"
)

// Remedy is what one fix sentence asks for, in a form a person can apply:
// a patch of a Kubernetes object, kubectl commands, or a configuration
// fragment, each derived exactly from the evidence. Every fix has at least
// one; a fix that is advice has one of kind Advice and no artifact.
type Remedy struct {
	// Fix is the index in Finding.Fix of the sentence it carries out.
	Fix     int        `json:"fix"`
	Kind    RemedyKind `json:"kind"`
	Targets []Object   `json:"targets,omitempty"`
	// Patch is a patch of the one target, as `kubectl patch --type` takes it.
	Patch *Patch `json:"patch,omitempty"`
	// Config is a configuration file (YAML) to add where Note says.
	Config string `json:"config,omitempty"`
	// Commands are shell command lines, run in order, each word quoted for
	// a POSIX shell where it needs it.
	Commands []string `json:"commands,omitempty"`
	// Note says what to know before applying it, or why there is nothing
	// to apply.
	Note string `json:"note,omitempty"`
}

// Object names a Kubernetes object.
type Object struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is "kind namespace/name", or "kind name" for a cluster-scoped
// object.
func (o Object) String() string {
	if o.Namespace == "" {
		return strings.ToLower(o.Kind) + " " + o.Name
	}
	return strings.ToLower(o.Kind) + " " + o.Namespace + "/" + o.Name
}

// Patch is a patch of an object: Type "json" is a JSON patch (RFC 6902),
// "strategic" a Kubernetes strategic merge patch.
type Patch struct {
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

// The patch types, as `kubectl patch --type` names them.
const (
	JSONPatch      = "json"
	StrategicPatch = "strategic"
)

// addFix appends a fix sentence and the remedies that carry it out.
func (f *Finding) addFix(sentence string, rs ...Remedy) {
	for _, r := range rs {
		r.Fix = len(f.Fix)
		f.Remedies = append(f.Remedies, r)
	}
	f.Fix = append(f.Fix, sentence)
}

// addAdvice appends a fix sentence that is advice; why says why nothing
// can be applied.
func (f *Finding) addAdvice(sentence, why string) {
	f.addFix(sentence, Remedy{Kind: Advice, Note: why})
}

// The notes of advice that several fixes share.
const (
	adviceHardware = "adding GPUs or nodes is a purchase, not a change to the cluster's objects"
	adviceSharing  = "sharing GPUs is the node pool's device-plugin or mig-parted configuration, which `gpupack plan` writes from every workload's usage"
	adviceOutside  = "the snapshot holds no ResourceQuota, priority or queue, so gpupack cannot write their change"
)

// retarget copies the remedies of a finding made for the pod from for pod
// p, which gets the same finding: the two have the same rules, so the
// patches are the same, but the target and the commands name p.
func retarget(rs []Remedy, from Object, p *cluster.Pod) []Remedy {
	out := slices.Clone(rs)
	for i := range out {
		r := &out[i]
		if len(r.Targets) != 1 || r.Targets[0] != from {
			continue
		}
		r.Targets = []Object{podObject(p)}
		if len(r.Commands) > 0 && r.Patch != nil {
			r.Commands = []string{kubectlPatch(p, r.Patch)}
		}
	}
	return out
}

// patchOp is one operation of a JSON patch.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// pointerEscape escapes a key for a JSON pointer (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

func podObject(p *cluster.Pod) Object {
	return Object{Kind: "Pod", Namespace: p.Namespace, Name: p.Name}
}

func nodeObject(name string) Object { return Object{Kind: "Node", Name: name} }

// patchOf marshals a patch body; the values are plain strings, maps and
// structs of them, which always marshal.
func patchOf(typ string, body any) *Patch {
	b, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("diagnose: marshal %s patch: %v", typ, err))
	}
	return &Patch{Type: typ, Body: b}
}

// kubectlPatch is the command that applies the patch to the pod in place.
func kubectlPatch(p *cluster.Pod, patch *Patch) string {
	return commandLine("kubectl", "patch", "pod", "-n", p.Namespace, p.Name, "--type="+patch.Type, "-p", string(patch.Body))
}

// ruleRemedies are the changes that let pod p onto node n, which the rule
// reasons rs keep it off; st is the node's state. The pod's own rules go
// into one JSON patch, checked with placement.Fit before it is offered:
// the patched pod must pass every rule the patch changes. held says the
// node is fully allocated too.
func ruleRemedies(c *gpu.Catalogue, p *cluster.Pod, n *cluster.Node, st *placement.NodeState, rs []placement.Reason, held bool) []Remedy {
	var out []Remedy
	var advice []string
	podRules := false
	for _, r := range rs {
		switch r.Code {
		case placement.NodeSelectorMismatch, placement.NodeAffinityMismatch, placement.TaintNotTolerated:
			podRules = true
		case placement.NodeUnschedulable:
			out = append(out, Remedy{Kind: NodeChange, Targets: []Object{nodeObject(n.Name)},
				Commands: []string{commandLine("kubectl", "uncordon", n.Name)},
				Note:     "uncordon the node only once the work it was cordoned for is done"})
		case placement.GPUModelMismatch:
			advice = append(advice, fmt.Sprintf("gpuModels is a field of gpupack's snapshot file, not of the pod: allow %s there (a pod states a GPU model by a nodeSelector or affinity on the node's GPU label)", n.GPUModel().Name))
		case placement.SharingModeMismatch:
			advice = append(advice, adviceSharing)
		case placement.SpreadSkew:
			out = append(out, spreadRemedies(p, r)...)
		case placement.SpreadMissingLabel:
			out = append(out, Remedy{Kind: NodeChange, Targets: []Object{nodeObject(n.Name)},
				Note: fmt.Sprintf("give %s its %s label with the value of the domain it is in (gpupack cannot know which), or drop topologySpreadConstraints[%d] from the pod template", n.Name, r.Resource, r.Term)})
		case placement.PodAffinityMismatch, placement.PodAntiAffinityMismatch, placement.ExistingAntiAffinity:
			advice = append(advice, "which pods to move, or how far to relax a pod affinity term, is a choice about the workloads that the evidence does not make")
		}
	}
	if podRules {
		out = append(out, podRulesRemedy(c, p, n, st, rs, held))
	}
	if len(advice) > 0 {
		out = append(out, Remedy{Kind: Advice, Note: strings.Join(advice, "; ")})
	}
	return out
}

// spreadRemedies are the two changes to the spread constraint of reason r
// (SpreadSkew) that let the pod onto the node: maxSkew raised to the skew
// the node would make, or the constraint made ScheduleAnyway (then it only
// weighs in scoring). Each JSON patch tests the value it replaces.
func spreadRemedies(p *cluster.Pod, r placement.Reason) []Remedy {
	path := fmt.Sprintf("/spec/topologySpreadConstraints/%d/", r.Term)
	note := "a pod's topologySpreadConstraints cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it"
	return []Remedy{
		{Kind: PodSpec, Targets: []Object{podObject(p)}, Note: note, Patch: patchOf(JSONPatch, []patchOp{
			{Op: "test", Path: path + "maxSkew", Value: r.Capacity}, {Op: "replace", Path: path + "maxSkew", Value: r.Requested}})},
		{Kind: PodSpec, Targets: []Object{podObject(p)}, Note: note + "; the scheduler then prefers spread nodes but may stack pods", Patch: patchOf(JSONPatch, []patchOp{
			{Op: "test", Path: path + "whenUnsatisfiable", Value: cluster.DoNotSchedule}, {Op: "replace", Path: path + "whenUnsatisfiable", Value: cluster.ScheduleAnyway}})},
	}
}

// podRulesRemedy is the JSON patch of the pod's nodeSelector, required
// node affinity and tolerations that admits it to node n, where the
// reasons rs say which of them keep it off.
func podRulesRemedy(c *gpu.Catalogue, p *cluster.Pod, n *cluster.Node, st *placement.NodeState, rs []placement.Reason, held bool) Remedy {
	has := func(code placement.Code) bool {
		return slices.ContainsFunc(rs, func(r placement.Reason) bool { return r.Code == code })
	}
	q := *p
	var ops []patchOp
	// nodeSelector: each key the node does not match takes the node's
	// value, or goes when the node has no such label.
	if keys := mismatchedSelector(p.NodeSelector, n.Labels); has(placement.NodeSelectorMismatch) && len(keys) > 0 {
		q.NodeSelector = maps.Clone(p.NodeSelector)
		for _, k := range keys {
			path := "/spec/nodeSelector/" + pointerEscape.Replace(k)
			if v, ok := n.Labels[k]; ok {
				ops = append(ops, patchOp{Op: "replace", Path: path, Value: v})
				q.NodeSelector[k] = v
			} else {
				ops = append(ops, patchOp{Op: "remove", Path: path})
				delete(q.NodeSelector, k)
			}
		}
	}
	// Required node affinity: the term nearest to matching is relaxed
	// until the node meets it; terms are ORed, so that admits the node.
	const required = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
	if has(placement.NodeAffinityMismatch) && len(p.RequiredAffinity) > 0 {
		i, term := relaxTerm(p.RequiredAffinity, n.Labels)
		if len(term.MatchExpressions) == 0 {
			// An empty term matches no node in Kubernetes: the relaxed
			// term admits every node, so the requirement goes.
			ops = append(ops, patchOp{Op: "remove", Path: required})
			q.RequiredAffinity = nil
		} else {
			path := fmt.Sprintf("%s/nodeSelectorTerms/%d/matchExpressions", required, i)
			ops = append(ops, patchOp{Op: "test", Path: path, Value: p.RequiredAffinity[i].MatchExpressions},
				patchOp{Op: "replace", Path: path, Value: term.MatchExpressions})
			q.RequiredAffinity = slices.Clone(p.RequiredAffinity)
			q.RequiredAffinity[i] = term
		}
	}
	// Tolerations: one per taint of the node the pod does not tolerate.
	tolerationsOnly := len(ops) == 0
	q.Tolerations = slices.Clone(p.Tolerations)
	for _, t := range n.Taints {
		if !has(placement.TaintNotTolerated) || t.Effect == cluster.PreferNoSchedule || tolerated(p.Tolerations, t) {
			continue
		}
		tol := tolerationFor(t)
		if len(q.Tolerations) == 0 {
			ops = append(ops, patchOp{Op: "add", Path: "/spec/tolerations", Value: []cluster.Toleration{tol}})
		} else {
			ops = append(ops, patchOp{Op: "add", Path: "/spec/tolerations/-", Value: tol})
		}
		q.Tolerations = append(q.Tolerations, tol)
	}
	r := Remedy{Kind: PodSpec, Targets: []Object{podObject(p)}}
	if rest := podRulesLeft(c, &q, st); len(rest) > 0 {
		r.Note = fmt.Sprintf("no patch written: with the changes gpupack can derive, %s would still keep it off %s", strings.Join(rest, ", "), n.Name)
		return r
	}
	r.Patch = patchOf(JSONPatch, ops)
	if tolerationsOnly {
		// The API lets a pod gain tolerations, so this applies in place.
		r.Commands = []string{kubectlPatch(p, r.Patch)}
		r.Note = "a pod may gain tolerations, so this patches the pending pod; make the same change in the pod template of the workload that made it, or its next pod lacks it"
	} else {
		r.Note = "a pod's nodeSelector and affinity cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it"
	}
	if held {
		r.Note += "; the node is fully allocated too, so GPUs there must be freed as well"
	}
	return r
}

// podRulesLeft asks placement.Fit which of the pod's own rules still keep
// the patched pod q off the node.
func podRulesLeft(c *gpu.Catalogue, q *cluster.Pod, st *placement.NodeState) []string {
	d, err := placement.NewDemand(q, c)
	if err != nil {
		return []string{err.Error()}
	}
	_, rs := placement.Fit(d, st)
	var out []string
	for _, r := range rs {
		switch r.Code {
		case placement.NodeSelectorMismatch, placement.NodeAffinityMismatch, placement.TaintNotTolerated:
			out = append(out, ruleText(r))
		}
	}
	return out
}

// mismatchedSelector lists, in key order, the selector's keys that the
// labels do not match.
func mismatchedSelector(selector, labels map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(selector)) {
		if v, ok := labels[k]; !ok || v != selector[k] {
			out = append(out, k)
		}
	}
	return out
}

// failing lists the indices of the term's requirements the labels fail.
func failing(t cluster.Term, labels map[string]string) []int {
	var out []int
	for j, r := range t.MatchExpressions {
		if !r.Matches(labels) {
			out = append(out, j)
		}
	}
	return out
}

// relaxTerm picks the term with the fewest requirements the labels fail
// (the first of equals) and relaxes each of those until the labels meet
// it: In gains the node's value, NotIn loses it; a requirement that cannot
// be widened to the node (In or Exists on a key it lacks, DoesNotExist on
// one it has, Gt, Lt) goes.
func relaxTerm(terms []cluster.Term, labels map[string]string) (int, cluster.Term) {
	best := 0
	for i, t := range terms {
		if len(failing(t, labels)) < len(failing(terms[best], labels)) {
			best = i
		}
	}
	t := terms[best]
	bad := failing(t, labels)
	var out cluster.Term
	for j, r := range t.MatchExpressions {
		if !slices.Contains(bad, j) {
			out.MatchExpressions = append(out.MatchExpressions, r)
			continue
		}
		v, ok := labels[r.Key]
		switch {
		case r.Operator == "In" && ok:
			r.Values = append(slices.Clone(r.Values), v)
		case r.Operator == "NotIn" && len(r.Values) > 1:
			r.Values = slices.DeleteFunc(slices.Clone(r.Values), func(x string) bool { return x == v })
		default:
			continue // the requirement goes
		}
		out.MatchExpressions = append(out.MatchExpressions, r)
	}
	return best, out
}

func tolerated(tols []cluster.Toleration, t cluster.Taint) bool {
	return slices.ContainsFunc(tols, func(tol cluster.Toleration) bool { return tol.Tolerates(t) })
}

// tolerationFor is the toleration of exactly the taint: its key, its value
// (Equal; Exists for a taint without one) and its effect.
func tolerationFor(t cluster.Taint) cluster.Toleration {
	if t.Value == "" {
		return cluster.Toleration{Key: t.Key, Operator: "Exists", Effect: t.Effect}
	}
	return cluster.Toleration{Key: t.Key, Operator: "Equal", Value: t.Value, Effect: t.Effect}
}

// reclaimRemedy deletes the idle-held holders, one command per namespace
// in the order given.
func reclaimRemedy(pods []*cluster.Pod) Remedy {
	r := Remedy{Kind: Reclaim, Note: "a pod that a controller owns comes back when deleted: scale its workload down (or end the notebook or job) instead"}
	var order []string
	byNS := map[string][]string{}
	for _, p := range pods {
		r.Targets = append(r.Targets, podObject(p))
		if _, ok := byNS[p.Namespace]; !ok {
			order = append(order, p.Namespace)
		}
		byNS[p.Namespace] = append(byNS[p.Namespace], p.Name)
	}
	for _, ns := range order {
		r.Commands = append(r.Commands, commandLine(append([]string{"kubectl", "delete", "pod", "-n", ns}, byNS[ns]...)...))
	}
	return r
}

// gateRemedy removes one scheduling gate by name: a strategic merge patch,
// so it removes that gate whatever the others and their order.
func gateRemedy(p *cluster.Pod, gate string) Remedy {
	type gateDelete struct {
		Patch string `json:"$patch"`
		Name  string `json:"name"`
	}
	body := map[string]any{"spec": map[string]any{"schedulingGates": []gateDelete{{Patch: "delete", Name: gate}}}}
	r := Remedy{Kind: SchedulingGate, Targets: []Object{podObject(p)}, Patch: patchOf(StrategicPatch, body),
		Note: "a pod's scheduling gates may be removed, so this patches the pending pod"}
	r.Commands = []string{kubectlPatch(p, r.Patch)}
	return r
}

// schedulerRemedy points the pod at a scheduler that runs.
func schedulerRemedy(p *cluster.Pod, scheduler string) Remedy {
	return Remedy{Kind: PodSpec, Targets: []Object{podObject(p)},
		Patch: patchOf(JSONPatch, []patchOp{{Op: "replace", Path: "/spec/schedulerName", Value: scheduler}}),
		Note:  "a pod's schedulerName cannot change once it exists: apply this to the pod template of the workload that made it (/spec/template/spec/schedulerName), or recreate the pod with it; or start the scheduler it names instead"}
}

// relayoutRemedy is the mig-parted configuration that gives the node's
// GPU r.GPU the layout to and keeps its other GPUs as they are, and the
// command that selects it.
func relayoutRemedy(n *cluster.Node, r Relayout, to gpu.Layout, profile string) Remedy {
	var groups []gpuoperator.MIGDeviceConfig
	for j, g := range n.GPUs {
		l := g.Layout
		if g.Sharing != cluster.MIG {
			l = nil
		}
		if j == r.GPU {
			l = to
		}
		groups = gpuoperator.AppendMIGGroup(groups, j, l)
	}
	name := gpuoperator.ConfigName(n.Name, fmt.Sprintf("gpu%d", r.GPU), profile)
	config, err := gpuoperator.MIGPartedConfig(map[string][]gpuoperator.MIGDeviceConfig{name: groups})
	if err != nil {
		panic(fmt.Sprintf("diagnose: marshal mig-parted config: %v", err))
	}
	stop := "; the GPU has no running slice, so no pod stops"
	if len(r.Keeps)+len(r.Moves) > 0 {
		stop = ", so stop the pods on its running slices first (evidence names them), even those whose slices the layout keeps in place"
	}
	return Remedy{Kind: MIGConfig, Targets: []Object{nodeObject(n.Name)}, Config: string(config),
		Commands: []string{commandLine("kubectl", "label", "node", n.Name, gpuoperator.MIGConfigLabel+"="+name, "--overwrite")},
		Note:     fmt.Sprintf("add the %s entry to the mig-parted config that the GPU operator's mig-manager reads, then label the node; mig-parted sets profile counts, not slice positions, and re-creates the GPU's MIG instances to apply them%s", name, stop)}
}

// Kubernetes names: a namespace is a DNS label, a pod or node name a DNS
// subdomain.
var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// invalidName says which of the objects' names Kubernetes would refuse,
// empty when none. A name from a snapshot file may be anything; a command
// or patch naming it would address an object that cannot exist, and a
// name starting with "-" would read as a kubectl flag.
func invalidName(objs []Object) string {
	for _, o := range objs {
		if o.Namespace != "" && (len(o.Namespace) > 63 || !dnsLabel.MatchString(o.Namespace)) {
			return fmt.Sprintf("namespace %q is not a valid Kubernetes name", o.Namespace)
		}
		if len(o.Name) > 253 || !dnsSubdomain.MatchString(o.Name) {
			return fmt.Sprintf("%s name %q is not a valid Kubernetes name", strings.ToLower(o.Kind), o.Name)
		}
	}
	return ""
}

// checkNames drops the artifact of each remedy that names an object by a
// name Kubernetes would refuse, saying so in its note.
func checkNames(rs []Remedy) {
	for i := range rs {
		if why := invalidName(rs[i].Targets); why != "" {
			rs[i].Patch, rs[i].Config, rs[i].Commands = nil, "", nil
			rs[i].Note = "nothing to apply: " + why
		}
	}
}

// commandLine joins the words into a POSIX shell command line, quoting
// each word that needs it.
func commandLine(words ...string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellWord(w)
	}
	return strings.Join(quoted, " ")
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellWord quotes a word for a POSIX shell: as it is when it holds only
// characters no shell treats specially, else in single quotes, with each
// single quote written as '\”.
func shellWord(w string) string {
	if plainWord.MatchString(w) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
