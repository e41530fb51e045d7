package placement

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/gpupack/gpupack/cluster"
)

// topology is the cross-node part of the kube-scheduler's PodTopologySpread
// and InterPodAffinity filters (v1.37, default feature gates) for one pod:
// what their PreFilter computes from every node and the pods bound there.
// Fit reads it against one node's labels, as their Filter does.
type topology struct {
	spread []spreadCount
	// affinity are the pod's podAffinity terms and affinityCounts the
	// topology pairs (key, value) of nodes holding a pod that all of them
	// select; selfAffinity: the pod itself is selected by all of them.
	affinity       []termOf
	affinityCounts map[pair]int
	selfAffinity   bool
	// anti are the pod's podAntiAffinity terms and antiCounts the pairs of
	// nodes holding a pod one of them selects.
	anti       []termOf
	antiCounts map[pair]int
	// existing are the pairs of nodes holding a pod whose own
	// podAntiAffinity term selects this pod, by key and then value.
	existing map[string]map[string]int
}

type pair struct{ key, value string }

// termOf is a pod affinity term as the scheduler reads it: the selector
// with its label keys merged and the namespaces it covers.
type termOf struct {
	key        string
	selector   selector
	namespaces []string
	// allNamespaces: an empty namespaceSelector, every namespace;
	// nsSelector: a non-empty one, read against the namespaces' labels.
	allNamespaces bool
	nsSelector    *cluster.LabelSelector
}

// spreadCount is one DoNotSchedule constraint with its counts by domain.
type spreadCount struct {
	index    int // in the pod's SpreadConstraints
	c        *cluster.SpreadConstraint
	selector selector
	counts   map[string]int // matching pods by topology value, of the eligible nodes
	min      int            // the global minimum, 0 when fewer domains than minDomains
	minValue string         // a domain of min pods ("" when min is 0 by minDomains)
	self     bool           // the pod matches its own selector
}

// Namespaces gives a namespace's labels, for namespaceSelectors
// (cluster.Snapshot.NamespaceLabels); nil knows only the
// kubernetes.io/metadata.name label.
type Namespaces func(ns string) map[string]string

func (f Namespaces) labels(ns string) map[string]string {
	if f == nil {
		return map[string]string{cluster.NamespaceNameLabel: ns}
	}
	return f(ns)
}

// PreFilter computes, from the state of every node of the cluster and the
// pods bound there (NodeState.Bound), what the demand's topology spread
// constraints and required pod (anti-)affinity, and the anti-affinity of
// the pods already bound, need to know of the whole cluster, as the
// scheduler's PreFilter does once per scheduling cycle; Fit and Fits then
// check each node against it. Call it again whenever pods were bound since
// (the simulator does before each placement). It costs a pass over the
// nodes when neither the pod nor any bound pod has such rules, and
// allocates nothing then.
func (d *Demand) PreFilter(states []*NodeState, ns Namespaces) {
	d.topo = nil
	p := d.Pod
	anti := false
	for _, s := range states {
		if len(s.antiTerms) > 0 {
			anti = true
			break
		}
	}
	if !anti && !p.HasPodRules() {
		return
	}
	t := &topology{}
	t.prepareSpread(d, states)
	t.prepareAffinity(p, states, ns)
	if anti {
		t.prepareExisting(p, states, ns)
	}
	if len(t.spread) == 0 && len(t.affinity) == 0 && len(t.anti) == 0 && len(t.existing) == 0 {
		return
	}
	d.topo = t
}

// WithoutSpread is a copy of the demand, prefiltered as the demand is,
// that leaves out the pod's spread constraint of index i: what-ifs of a
// changed constraint use it rather than prefiltering again.
func (d *Demand) WithoutSpread(i int) *Demand {
	c := *d
	if d.topo != nil {
		t := *d.topo
		t.spread = slices.DeleteFunc(slices.Clone(t.spread), func(sc spreadCount) bool { return sc.index == i })
		c.topo = &t
	}
	return &c
}

