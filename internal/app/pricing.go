package app

import (
	"fmt"
	"os"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/yamldoc"
	"github.com/gpupack/gpupack/usage"
)

// priceFile extends gpu's price file with per-node-label rules:
//
//	currency: EUR
//	prices: {H100-80GB: 2.45}
//	nodeRules:
//	  - labels: {cloud.google.com/gke-spot: "true"}
//	    perHour: 0.9
//
// Rules' prices are in the file's currency, like its model prices.
type priceFile struct {
	gpu.PriceFile
	NodeRules []usage.PriceRule `json:"nodeRules,omitempty"`
}

// LoadPricing reads a price file (the format of --prices) over the built-in
// catalogue; "" is the catalogue's own prices. report, plan and serve read
// prices with it.
func LoadPricing(path string) (usage.Pricing, error) {
	c := gpu.Default()
	if path == "" {
		return usage.Pricing{Catalogue: c}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return usage.Pricing{}, fmt.Errorf("--prices: %v", err)
	}
	return parsePricing(data, path, c)
}

func parsePricing(data []byte, path string, c *gpu.Catalogue) (usage.Pricing, error) {
	var pf priceFile
	doc, err := yamldoc.Decode(data, path, &pf)
	if err != nil {
		return usage.Pricing{}, err
	}
	if len(pf.Prices) == 0 && len(pf.NodeRules) == 0 {
		return usage.Pricing{}, doc.Errorf(nil, "no prices given; add prices per model (`prices: {H100-80GB: 2.45}`) or nodeRules per node label")
	}
	for i, r := range pf.NodeRules {
		if len(r.Labels) == 0 {
			return usage.Pricing{}, doc.Errorf([]any{"nodeRules", i}, "no labels to match; want labels such as {cloud.google.com/gke-spot: \"true\"}")
		}
		if r.PerHour < 0 || r.PerHour > gpu.MaxPricePerHour {
			return usage.Pricing{}, doc.Errorf([]any{"nodeRules", i, "perHour"}, "%v is not a price per GPU-hour; want 0 (free) to %d", r.PerHour, gpu.MaxPricePerHour)
		}
	}
	if err := pf.Check(doc, c); err != nil {
		return usage.Pricing{}, err
	}
	if c, err = c.WithPrices(pf.PriceFile); err != nil {
		return usage.Pricing{}, fmt.Errorf("%s: %v", path, err)
	}
	return usage.Pricing{Catalogue: c, Rules: pf.NodeRules}, nil
}

// PricedNodes returns pricing with its NodeLabels taken from the nodes of s,
// so that price rules match nodes by their labels even where Prometheus has
// no kube_node_labels. pricing is not changed.
func PricedNodes(pricing usage.Pricing, s *cluster.Snapshot) usage.Pricing {
	pricing.NodeLabels = make(map[string]map[string]string, len(s.Nodes))
	for _, n := range s.Nodes {
		pricing.NodeLabels[n.Name] = n.Labels
	}
	return pricing
}
