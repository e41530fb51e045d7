package gpu

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Model is one GPU model of the catalogue.
type Model struct {
	// Name is the canonical name, e.g. "A100-80GB".
	Name string
	// Aliases are other spellings that name this model: the openb trace's
	// codes ("V100M16") and GPU feature discovery's product labels
	// ("NVIDIA-A100-SXM4-80GB").
	Aliases []string
	// Product is the name NVML reports, as dcgm-exporter's modelName label
	// shows it ("NVIDIA H100 80GB HBM3", "Tesla T4").
	Product string
	// Nominal is the memory the model is sold and named by ("L4 24GB"):
	// for display and for reading product labels, never for a fit.
	Nominal MiB
	// Usable is the framebuffer of one GPU as the driver reports it
	// (nvidia-smi's memory.total, DCGM_FI_DEV_FB_TOTAL, GPU feature
	// discovery's nvidia.com/gpu.memory label), below Nominal on most
	// models. Every fit decision uses it. 0 means unknown (the trace's
	// undisclosed models G1, G2, G3).
	Usable MiB
	// MIG is nil for models that cannot be partitioned.
	MIG *MIGGeometry
	// PricePerHour is the price of one GPU-hour in the catalogue's
	// currency, meaningful only when Priced: a priced 0 is free.
	PricePerHour float64
	// Priced says whether PricePerHour is known. The built-in table prices
	// every model but the trace's undisclosed ones; a price file in another
	// currency leaves unpriced every model it does not name.
	Priced bool
	// Index is the model's position in its catalogue, for dense tables.
	Index int
	// Unlisted says that the catalogue does not list the model: it is known
	// only from a node's labels (Catalogue.Unlisted), so its price and MIG
	// geometry are unknown.
	Unlisted bool
}

// MemoryKnown reports whether the model's usable framebuffer is known.
func (m *Model) MemoryKnown() bool { return m.Usable > 0 }

// Catalogue is an immutable set of GPU models with prices in one currency,
// and the models of GPUs it does not list that were met on nodes
// (Unlisted), which only grow.
type Catalogue struct {
	Currency string
	models   []*Model
	byKey    map[string]*Model
	// repriced: a price file replaced the currency, so the built-in prices
	// were dropped and only the file's are known.
	repriced bool

	mu       sync.Mutex
	unlisted map[string]*Model // by normalised product label
}

// Repriced reports whether a price file replaced the catalogue's currency,
// so that a model without a price from that file has no price at all: a
// consumer must then refuse to cost such a model rather than leave a gap
// in its totals unexplained.
func (c *Catalogue) Repriced() bool { return c.repriced }

// Models lists the catalogue's models in a stable order.
func (c *Catalogue) Models() []*Model { return c.models }

// Lookup finds a model by its canonical name, an alias, or a GPU feature
// discovery product label, ignoring case and the "NVIDIA-"/"Tesla-" prefixes,
// and then among the unlisted models met so far.
func (c *Catalogue) Lookup(name string) (*Model, bool) {
	m, ok := c.byKey[normalise(name)]
	if ok {
		return m, true
	}
	if m, ok := c.lookupProduct(name); ok {
		return m, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok = c.unlisted[normalise(name)]
	return m, ok
}

// Unlisted returns the model of a GPU that the catalogue does not list,
// known only by the product label a node carries (GPU feature discovery's
// nvidia.com/gpu.product, or a cloud's accelerator label) and the memory
// one GPU has (nvidia.com/gpu.memory; 0 when unknown). The model is named
// by the label, has no price and no MIG geometry, and Unlisted set. The
// first call for a label makes the model, with the next index after every
// model made so far; later calls return the same model, whatever memory
// they give (a GPU's own memory lives on cluster.GPU). It is safe for
// concurrent use. Callers look a label up first: Unlisted does not.
func (c *Catalogue) Unlisted(product string, usable MiB) *Model {
	key := normalise(product)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.unlisted[key]; ok {
		return m
	}
	if c.unlisted == nil {
		c.unlisted = map[string]*Model{}
	}
	m := &Model{Name: strings.TrimSpace(product), Usable: max(usable, 0), Unlisted: true, Index: len(c.models) + len(c.unlisted)}
	c.unlisted[key] = m
	return m
}

// MustLookup is Lookup for names that are known to be in the catalogue, such
// as constants in tests and demos. It panics on an unknown name.
func (c *Catalogue) MustLookup(name string) *Model {
	m, ok := c.Lookup(name)
	if !ok {
		panic(fmt.Sprintf("gpu: model %q is not in the catalogue", name))
	}
	return m
}

// Names lists the canonical names of the catalogue's models.
func (c *Catalogue) Names() []string {
	names := make([]string, len(c.models))
	for i, m := range c.models {
		names[i] = m.Name
	}
	return names
}

// UnknownModelError says that a GPU model name is not in the catalogue.
type UnknownModelError struct {
	Name  string
	Known []string
}

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("unknown GPU model %q (known models: %s); use one of those names or aliases", e.Name, strings.Join(e.Known, ", "))
}