// AppendTopologyKey appends to b a fingerprint of what the demand's
// cross-node rules, as PreFilter left them, say of node n: nodes with
// equal fingerprints get the same reason from them (its Detail does not
// name the node's domain), or none. It allocates nothing.
func (d *Demand) AppendTopologyKey(b []byte, n *cluster.Node) []byte {
	if d.topo == nil {
		return b
	}
	r, fails := d.topo.reason(n, false)
	if !fails {
		return b
	}
	b = append(b, r.Code...)
	b = append(b, 0)
	b = append(b, r.Resource...)
	b = strconv.AppendInt(append(b, 0), int64(r.Term), 10)
	return strconv.AppendInt(append(b, 0), r.Requested, 10)
}

// HasTopology reports whether PreFilter found cross-node rules that Fit
// checks for the demand.
func (d *Demand) HasTopology() bool { return d.topo != nil }

// SpreadDomains is, for the pod's spread constraint of index i in its
// SpreadConstraints (one that filters), the matching pods in each eligible
// domain by topology value (a copy), the fewest of them, which counts as 0
// when there are fewer domains than minDomains, and a domain that has that
// fewest ("" then); ok is false when PreFilter did not count the
// constraint.
func (d *Demand) SpreadDomains(i int) (counts map[string]int, least int, leastDomain string, ok bool) {
	if d.topo == nil {
		return nil, 0, "", false
	}
	for _, sc := range d.topo.spread {
		if sc.index == i {
			return maps.Clone(sc.counts), sc.min, sc.minValue, true
		}
	}
	return nil, 0, "", false
}

func (t *topology) prepareSpread(d *Demand, states []*NodeState) {
	p := d.Pod
	for i := range p.SpreadConstraints {
		c := &p.SpreadConstraints[i]
		if !c.Filters() {
			continue
		}
		sel := compile(c.Selector(p.Labels))
		t.spread = append(t.spread, spreadCount{index: i, c: c, selector: sel, counts: map[string]int{}, self: sel.matches(p.Labels)})
	}
	if len(t.spread) == 0 {
		return
	}
	for _, s := range states {
		n := s.Node
		if !hasTopologyKeys(n.Labels, t.spread) {
			continue
		}
		for k := range t.spread {
			sc := &t.spread[k]
			if sc.c.HonorsNodeAffinity() && !matchesNodeAffinity(p, n) {
				continue
			}
			if sc.c.HonorsTaints() && !toleratesDoNotSchedule(p, n) {
				continue
			}
			sc.counts[n.Labels[sc.c.TopologyKey]] += countMatching(s.Bound, &sc.selector, p.Namespace)
		}
	}
	for k := range t.spread {
		sc := &t.spread[k]
		sc.min = math.MaxInt
		for v, n := range sc.counts {
			if n < sc.min || (n == sc.min && v < sc.minValue) {
				sc.min, sc.minValue = n, v
			}
		}
		if len(sc.counts) < sc.c.MinDomainsOrOne() {
			sc.min, sc.minValue = 0, ""
		}
	}
}

