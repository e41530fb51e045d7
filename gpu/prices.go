package gpu

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// PriceFile overrides catalogue prices. In YAML (JSON is accepted too):
//
//	currency: EUR
//	prices:
//	  H100-80GB: 2.45      # per GPU-hour
//	  NVIDIA-L4: 0.62      # any alias or product label works
type PriceFile struct {
	Currency string             `json:"currency,omitempty"`
	Prices   map[string]float64 `json:"prices"`
}

// ParsePrices reads a price file. source names the file in errors.
// Unknown fields, unknown models and negative, NaN or absurd prices are
// rejected.
func ParsePrices(data []byte, source string, c *Catalogue) (PriceFile, error) {
	var pf PriceFile
	if err := yaml.UnmarshalStrict(data, &pf); err != nil {
		return PriceFile{}, fmt.Errorf("%s: %v; expected fields currency and prices (model: price per GPU-hour)", source, err)
	}
	if len(pf.Prices) == 0 {
		return PriceFile{}, fmt.Errorf("%s: no prices given; add a prices map such as `prices: {H100-80GB: 2.45}`", source)
	}
	keys := make([]string, 0, len(pf.Prices))
	for k := range pf.Prices {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := pf.Prices[k]
		if _, ok := c.Lookup(k); !ok {
			return PriceFile{}, fmt.Errorf("%s: prices.%s: %v", source, k, &UnknownModelError{Name: k, Known: c.Names()})
		}
		if math.IsNaN(v) || v < 0 || v > 1000 {
			return PriceFile{}, fmt.Errorf("%s: prices.%s: %v is not a price per GPU-hour (want 0..1000)", source, k, v)
		}
	}
	if pf.Currency != "" && (len(pf.Currency) > 8 || strings.ContainsAny(pf.Currency, " \t\n")) {
		return PriceFile{}, fmt.Errorf("%s: currency %q: want a short code such as EUR or USD", source, pf.Currency)
	}
	return pf, nil
}

// WithPrices returns a copy of the catalogue with the file's prices and
// currency applied. A file that changes the currency should price every
// model it cares about, since the other defaults stay as they are.
func (c *Catalogue) WithPrices(pf PriceFile) (*Catalogue, error) {
	out := c.clone()
	if pf.Currency != "" {
		out.Currency = pf.Currency
	}
	for k, v := range pf.Prices {
		m, err := out.Resolve(k)
		if err != nil {
			return nil, err
		}
		m.PricePerHour = v
	}
	return out, nil
}
