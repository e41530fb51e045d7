// Package ksmref is the test kit's pinned reference of the
// kube-state-metrics families that gpupack writes in its stand-in or
// reads in its queries, with the names, types, HELP and labels the real
// project generates (testdata/kube-state-metrics-*.yaml says from which
// release and files). Tests check the stand-in's exposition and
// gpupack's queries against it, since the real kube-state-metrics does
// not run in the test cluster.
package ksmref

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed testdata/kube-state-metrics-v2.20.0.yaml
var pinned []byte

// Reference is the pinned table.
type Reference struct {
	Source   string   `json:"source"`
	Version  string   `json:"version"`
	Commit   string   `json:"commit"`
	Families []Family `json:"families"`
}

// Family is one metric family as kube-state-metrics generates it.
type Family struct {
	Name string `json:"name"`
	// Type is the exposition's TYPE: gauge or counter.
	Type string `json:"type"`
	// Stability is STABLE or ALPHA; a STABLE family's HELP line carries
	// the prefix "[STABLE] ".
	Stability string `json:"stability"`
	Help      string `json:"help"`
	// Labels are the label names every series of the family has.
	Labels []string `json:"labels"`
	// LabelPrefix, where set, begins the names of further labels whose
	// number varies (kube_node_labels' label_<name>).
	LabelPrefix string `json:"labelPrefix,omitempty"`
}

// Load reads the pinned table.
func Load() (*Reference, error) {
	var r Reference
	if err := yaml.UnmarshalStrict(pinned, &r); err != nil {
		return nil, fmt.Errorf("ksmref: the pinned kube-state-metrics table: %w", err)
	}
	return &r, nil
}

// Family returns the family called name, if kube-state-metrics has it.
func (r *Reference) Family(name string) (Family, bool) {
	i := slices.IndexFunc(r.Families, func(f Family) bool { return f.Name == name })
	if i < 0 {
		return Family{}, false
	}
	return r.Families[i], true
}

// ExposedHelp is the HELP text kube-state-metrics writes for the family.
func (f Family) ExposedHelp() string {
	if f.Stability == "STABLE" {
		return "[STABLE] " + f.Help
	}
	return f.Help
}

// HasLabel says whether the family's series carry the label name.
func (f Family) HasLabel(name string) bool {
	return slices.Contains(f.Labels, name) || (f.LabelPrefix != "" && strings.HasPrefix(name, f.LabelPrefix) && len(name) > len(f.LabelPrefix))
}
