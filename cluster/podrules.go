package cluster

import (
	"fmt"
	"slices"
)

// LabelSelector is a Kubernetes label selector (metav1.LabelSelector):
// every matchLabels pair and every expression (In, NotIn, Exists,
// DoesNotExist) must hold. A nil *LabelSelector selects nothing and an
// empty one everything, as in Kubernetes.
type LabelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []Requirement     `json:"matchExpressions,omitempty"`
}

// Empty reports whether the selector has no requirement (it selects
// everything).
func (s *LabelSelector) Empty() bool {
	return s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// Matches reports whether labels are selected; a nil selector selects none.
func (s *LabelSelector) Matches(labels map[string]string) bool {
	if s == nil {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// withKeys is the selector with "key In (value)" (or NotIn, for mismatch)
// added for each key the labels have, as the apiserver merges a term's
// matchLabelKeys and mismatchLabelKeys into its labelSelector at admission;
// a nil selector stays nil (it selects nothing either way).
func (s *LabelSelector) withKeys(labels map[string]string, match, mismatch []string) *LabelSelector {
	if s == nil || len(match)+len(mismatch) == 0 {
		return s
	}
	out := &LabelSelector{MatchLabels: s.MatchLabels, MatchExpressions: slices.Clone(s.MatchExpressions)}
	for _, keys := range []struct {
		names []string
		op    string
	}{{match, "In"}, {mismatch, "NotIn"}} {
		for _, k := range keys.names {
			if v, ok := labels[k]; ok {
				out.MatchExpressions = append(out.MatchExpressions, Requirement{Key: k, Operator: keys.op, Values: []string{v}})
			}
		}
	}
	return out
}

func (s *LabelSelector) validate() error {
	if s == nil {
		return nil
	}
	for i, r := range s.MatchExpressions {
		switch r.Operator {
		case "In", "NotIn":
			if len(r.Values) == 0 {
				return fmt.Errorf("matchExpressions[%d]: operator %s needs values", i, r.Operator)
			}
		case "Exists", "DoesNotExist":
			if len(r.Values) > 0 {
				return fmt.Errorf("matchExpressions[%d]: operator %s takes no values", i, r.Operator)
			}
		default:
			return fmt.Errorf("matchExpressions[%d].operator: %q (want In, NotIn, Exists or DoesNotExist)", i, r.Operator)
		}
	}
	return nil
}

// The values of a spread constraint's whenUnsatisfiable and of its node
// inclusion policies, as Kubernetes spells them.
const (
	DoNotSchedule  = "DoNotSchedule"
	ScheduleAnyway = "ScheduleAnyway"
	PolicyHonor    = "Honor"
	PolicyIgnore   = "Ignore"
)

// SpreadConstraint is one of a pod's topologySpreadConstraints, with the
// Kubernetes field names. Only DoNotSchedule constraints keep a pod off a
// node; ScheduleAnyway ones only weigh in scoring.
type SpreadConstraint struct {
	MaxSkew           int32          `json:"maxSkew"`
	TopologyKey       string         `json:"topologyKey"`
	WhenUnsatisfiable string         `json:"whenUnsatisfiable"`
	LabelSelector     *LabelSelector `json:"labelSelector,omitempty"`
	MatchLabelKeys    []string       `json:"matchLabelKeys,omitempty"`
	// MinDomains is nil when not set, which counts as 1.
	MinDomains *int32 `json:"minDomains,omitempty"`
	// NodeAffinityPolicy ("" is Honor) and NodeTaintsPolicy ("" is
	// Ignore) say whether nodes the pod's node affinity or its
	// tolerations exclude count as domains.
	NodeAffinityPolicy string `json:"nodeAffinityPolicy,omitempty"`
	NodeTaintsPolicy   string `json:"nodeTaintsPolicy,omitempty"`
}

// Filters reports whether the constraint keeps pods off nodes
// (whenUnsatisfiable: DoNotSchedule).
func (c *SpreadConstraint) Filters() bool { return c.WhenUnsatisfiable == DoNotSchedule }

// Selector is the constraint's label selector with its matchLabelKeys
// merged from the pod's labels, as the scheduler (and, since v1.34, the
// apiserver) does; merging twice changes nothing.
func (c *SpreadConstraint) Selector(podLabels map[string]string) *LabelSelector {
	return c.LabelSelector.withKeys(podLabels, c.MatchLabelKeys, nil)
}

// HonorsNodeAffinity and HonorsTaints apply the policies' defaults.
func (c *SpreadConstraint) HonorsNodeAffinity() bool { return c.NodeAffinityPolicy != PolicyIgnore }

// HonorsTaints reports whether nodes with taints the pod does not
// tolerate are left out of the domains (nodeTaintsPolicy: Honor).
func (c *SpreadConstraint) HonorsTaints() bool { return c.NodeTaintsPolicy == PolicyHonor }

// MinDomainsOrOne is minDomains, 1 when unset.
func (c *SpreadConstraint) MinDomainsOrOne() int {
	if c.MinDomains == nil {
		return 1
	}
	return int(*c.MinDomains)
}

func (c *SpreadConstraint) validate() error {
	switch {
	case c.MaxSkew < 1:
		return fmt.Errorf("maxSkew: %d (want 1 or more)", c.MaxSkew)
	case c.TopologyKey == "":
		return fmt.Errorf("topologyKey: missing")
	case c.WhenUnsatisfiable != DoNotSchedule && c.WhenUnsatisfiable != ScheduleAnyway:
		return fmt.Errorf("whenUnsatisfiable: %q (want %s or %s)", c.WhenUnsatisfiable, DoNotSchedule, ScheduleAnyway)
	case c.MinDomains != nil && *c.MinDomains < 1:
		return fmt.Errorf("minDomains: %d (want 1 or more)", *c.MinDomains)
	}
	for _, p := range []struct{ name, v string }{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
		if p.v != "" && p.v != PolicyHonor && p.v != PolicyIgnore {
			return fmt.Errorf("%s: %q (want %s or %s)", p.name, p.v, PolicyHonor, PolicyIgnore)
		}
	}
	if err := c.LabelSelector.validate(); err != nil {
		return fmt.Errorf("labelSelector: %w", err)
	}
	return nil
}

// PodAffinityTerm is one required term of a pod's podAffinity or
// podAntiAffinity, with the Kubernetes field names: the pods it selects
// are those of Namespaces (the pod's own namespace when Namespaces is
// empty and NamespaceSelector nil), or of the namespaces NamespaceSelector
// selects, whose labels LabelSelector selects.
type PodAffinityTerm struct {
	LabelSelector     *LabelSelector `json:"labelSelector,omitempty"`
	Namespaces        []string       `json:"namespaces,omitempty"`
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	TopologyKey       string         `json:"topologyKey"`
	MatchLabelKeys    []string       `json:"matchLabelKeys,omitempty"`
	MismatchLabelKeys []string       `json:"mismatchLabelKeys,omitempty"`
}

// Selector is the term's label selector with matchLabelKeys and
// mismatchLabelKeys merged from the labels of the pod that has the term,
// as the apiserver does at admission; merging twice changes nothing.
func (t *PodAffinityTerm) Selector(podLabels map[string]string) *LabelSelector {
	return t.LabelSelector.withKeys(podLabels, t.MatchLabelKeys, t.MismatchLabelKeys)
}

func (t *PodAffinityTerm) validate() error {
	if t.TopologyKey == "" {
		return fmt.Errorf("topologyKey: missing")
	}
	if err := t.LabelSelector.validate(); err != nil {
		return fmt.Errorf("labelSelector: %w", err)
	}
	if err := t.NamespaceSelector.validate(); err != nil {
		return fmt.Errorf("namespaceSelector: %w", err)
	}
	return nil
}

// NamespaceNameLabel is the label that Kubernetes puts on every namespace,
// valued with its name.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// NamespaceLabels are the labels of namespace ns that a namespaceSelector
// reads: those the snapshot knows (Snapshot.NamespaceLabels), and always
// NamespaceNameLabel.
func (s *Snapshot) NamespaceLabels(ns string) map[string]string {
	known := s.Namespaces[ns]
	out := make(map[string]string, len(known)+1)
	for k, v := range known {
		out[k] = v
	}
	out[NamespaceNameLabel] = ns
	return out
}

// HasPodRules reports whether the pod has topology spread constraints
// that filter (DoNotSchedule) or required pod (anti-)affinity.
func (p *Pod) HasPodRules() bool {
	if len(p.PodAffinity) > 0 || len(p.PodAntiAffinity) > 0 {
		return true
	}
	return slices.ContainsFunc(p.SpreadConstraints, func(c SpreadConstraint) bool { return c.Filters() })
}

// validatePodRules checks the pod's spread constraints and pod affinity
// terms as the apiserver would.
func (p *Pod) validatePodRules() error {
	for i := range p.SpreadConstraints {
		c := &p.SpreadConstraints[i]
		if err := c.validate(); err != nil {
			return fmt.Errorf("topologySpreadConstraints[%d].%w", i, err)
		}
		for j := range i {
			if o := &p.SpreadConstraints[j]; o.TopologyKey == c.TopologyKey && o.WhenUnsatisfiable == c.WhenUnsatisfiable {
				return fmt.Errorf("topologySpreadConstraints[%d]: topologyKey %s with %s is given twice (also [%d])", i, c.TopologyKey, c.WhenUnsatisfiable, j)
			}
		}
	}
	for _, terms := range []struct {
		name  string
		terms []PodAffinityTerm
	}{{"podAffinity", p.PodAffinity}, {"podAntiAffinity", p.PodAntiAffinity}} {
		for i := range terms.terms {
			if err := terms.terms[i].validate(); err != nil {
				return fmt.Errorf("%s[%d].%w", terms.name, i, err)
			}
		}
	}
	return nil
}
