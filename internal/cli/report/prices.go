package report

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// priceFile extends gpu's price file with per-node-label rules:
//
//	currency: EUR
//	prices: {H100-80GB: 2.45}
//	nodeRules:
//	  - labels: {cloud.google.com/gke-spot: "true"}
//	    perHour: 0.9
type priceFile struct {
	gpu.PriceFile `json:",inline"`
	NodeRules     []usage.PriceRule `json:"nodeRules,omitempty"`
}

func loadPricing(path string) (usage.Pricing, error) {
	c := gpu.Default()
	if path == "" {
		return usage.Pricing{Catalogue: c}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return usage.Pricing{}, fmt.Errorf("--prices: %v", err)
	}
	var pf priceFile
	if err := yaml.UnmarshalStrict(data, &pf); err != nil {
		return usage.Pricing{}, fmt.Errorf("%s: %v; expected fields currency, prices (model: price per GPU-hour) and nodeRules", path, err)
	}
	for i, r := range pf.NodeRules {
		if len(r.Labels) == 0 || r.PerHour < 0 || r.PerHour > 1000 {
			return usage.Pricing{}, fmt.Errorf("%s: nodeRules[%d]: want labels to match and a perHour price of 0..1000", path, i)
		}
	}
	if len(pf.Prices) > 0 {
		checked, err := gpu.ParsePrices(mustJSON(pf.PriceFile), path, c)
		if err != nil {
			return usage.Pricing{}, err
		}
		if c, err = c.WithPrices(checked); err != nil {
			return usage.Pricing{}, fmt.Errorf("%s: %v", path, err)
		}
	} else if pf.Currency != "" {
		if c, err = c.WithPrices(gpu.PriceFile{Currency: pf.Currency}); err != nil {
			return usage.Pricing{}, err
		}
	}
	return usage.Pricing{Catalogue: c, Rules: pf.NodeRules}, nil
}

func mustJSON(pf gpu.PriceFile) []byte {
	b, err := yaml.Marshal(pf)
	if err != nil {
		panic(err)
	}
	return b
}
