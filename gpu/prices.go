package gpu

import (
	"math"
	"sort"
	"strings"

	"github.com/gpupack/gpupack/internal/util/yamldoc"
)

// PriceFile overrides catalogue prices. In YAML (JSON is accepted too):
//
//	currency: EUR
//	prices:
//	  H100-80GB: 2.45      # per GPU-hour
//	  NVIDIA-L4: 0.62      # any alias or product label works
//	  T4: 0                # free: owned hardware already paid for
//
// A currency other than the catalogue's drops every built-in price: the
// file must then price each model it is used on (consumers name the
// missing ones), since a EUR price printed as USD is a wrong number.
type PriceFile struct {
	Currency string             `json:"currency,omitempty"`
	Prices   map[string]float64 `json:"prices"`
}

// MaxPricePerHour bounds a price per GPU-hour: above it a figure is taken
// for a typo (a monthly price, a price in cents) and refused.
const MaxPricePerHour = 1000

// ParsePrices reads a price file: one YAML or JSON document. source names
// the file in errors, which give the line and field. Unknown fields,
// unknown models, a model priced twice under two names and negative, NaN
// or absurd prices are rejected.
func ParsePrices(data []byte, source string, c *Catalogue) (PriceFile, error) {
	var pf PriceFile
	doc, err := yamldoc.Decode(data, source, &pf)
	if err != nil {
		return PriceFile{}, err
	}
	if len(pf.Prices) == 0 {
		return PriceFile{}, doc.Errorf(nil, "no prices given; add a prices map such as `prices: {H100-80GB: 2.45}`")
	}
	if err := pf.Check(doc, c); err != nil {
		return PriceFile{}, err
	}
	return pf, nil
}

// Check validates a decoded price file against the catalogue; doc places
// its errors (file, line, field). It normalises the currency to upper
// case.
func (pf *PriceFile) Check(doc *yamldoc.Doc, c *Catalogue) error {
	if pf.Currency != "" {
		if !isCurrencyCode(pf.Currency) {
			return doc.Errorf([]any{"currency"}, "%q is not a currency code; want three letters such as EUR or USD", pf.Currency)
		}
		pf.Currency = strings.ToUpper(pf.Currency)
	}
	keys := make([]string, 0, len(pf.Prices))
	for k := range pf.Prices {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[*Model]string{}
	for _, k := range keys {
		v := pf.Prices[k]
		m, ok := c.Lookup(k)
		if !ok {
			return doc.Errorf([]any{"prices", k}, "%v", &UnknownModelError{Name: k, Known: c.Names()})
		}
		if other, twice := seen[m]; twice {
			return doc.Errorf([]any{"prices", k}, "%s and %s both name %s; price each model once", other, k, m.Name)
		}
		seen[m] = k
		if math.IsNaN(v) || v < 0 || v > MaxPricePerHour {
			return doc.Errorf([]any{"prices", k}, "%v is not a price per GPU-hour; want 0 (free) to %d", v, MaxPricePerHour)
		}
	}
	return nil
}

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return false
		}
	}
	return true
}

// WithPrices returns a copy of the catalogue with the file's prices and
// currency applied. A currency other than the catalogue's drops every
// price the file does not give (see Repriced).
func (c *Catalogue) WithPrices(pf PriceFile) (*Catalogue, error) {
	out := c.clone()
	if pf.Currency != "" && !strings.EqualFold(pf.Currency, c.Currency) {
		out.Currency = strings.ToUpper(pf.Currency)
		out.repriced = true
		for _, m := range out.models {
			m.PricePerHour, m.Priced = 0, false
		}
	}
	for k, v := range pf.Prices {
		m, err := out.Resolve(k)
		if err != nil {
			return nil, err
		}
		m.PricePerHour, m.Priced = v, true
	}
	return out, nil
}