// hasTopologyKeys reports whether the node has every constraint's key: a
// node that lacks one counts in no domain.
func hasTopologyKeys(labels map[string]string, spread []spreadCount) bool {
	for _, sc := range spread {
		if _, ok := labels[sc.c.TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// matchesNodeAffinity is the pod's nodeSelector and required node
// affinity (and gpuModels, which stands for a selector on the GPU product
// label) on the node, as nodeAffinityPolicy: Honor reads them.
func matchesNodeAffinity(p *cluster.Pod, n *cluster.Node) bool {
	for k, v := range p.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	if len(p.RequiredAffinity) > 0 && !matchesAnyTerm(p.RequiredAffinity, n.Labels) {
		return false
	}
	return len(p.GPUModels) == 0 || n.HasGPUModel(p.GPUModels)
}

// toleratesDoNotSchedule reports whether the pod tolerates every NoSchedule
// and NoExecute taint of the node, as nodeTaintsPolicy: Honor reads them.
func toleratesDoNotSchedule(p *cluster.Pod, n *cluster.Node) bool {
	for _, t := range n.Taints {
		if t.Effect != cluster.PreferNoSchedule && !tolerated(p.Tolerations, t) {
			return false
		}
	}
	return true
}

// countMatching counts the pods of namespace ns the selector selects; an
// empty selector counts none, as the scheduler's countPodsMatchSelector
// does.
func countMatching(pods []*cluster.Pod, sel *selector, ns string) int {
	if sel.nothing || sel.empty() {
		return 0
	}
	n := 0
	for _, q := range pods {
		if q.Namespace == ns && sel.matches(q.Labels) {
			n++
		}
	}
	return n
}

// termsOf reads the terms of pod p: their selectors with label keys
// merged, and the namespaces they cover.
func termsOf(p *cluster.Pod, terms []cluster.PodAffinityTerm) []termOf {
	out := make([]termOf, len(terms))
	for i := range terms {
		t := &terms[i]
		o := termOf{key: t.TopologyKey, selector: compile(t.Selector(p.Labels)), namespaces: t.Namespaces}
		switch {
		case t.NamespaceSelector.Empty():
			o.allNamespaces = true
		case t.NamespaceSelector != nil:
			o.nsSelector = t.NamespaceSelector
		case len(t.Namespaces) == 0:
			o.namespaces = []string{p.Namespace}
		}
		out[i] = o
	}
	return out
}

// selects reports whether the term selects pod q, whose namespace has the
// labels nsLabels (read only for a non-empty namespaceSelector).
func (t *termOf) selects(q *cluster.Pod, ns Namespaces) bool {
	covered := t.allNamespaces
	for _, n := range t.namespaces {
		covered = covered || n == q.Namespace
	}
	if !covered && t.nsSelector != nil {
		covered = t.nsSelector.Matches(ns.labels(q.Namespace))
	}
	return covered && t.selector.matches(q.Labels)
}

func (t *topology) prepareAffinity(p *cluster.Pod, states []*NodeState, ns Namespaces) {
	t.affinity = termsOf(p, p.PodAffinity)
	t.anti = termsOf(p, p.PodAntiAffinity)
	if len(t.affinity) == 0 && len(t.anti) == 0 {
		return
	}
	t.affinityCounts, t.antiCounts = map[pair]int{}, map[pair]int{}
	t.selfAffinity = len(t.affinity) > 0 && allSelect(t.affinity, p, ns)
	for _, s := range states {
		labels := s.Node.Labels
		for _, q := range s.Bound {
			if len(t.affinity) > 0 && allSelect(t.affinity, q, ns) {
				for _, term := range t.affinity {
					if v, ok := labels[term.key]; ok {
						t.affinityCounts[pair{term.key, v}]++
					}
				}
			}
			for i := range t.anti {
				if v, ok := labels[t.anti[i].key]; ok && t.anti[i].selects(q, ns) {
					t.antiCounts[pair{t.anti[i].key, v}]++
				}
			}
		}
	}
}

func allSelect(terms []termOf, q *cluster.Pod, ns Namespaces) bool {
	for i := range terms {
		if !terms[i].selects(q, ns) {
			return false
		}
	}
	return true
}

// prepareExisting counts the topology pairs of the nodes whose pods have
// an anti-affinity term that selects pod p.
func (t *topology) prepareExisting(p *cluster.Pod, states []*NodeState, ns Namespaces) {
	for _, s := range states {
		for i := range s.antiTerms {
			term := &s.antiTerms[i]
			v, ok := s.Node.Labels[term.key]
			if !ok || !term.selects(p, ns) {
				continue
			}
			if t.existing == nil {
				t.existing = map[string]map[string]int{}
			}
			if t.existing[term.key] == nil {
				t.existing[term.key] = map[string]int{}
			}
			t.existing[term.key][v]++
		}
	}
}

// fits is reasons without words, for Fits.
func (t *topology) fits(n *cluster.Node) bool {
	_, fails := t.reason(n, false)
	return !fails
}

// reason checks the node against the topology as the scheduler's
// PodTopologySpread and then InterPodAffinity filters do, and words the
// first that fails, with its details when explain is set.
func (t *topology) reason(n *cluster.Node, explain bool) (Reason, bool) {
	for k := range t.spread {
		sc := &t.spread[k]
		value, ok := n.Labels[sc.c.TopologyKey]
		if !ok {
			r := Reason{Code: SpreadMissingLabel, Resource: sc.c.TopologyKey, Unresolvable: true, Term: sc.index}
			if explain {
				r.Detail = fmt.Sprintf("topologySpreadConstraints[%d]: node has no %s label", sc.index, sc.c.TopologyKey)
			}
			return r, true
		}
		self := 0
		if sc.self {
			self = 1
		}
		skew := sc.counts[value] + self - sc.min
		if skew > int(sc.c.MaxSkew) {
			r := Reason{Code: SpreadSkew, Resource: sc.c.TopologyKey, Requested: int64(skew), Capacity: int64(sc.c.MaxSkew), Term: sc.index}
			if explain {
				least := fmt.Sprintf("the fewest in a domain are %d (%s=%s)", sc.min, sc.c.TopologyKey, sc.minValue)
				if sc.minValue == "" {
					least = fmt.Sprintf("fewer than minDomains %d domains, so the fewest count as 0", sc.c.MinDomainsOrOne())
				}
				r.Detail = fmt.Sprintf("topologySpreadConstraints[%d]: the node's %s domain has %d matching pods; %s; placing it there makes a skew of %d over maxSkew %d",
					sc.index, sc.c.TopologyKey, sc.counts[value], least, skew, sc.c.MaxSkew)
			}
			return r, true
		}
	}
	if len(t.affinity) > 0 && !t.affinityHolds(n) {
		r := Reason{Code: PodAffinityMismatch, Unresolvable: true}
		if explain {
			r.Detail = "no pod that the required podAffinity selects runs in this node's " + termKeys(t.affinity)
		}
		return r, true
	}
	for i := range t.anti {
		if v, ok := n.Labels[t.anti[i].key]; ok && t.antiCounts[pair{t.anti[i].key, v}] > 0 {
			r := Reason{Code: PodAntiAffinityMismatch, Resource: t.anti[i].key, Term: i}
			if explain {
				r.Detail = fmt.Sprintf("podAntiAffinity[%d] selects pods that run in the node's %s domain", i, t.anti[i].key)
			}
			return r, true
		}
	}
	hit := ""
	for key, values := range t.existing {
		if v, ok := n.Labels[key]; ok && values[v] > 0 && (hit == "" || key < hit) {
			hit = key
		}
	}
	if hit != "" {
		r := Reason{Code: ExistingAntiAffinity, Resource: hit}
		if explain {
			r.Detail = fmt.Sprintf("pods in the node's %s domain have a podAntiAffinity term that selects this pod", hit)
		}
		return r, true
	}
	return Reason{}, false
}

// affinityHolds is the scheduler's nodeTopologyMatchesAffinity: the node
// has every term's key and a selected pod in each of its domains, or no
// pod anywhere is selected and the pod selects itself (the first of a
// group that wants to be together).
func (t *topology) affinityHolds(n *cluster.Node) bool {
	exist := true
	for i := range t.affinity {
		v, ok := n.Labels[t.affinity[i].key]
		if !ok {
			return false
		}
		if t.affinityCounts[pair{t.affinity[i].key, v}] <= 0 {
			exist = false
		}
	}
	if !exist {
		return len(t.affinityCounts) == 0 && t.selfAffinity
	}
	return true
}

func termKeys(terms []termOf) string {
	s := ""
	for i, t := range terms {
		if i > 0 {
			s += ", "
		}
		s += t.key
	}
	if len(terms) > 1 {
		return "domains of " + s
	}
	return s + " domain"
}

// selector is a label selector compiled for matching many pods: its
// matchLabels as a list, so that matching reads the pod's labels only.
type selector struct {
	nothing bool // a nil selector: selects no pod
	labels  []cluster.Requirement
}

func compile(s *cluster.LabelSelector) selector {
	if s == nil {
		return selector{nothing: true}
	}
	out := selector{labels: make([]cluster.Requirement, 0, len(s.MatchLabels)+len(s.MatchExpressions))}
	for k, v := range s.MatchLabels {
		out.labels = append(out.labels, cluster.Requirement{Key: k, Operator: "=", Values: []string{v}})
	}
	out.labels = append(out.labels, s.MatchExpressions...)
	return out
}

// empty reports whether the selector selects every pod.
func (s *selector) empty() bool { return !s.nothing && len(s.labels) == 0 }

func (s *selector) matches(labels map[string]string) bool {
	if s.nothing {
		return false
	}
	for i := range s.labels {
		r := &s.labels[i]
		if r.Operator == "=" {
			if v, ok := labels[r.Key]; !ok || v != r.Values[0] {
				return false
			}
			continue
		}
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}
