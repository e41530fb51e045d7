package usage

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/gpu"
)

// Pricing says what one GPU-hour of a device costs. Model prices come from
// the catalogue (override them with gpu.Catalogue.WithPrices); Rules
// override them per node label, the first matching rule winning.
type Pricing struct {
	Catalogue *gpu.Catalogue
	// NodeLabels are the labels of each node by name, for Rules; an edge
	// fills them in (from kube_node_labels or a snapshot).
	NodeLabels map[string]map[string]string
	Rules      []PriceRule
}

// PriceRule prices the GPUs of every node whose labels include all of Labels.
type PriceRule struct {
	Labels  map[string]string `json:"labels"`
	PerHour float64           `json:"perHour"`
}

// Currency is the catalogue's currency.
func (p Pricing) Currency() string {
	if p.Catalogue == nil {
		return ""
	}
	return p.Catalogue.Currency
}

// PerHour is the price of one whole GPU-hour of the device's GPU: a node
// label rule if one matches, else the catalogue price of its model; unknown
// when neither is known.
func (p Pricing) PerHour(d Device) Amount {
	labels := p.NodeLabels[d.Node]
	for _, r := range p.Rules {
		if matches(labels, r.Labels) {
			return Known(r.PerHour)
		}
	}
	if m := p.model(d); m != nil && m.Priced {
		return Known(m.PricePerHour)
	}
	return Unknown
}

// UnpricedError says that a price file replaced the catalogue's currency
// but priced none of some models the cluster has, so their cost, and every
// total above it, cannot be given in that currency.
type UnpricedError struct {
	Currency string
	// Models are the unpriced models' names and Nodes an example node of
	// each, in the same order.
	Models, Nodes []string
}

func (e *UnpricedError) Error() string {
	var b strings.Builder
	for i, m := range e.Models {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (on %s)", m, e.Nodes[i])
	}
	return fmt.Sprintf("the prices are in %s but give no price for %s; the built-in prices are in another currency and are not mixed in: add each model to prices (0 if free) or match its nodes with a nodeRule", e.Currency, b.String())
}

// checkPriced refuses a repriced catalogue (a price file in another
// currency) that leaves a device's model without a price and no node rule
// covering it. With the catalogue's own currency an unpriced model (the
// trace's undisclosed ones) stays an honest unknown.
func (p Pricing) checkPriced(devs []Device) error {
	if p.Catalogue == nil || !p.Catalogue.Repriced() {
		return nil
	}
	node := map[string]string{}
	for _, d := range devs {
		if p.PerHour(d).Known() {
			continue
		}
		if m := p.model(d); m != nil {
			if _, seen := node[m.Name]; !seen {
				node[m.Name] = d.Node
			}
		}
	}
	if len(node) == 0 {
		return nil
	}
	e := &UnpricedError{Currency: p.Currency()}
	for m := range node {
		e.Models = append(e.Models, m)
	}
	sort.Strings(e.Models)
	for _, m := range e.Models {
		e.Nodes = append(e.Nodes, node[m])
	}
	return e
}

func (p Pricing) model(d Device) *gpu.Model {
	if p.Catalogue == nil || d.Model == "" {
		return nil
	}
	m, ok := p.Catalogue.Lookup(d.Model)
	if !ok {
		return nil
	}
	return m
}

// Share is the fraction of a whole GPU the device stands for: 1 for a
// whole GPU, compute slices over the GPU's slices for a MIG instance
// (3/7 for a 3g profile on an H100). Profiles unknown to the catalogue are
// read from their name ("2g.") over 7 slices, and reported in Quality.
func (p Pricing) Share(d Device) (share float64, known bool) {
	if d.MIGProfile == "" {
		return 1, true
	}
	if m := p.model(d); m != nil && m.MIG != nil {
		if prof, ok := m.MIG.Profile(d.MIGProfile); ok {
			return float64(prof.Compute) / float64(m.MIG.ComputeSlices), true
		}
	}
	g, _, _ := strings.Cut(d.MIGProfile, "g.")
	if n, err := strconv.Atoi(g); err == nil && n > 0 && n <= 7 {
		return float64(n) / 7, false
	}
	return 1, false
}

// matches reports whether labels include every wanted label. A wanted key
// also matches its Prometheus-sanitised form ("cloud.google.com/gke-spot"
// as "cloud_google_com_gke_spot"), the form kube-state-metrics exports.
func matches(labels, want map[string]string) bool {
	if len(want) == 0 {
		return false
	}
	for k, v := range want {
		got, ok := labels[k]
		if !ok {
			got, ok = labels[sanitise(k)]
		}
		if !ok || got != v {
			return false
		}
	}
	return true
}

func sanitise(key string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, key)
}
