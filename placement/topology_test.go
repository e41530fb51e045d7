package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
)

func (b *podBuilder) labels(kv ...string) *podBuilder {
	b.p.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		b.p.Labels[kv[i]] = kv[i+1]
	}
	return b
}

// spread adds a DoNotSchedule constraint on key selecting app=<app>;
// edit, when given, changes it further.
func (b *podBuilder) spread(key string, maxSkew int32, app string, edit ...func(*cluster.SpreadConstraint)) *podBuilder {
	c := cluster.SpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: cluster.DoNotSchedule,
		LabelSelector: &cluster.LabelSelector{MatchLabels: map[string]string{"app": app}}}
	for _, e := range edit {
		e(&c)
	}
	b.p.SpreadConstraints = append(b.p.SpreadConstraints, c)
	return b
}

func appTerm(key, app string) cluster.PodAffinityTerm {
	return cluster.PodAffinityTerm{TopologyKey: key, LabelSelector: &cluster.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func (b *podBuilder) affinity(t cluster.PodAffinityTerm) *podBuilder {
	b.p.PodAffinity = append(b.p.PodAffinity, t)
	return b
}

func (b *podBuilder) anti(t cluster.PodAffinityTerm) *podBuilder {
	b.p.PodAntiAffinity = append(b.p.PodAntiAffinity, t)
	return b
}

const zone = "topology.kubernetes.io/zone"

// zoneNode is a node of 4 exclusive L4s in the zone, with its hostname.
func zoneNode(name, z string) *nodeBuilder {
	b := makeNode(name).gpus("L4", 4, cluster.Exclusive, 0).label("kubernetes.io/hostname", name)
	if z != "" {
		b.label(zone, z)
	}
	return b
}

// running makes n CPU-only pods of the app (labels app=<app>) for a node.
func running(prefix, app string, n int) []*cluster.Pod {
	out := make([]*cluster.Pod, n)
	for i := range out {
		out[i] = makePod(prefix+"-"+string(rune('a'+i))).labels("app", app).obj()
	}
	return out
}

// topologyVerdicts prefilters the pod over the states and gives, by node,
// the codes of Fit's reasons (none: it fits), checking that Fits agrees.
func topologyVerdicts(t *testing.T, p *cluster.Pod, states []*NodeState) map[string][]Code {
	t.Helper()
	d := demand(t, p)
	d.PreFilter(states, nil)
	out := map[string][]Code{}
	for _, s := range states {
		_, rs := Fit(d, s)
		codes := []Code{}
		for _, r := range rs {
			codes = append(codes, r.Code)
		}
		out[s.Node.Name] = codes
		if Fits(d, s) != (len(rs) == 0) {
			t.Errorf("%s: Fits says %v, Fit gives %v", s.Node.Name, Fits(d, s), rs)
		}
	}
	return out
}

func TestSpreadSkew(t *testing.T) {
	minDomains := func(n int32) func(*cluster.SpreadConstraint) {
		return func(c *cluster.SpreadConstraint) { c.MinDomains = &n }
	}
	// Zones a, b and c hold 3, 1 and 2 web pods; a node without a zone
	// label holds 5, which count in no domain.
	states := func() []*NodeState {
		return []*NodeState{
			place(t, zoneNode("a1", "a").obj(), running("a1", "web", 2)...),
			place(t, zoneNode("a2", "a").obj(), running("a2", "web", 1)...),
			place(t, zoneNode("b1", "b").obj(), running("b1", "web", 1)...),
			place(t, zoneNode("c1", "c").obj(), append(running("c1", "web", 2), running("c1x", "db", 3)...)...),
			place(t, zoneNode("x1", "").obj(), running("x1", "web", 5)...),
		}
	}
	ok, skew, missing := []Code{}, []Code{SpreadSkew}, []Code{SpreadMissingLabel}
	cases := map[string]struct {
		pod  *cluster.Pod
		want map[string][]Code
	}{
		// min is 1 (zone b): a makes 3+1-1 = 3, b 1+1-1 = 1, c 2+1-1 = 2.
		"maxSkew 1": {
			pod:  makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web").obj(),
			want: map[string][]Code{"a1": skew, "a2": skew, "b1": ok, "c1": skew, "x1": missing},
		},
		"maxSkew 2 admits zone c": {
			pod:  makePod("web").whole(1).labels("app", "web").spread(zone, 2, "web").obj(),
			want: map[string][]Code{"a1": skew, "a2": skew, "b1": ok, "c1": ok, "x1": missing},
		},
		// A pod its selector does not select adds nothing: a makes 3-1 = 2.
		"not self-matching": {
			pod:  makePod("job").whole(1).labels("app", "job").spread(zone, 1, "web").obj(),
			want: map[string][]Code{"a1": skew, "a2": skew, "b1": ok, "c1": ok, "x1": missing},
		},
		// Three domains, fewer than minDomains 4: the minimum counts as 0,
		// so even zone b makes 1+1-0 = 2 > 1.
		"minDomains above the domains": {
			pod:  makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web", minDomains(4)).obj(),
			want: map[string][]Code{"a1": skew, "a2": skew, "b1": skew, "c1": skew, "x1": missing},
		},
		"minDomains met": {
			pod:  makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web", minDomains(3)).obj(),
			want: map[string][]Code{"a1": skew, "a2": skew, "b1": ok, "c1": skew, "x1": missing},
		},
		// Pods of other namespaces do not count: zone b is the only one
		// with a pod of ns "web", and the others make 0+1-0 = 1.
		"other namespace": {
			pod:  makePod("web").ns("web").whole(1).labels("app", "web").spread(zone, 1, "web").obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": ok, "c1": ok, "x1": missing},
		},
		"ScheduleAnyway does not filter": {
			pod: makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web", func(c *cluster.SpreadConstraint) {
				c.WhenUnsatisfiable = cluster.ScheduleAnyway
			}).obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": ok, "c1": ok, "x1": ok},
		},
		// An empty selector counts no pod (countPodsMatchSelector), so
		// every node makes a skew of 1.
		"empty selector": {
			pod: makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web", func(c *cluster.SpreadConstraint) {
				c.LabelSelector = &cluster.LabelSelector{}
			}).obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": ok, "c1": ok, "x1": missing},
		},
		// matchLabelKeys narrows the selector to the pod's own version:
		// no v2 pod runs, so every zone is at 0.
		"matchLabelKeys": {
			pod: makePod("web").whole(1).labels("app", "web", "version", "v2").spread(zone, 1, "web", func(c *cluster.SpreadConstraint) {
				c.MatchLabelKeys = []string{"version"}
			}).obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": ok, "c1": ok, "x1": missing},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, topologyVerdicts(t, tc.pod, states())); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSpreadReasonFigures(t *testing.T) {
	states := []*NodeState{
		place(t, zoneNode("a1", "a").obj(), running("a1", "web", 3)...),
		place(t, zoneNode("b1", "b").obj(), running("b1", "web", 1)...),
	}
	d := demand(t, makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web").obj())
	d.PreFilter(states, nil)
	_, rs := Fit(d, states[0])
	want := []Reason{{Code: SpreadSkew, Resource: zone, Requested: 3, Capacity: 1,
		Detail: "topologySpreadConstraints[0]: the node's topology.kubernetes.io/zone domain has 3 matching pods; the fewest in a domain are 1 (topology.kubernetes.io/zone=b); placing it there makes a skew of 3 over maxSkew 1"}}
	if diff := cmp.Diff(want, rs); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if got, want := rs[0].Message(), "node(s) didn't match pod topology spread constraints"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestSpreadNodeInclusionPolicies(t *testing.T) {
	// a1 (pool x) holds 2 web pods; b1 (pool y, tainted) none.
	states := func() []*NodeState {
		return []*NodeState{
			place(t, zoneNode("a1", "a").label("pool", "x").obj(), running("a1", "web", 2)...),
			place(t, zoneNode("b1", "b").label("pool", "y").taint("gpu", "reserved").obj()),
		}
	}
	policy := func(affinity, taints string) func(*cluster.SpreadConstraint) {
		return func(c *cluster.SpreadConstraint) { c.NodeAffinityPolicy, c.NodeTaintsPolicy = affinity, taints }
	}
	ok, skew := []Code{}, []Code{SpreadSkew}
	cases := map[string]struct {
		pod  *cluster.Pod
		want []Code // on a1
	}{
		// Honor (the default) leaves b1 out, as the pod's selector
		// excludes it: the only domain is a, at 2, so a makes 2+1-2 = 1.
		"nodeAffinityPolicy Honor": {
			pod:  makePod("web").whole(1).labels("app", "web").selector("pool", "x").spread(zone, 1, "web").obj(),
			want: ok,
		},
		"nodeAffinityPolicy Ignore": {
			pod:  makePod("web").whole(1).labels("app", "web").selector("pool", "x").spread(zone, 1, "web", policy(cluster.PolicyIgnore, "")).obj(),
			want: skew,
		},
		// Taints are ignored by default: b is a domain at 0.
		"nodeTaintsPolicy Ignore": {
			pod:  makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web").obj(),
			want: skew,
		},
		"nodeTaintsPolicy Honor": {
			pod:  makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web", policy("", cluster.PolicyHonor)).obj(),
			want: ok,
		},
		"nodeTaintsPolicy Honor, tolerated": {
			pod:  makePod("web").whole(1).labels("app", "web").tolerate("gpu").spread(zone, 1, "web", policy("", cluster.PolicyHonor)).obj(),
			want: skew,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, topologyVerdicts(t, tc.pod, states())["a1"]); diff != "" {
				t.Errorf("a1 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodAffinity(t *testing.T) {
	db := makePod("db-0").labels("app", "db").obj()
	dbOther := makePod("db-1").ns("other").labels("app", "db").obj()
	states := func() []*NodeState {
		return []*NodeState{
			place(t, zoneNode("a1", "a").obj(), db),
			place(t, zoneNode("a2", "a").obj()),
			place(t, zoneNode("b1", "b").obj(), dbOther),
			place(t, zoneNode("x1", "").obj()),
		}
	}
	ok, aff := []Code{}, []Code{PodAffinityMismatch}
	inOther := appTerm(zone, "db")
	inOther.Namespaces = []string{"other"}
	allNS := appTerm(zone, "db")
	allNS.NamespaceSelector = &cluster.LabelSelector{}
	byName := appTerm(zone, "db")
	byName.NamespaceSelector = &cluster.LabelSelector{MatchLabels: map[string]string{cluster.NamespaceNameLabel: "other"}}
	cases := map[string]struct {
		pod  *cluster.Pod
		want map[string][]Code
	}{
		"with db in its zone": {
			pod:  makePod("app").whole(1).affinity(appTerm(zone, "db")).obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": aff, "x1": aff},
		},
		"explicit namespaces": {
			pod:  makePod("app").whole(1).affinity(inOther).obj(),
			want: map[string][]Code{"a1": aff, "a2": aff, "b1": ok, "x1": aff},
		},
		"every namespace": {
			pod:  makePod("app").whole(1).affinity(allNS).obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": ok, "x1": aff},
		},
		"namespaceSelector on the name label": {
			pod:  makePod("app").whole(1).affinity(byName).obj(),
			want: map[string][]Code{"a1": aff, "a2": aff, "b1": ok, "x1": aff},
		},
		// No cache pod runs anywhere: the first pod that selects itself
		// may go to any node with the key; one that does not, nowhere.
		"first of its group": {
			pod:  makePod("cache").whole(1).labels("app", "cache").affinity(appTerm(zone, "cache")).obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": ok, "x1": aff},
		},
		"no selected pod": {
			pod:  makePod("app").whole(1).affinity(appTerm(zone, "cache")).obj(),
			want: map[string][]Code{"a1": aff, "a2": aff, "b1": aff, "x1": aff},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, topologyVerdicts(t, tc.pod, states())); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodAntiAffinity(t *testing.T) {
	const host = "kubernetes.io/hostname"
	// web-0 on a1 keeps other web pods out of its zone (its own
	// anti-affinity); the new pods' own terms are on the hostname.
	web0 := makePod("web-0").labels("app", "web").anti(appTerm(zone, "web")).obj()
	states := func() []*NodeState {
		return []*NodeState{
			place(t, zoneNode("a1", "a").obj(), web0),
			place(t, zoneNode("a2", "a").obj(), running("a2", "job", 1)...),
			place(t, zoneNode("b1", "b").obj(), running("b1", "job", 1)...),
			place(t, zoneNode("b2", "b").obj()),
		}
	}
	ok, anti, existing := []Code{}, []Code{PodAntiAffinityMismatch}, []Code{ExistingAntiAffinity}
	cases := map[string]struct {
		pod  *cluster.Pod
		want map[string][]Code
	}{
		"away from jobs on the host": {
			pod:  makePod("app").whole(1).anti(appTerm(host, "job")).obj(),
			want: map[string][]Code{"a1": ok, "a2": anti, "b1": anti, "b2": ok},
		},
		// Symmetry: a web pod is kept out of zone a by web-0's own term,
		// though it has no rule of its own.
		"existing pod's anti-affinity": {
			pod:  makePod("web-1").whole(1).labels("app", "web").obj(),
			want: map[string][]Code{"a1": existing, "a2": existing, "b1": ok, "b2": ok},
		},
		// web-0's term covers its own namespace only.
		"existing anti-affinity, other namespace": {
			pod:  makePod("web-1").ns("other").whole(1).labels("app", "web").obj(),
			want: map[string][]Code{"a1": ok, "a2": ok, "b1": ok, "b2": ok},
		},
		// Its own anti-affinity fails first (InterPodAffinity checks the
		// pod's terms before the existing pods').
		"own before existing": {
			pod:  makePod("web-1").whole(1).labels("app", "web").anti(appTerm(host, "job")).obj(),
			want: map[string][]Code{"a1": existing, "a2": anti, "b1": anti, "b2": ok},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, topologyVerdicts(t, tc.pod, states())); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTopologyAfterGPUs: the cross-node reasons come after the GPU's, one
// of them per node (PodTopologySpread before InterPodAffinity), as the
// scheduler's filters run.
func TestTopologyAfterGPUs(t *testing.T) {
	full := zoneNode("a1", "a").obj()
	s := place(t, full, append(running("a1", "web", 1), makePod("hold").whole(4).obj())...)
	other := place(t, zoneNode("b1", "b").obj())
	p := makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web").anti(appTerm(zone, "web")).obj()
	got := topologyVerdicts(t, p, []*NodeState{s, other})
	want := map[string][]Code{"a1": {InsufficientGPU, SpreadSkew}, "b1": {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
}

// TestPreFilterSeesAssign: a pod assigned to a state, or to its clone,
// counts at the next PreFilter, and the clone's pods stay its own.
func TestPreFilterSeesAssign(t *testing.T) {
	a := place(t, zoneNode("a1", "a").obj())
	b := place(t, zoneNode("b1", "b").obj())
	p := makePod("web").whole(1).labels("app", "web").spread(zone, 1, "web").obj()
	clone := a.Clone()
	d := demand(t, makePod("web-0").labels("app", "web").obj())
	clone.Assign(d, Assignment{})
	if got := topologyVerdicts(t, p, []*NodeState{clone, b}); len(got["a1"]) != 1 || len(got["b1"]) != 0 {
		t.Errorf("with web-0 in zone a: %v", got)
	}
	if got := topologyVerdicts(t, p, []*NodeState{a, b}); len(got["a1"]) != 0 {
		t.Errorf("the original state saw its clone's pod: %v", got)
	}
}

// TestFitsWithoutRulesAllocatesNothing: the hot path stays free of
// allocation for a pod without cross-node rules.
func TestFitsWithoutRulesAllocatesNothing(t *testing.T) {
	states := []*NodeState{place(t, zoneNode("a1", "a").obj(), running("a1", "web", 2)...)}
	d := demand(t, makePod("plain").whole(1).obj())
	if n := testing.AllocsPerRun(100, func() {
		d.PreFilter(states, nil)
		Fits(d, states[0])
	}); n != 0 {
		t.Errorf("PreFilter and Fits allocate %v times per run", n)
	}
}