// Resolve is Lookup that returns an *UnknownModelError for unknown names.
func (c *Catalogue) Resolve(name string) (*Model, error) {
	if m, ok := c.Lookup(name); ok {
		return m, nil
	}
	return nil, &UnknownModelError{Name: name, Known: c.Names()}
}

// lookupProduct matches product labels such as "NVIDIA-H100-80GB-HBM3" or
// "Tesla-V100-SXM2-16GB" that are not listed as aliases: the longest model
// family found in the label as whole dash-separated parts wins, and a
// memory size in the label picks between variants of one family. Whole
// parts only: "T4G" is not a T4, nor "GH200" an H200.
func (c *Catalogue) lookupProduct(label string) (*Model, bool) {
	key := normalise(label)
	var best *Model
	bestLen := 0
	for _, m := range c.models {
		family := modelFamily(normalise(m.Name))
		if len(family) < 2 || !hasParts(key, family) {
			continue
		}
		score := len(family)
		if m.Nominal > 0 && hasParts(key, fmt.Sprintf("%dGB", int64(m.Nominal)/1024)) {
			score += 100
		}
		if score > bestLen {
			best, bestLen = m, score
		}
	}
	return best, best != nil
}

// hasParts reports whether the dash-separated parts of want appear, in
// order and whole, among those of key: "H100" in "H100-80GB-HBM3", not in
// "GH100".
func hasParts(key, want string) bool {
	return strings.Contains("-"+key+"-", "-"+want+"-")
}

// modelFamily is a normalised name up to its first part with a digit:
// "H100" of "H100-80GB", "RTX-PRO-6000" of "RTX-PRO-6000", so that a
// family is never a bare word such as "RTX".
func modelFamily(name string) string {
	parts := strings.Split(name, "-")
	for i, p := range parts {
		if strings.ContainsAny(p, "0123456789") {
			return strings.Join(parts[:i+1], "-")
		}
	}
	return name
}

func normalise(name string) string {
	k := strings.ToUpper(strings.TrimSpace(name))
	k = strings.ReplaceAll(k, " ", "-")
	k = strings.ReplaceAll(k, "_", "-")
	for _, prefix := range []string{"NVIDIA-", "TESLA-"} {
		k = strings.TrimPrefix(k, prefix)
	}
	return k
}

// newCatalogue indexes models by name and aliases; two models sharing a
// key are a *duplicateKeyError.
func newCatalogue(currency string, models []*Model) (*Catalogue, error) {
	c := &Catalogue{Currency: currency, byKey: map[string]*Model{}}
	for i, m := range models {
		m.Index = i
		for _, k := range append([]string{m.Name}, m.Aliases...) {
			nk := normalise(k)
			if other, dup := c.byKey[nk]; dup && other != m {
				return nil, &duplicateKeyError{key: k, first: other, second: m}
			}
			c.byKey[nk] = m
		}
	}
	c.models = models
	return c, nil
}

// clone copies the catalogue so that prices can be changed without touching
// the original.
func (c *Catalogue) clone() *Catalogue {
	models := make([]*Model, len(c.models))
	for i, m := range c.models {
		cp := *m
		models[i] = &cp
	}
	out, err := newCatalogue(c.Currency, models)
	if err != nil {
		panic(fmt.Sprintf("gpu: cloning a valid catalogue: %v", err)) // its keys were checked when it was built
	}
	out.repriced = c.repriced
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.unlisted) > 0 {
		out.unlisted = make(map[string]*Model, len(c.unlisted))
		for k, m := range c.unlisted {
			cp := *m
			out.unlisted[k] = &cp
		}
	}
	return out
}

// MIGProfile finds a MIG profile by name on the first model of the
// catalogue that has it (profiles of one name have nearly one memory size on
// every model that has them: the nominal size, capped at the model's share
// of usable memory).
func (c *Catalogue) MIGProfile(name string) (Profile, bool) {
	for _, m := range c.models {
		if m.MIG != nil {
			if p, ok := m.MIG.Profile(name); ok {
				return p, true
			}
		}
	}
	return Profile{}, false
}

// SortedByMemory returns the models with known memory, smallest usable
// memory first.
func (c *Catalogue) SortedByMemory() []*Model {
	var out []*Model
	for _, m := range c.models {
		if m.MemoryKnown() {
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Usable < out[j].Usable })
	return out
}
