package gpu

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/internal/util/yamldoc"
)

// builtinData is the built-in catalogue, in the format of a catalogue file.
//
//go:embed catalogue.yaml
var builtinData []byte

// CatalogueFile is a catalogue in its file format (gpu/catalogue.yaml is
// the built-in one, with every field explained). In YAML (JSON is accepted
// too):
//
//	currency: EUR
//	models:
//	  - name: B300
//	    product: NVIDIA B300 SXM6 AC
//	    aliases: [NVIDIA-B300-SXM6-AC]
//	    nominalGiB: 288
//	    usableMiB: 275040
//	    pricePerHour: 7.10
//	    mig:
//	      memorySlots: 8
//	      computeSlices: 7
//	      profiles:
//	        - {name: 1g.34gb, compute: 1, slots: 1, starts: [0, 1, 2, 3, 4, 5, 6]}
type CatalogueFile struct {
	// Currency of the prices; a file that extends the built-in catalogue
	// may leave it out, and otherwise must give the built-in currency (use
	// a price file to change currency).
	Currency string      `json:"currency,omitempty"`
	Models   []FileModel `json:"models"`
}

// FileModel is one model of a catalogue file.
type FileModel struct {
	Name         string   `json:"name"`
	Product      string   `json:"product,omitempty"`
	Aliases      []string `json:"aliases,omitempty"`
	NominalGiB   float64  `json:"nominalGiB,omitempty"`
	UsableMiB    int64    `json:"usableMiB,omitempty"`
	PricePerHour *float64 `json:"pricePerHour,omitempty"`
	MIG          *FileMIG `json:"mig,omitempty"`
}

// FileMIG is a model's MIG geometry in a catalogue file.
type FileMIG struct {
	MemorySlots   int           `json:"memorySlots"`
	ComputeSlices int           `json:"computeSlices"`
	Profiles      []FileProfile `json:"profiles"`
}

// FileProfile is one MIG profile in a catalogue file; its memory is read
// from its name ("3g.40gb": 40 GiB) and capped at its share of the model's
// usable memory.
type FileProfile struct {
	Name    string `json:"name"`
	Compute int    `json:"compute"`
	Slots   int    `json:"slots"`
	Starts  []int  `json:"starts"`
}

// Bounds of a catalogue file's figures: beyond them a figure is a typo.
const (
	maxMemorySlots = 32 // a layout is a 32-bit mask of memory slots
	maxUsableMiB   = 16 << 20
	maxModels      = 1000
)

var profileName = regexp.MustCompile(`^([1-9][0-9]?)g\.([1-9][0-9]{0,3})gb$`)

// ParseCatalogue reads a catalogue file (one YAML or JSON document) on its
// own, as the built-in data is read. source names the file in errors, which
// give the line and field path of each mistake.
func ParseCatalogue(data []byte, source string) (*Catalogue, error) {
	cf, doc, err := decodeCatalogue(data, source)
	if err != nil {
		return nil, err
	}
	if cf.Currency == "" {
		return nil, doc.Errorf([]any{"currency"}, "no currency given; add one such as `currency: EUR`")
	}
	return buildCatalogue(cf, doc, nil)
}

// Extend returns a copy of the catalogue with a catalogue file's models
// applied: an entry whose name (or alias) names a model of the catalogue
// replaces that model, in its place; other entries are added at the end.
// source names the file in errors. The file's currency, when given, must be
// the catalogue's: a price file (WithPrices) is the way to change currency.
func (c *Catalogue) Extend(data []byte, source string) (*Catalogue, error) {
	cf, doc, err := decodeCatalogue(data, source)
	if err != nil {
		return nil, err
	}
	if cf.Currency != "" && !strings.EqualFold(cf.Currency, c.Currency) {
		return nil, doc.Errorf([]any{"currency"}, "%q differs from the catalogue's %s; give prices in %s, or change currency with a price file (--prices)", cf.Currency, c.Currency, c.Currency)
	}
	cf.Currency = c.Currency
	return buildCatalogue(cf, doc, c)
}

func decodeCatalogue(data []byte, source string) (*CatalogueFile, *yamldoc.Doc, error) {
	var cf CatalogueFile
	doc, err := yamldoc.Decode(data, source, &cf)
	if err != nil {
		return nil, nil, err
	}
	if len(cf.Models) == 0 {
		return nil, nil, doc.Errorf(nil, "no models given; add a models list such as `models: [{name: B300, usableMiB: 275040}]`")
	}
	if len(cf.Models) > maxModels {
		return nil, nil, doc.Errorf([]any{"models"}, "%d models; at most %d are allowed", len(cf.Models), maxModels)
	}
	if cf.Currency != "" {
		if !isCurrencyCode(cf.Currency) {
			return nil, nil, doc.Errorf([]any{"currency"}, "%q is not a currency code; want three letters such as EUR or USD", cf.Currency)
		}
		cf.Currency = strings.ToUpper(cf.Currency)
	}
	return &cf, doc, nil
}

// buildCatalogue validates the file's models and indexes them, after the
// models of base (nil: none) that they do not replace.
func buildCatalogue(cf *CatalogueFile, doc *yamldoc.Doc, base *Catalogue) (*Catalogue, error) {
	var models []*Model
	if base != nil {
		models = base.clone().models
	}
	replaced := map[*Model]int{} // base model -> index of the entry that replaced it
	for i := range cf.Models {
		m, err := cf.Models[i].model(doc, []any{"models", i})
		if err != nil {
			return nil, err
		}
		if base != nil {
			if old, ok := base.byKey[normalise(m.Name)]; ok {
				if j, twice := replaced[old]; twice {
					return nil, doc.Errorf([]any{"models", i, "name"}, "models[%d] already replaces %s; give each model once", j, old.Name)
				}
				replaced[old] = i
				models[old.Index] = m
				continue
			}
		}
		models = append(models, m)
	}
	c, err := newCatalogue(cf.Currency, models)
	if err != nil {
		// Name the entry that brought the clash.
		var dup *duplicateKeyError
		if ok := asDuplicate(err, &dup); ok {
			for i, fm := range cf.Models {
				if fm.Name == dup.second.Name {
					return nil, doc.Errorf([]any{"models", i}, "%v; rename it or drop the alias", err)
				}
			}
		}
		return nil, doc.Errorf([]any{"models"}, "%v", err)
	}
	return c, nil
}

// model validates one entry; path is its place in the document.
func (fm *FileModel) model(doc *yamldoc.Doc, path []any) (*Model, error) {
	at := func(field ...any) []any { return append(append([]any{}, path...), field...) }
	name := strings.TrimSpace(fm.Name)
	if name == "" {
		return nil, doc.Errorf(at("name"), "missing; every model needs a name such as B200")
	}
	if strings.ContainsAny(name, ",=") || len(name) > 100 {
		return nil, doc.Errorf(at("name"), "%q: want a name of at most 100 characters without commas or equals signs", fm.Name)
	}
	for i, a := range fm.Aliases {
		if strings.TrimSpace(a) == "" {
			return nil, doc.Errorf(at("aliases", i), "empty alias; remove it")
		}
	}
	if fm.NominalGiB < 0 || math.IsNaN(fm.NominalGiB) || fm.NominalGiB > maxUsableMiB/1024 {
		return nil, doc.Errorf(at("nominalGiB"), "%v: want 0 (unknown) to %d GiB", fm.NominalGiB, maxUsableMiB/1024)
	}
	if fm.UsableMiB < 0 || fm.UsableMiB > maxUsableMiB {
		return nil, doc.Errorf(at("usableMiB"), "%d: want 0 (unknown) to %d MiB", fm.UsableMiB, maxUsableMiB)
	}
	m := &Model{Name: name, Product: fm.Product, Aliases: fm.Aliases, Nominal: GiB(fm.NominalGiB), Usable: MiB(fm.UsableMiB)}
	if m.Nominal > 0 && m.Usable > m.Nominal {
		return nil, doc.Errorf(at("usableMiB"), "%d MiB is more than the nominal %v GiB; usableMiB is the driver's memory.total (nvidia-smi), which is at most the size the GPU is sold by", fm.UsableMiB, fm.NominalGiB)
	}
	if fm.PricePerHour != nil {
		v := *fm.PricePerHour
		if math.IsNaN(v) || v < 0 || v > MaxPricePerHour {
			return nil, doc.Errorf(at("pricePerHour"), "%v is not a price per GPU-hour; want 0 (free) to %d", v, MaxPricePerHour)
		}
		m.PricePerHour, m.Priced = v, true
	}
	if fm.MIG != nil {
		g, err := fm.MIG.geometry(doc, at("mig"), m)
		if err != nil {
			return nil, err
		}
		m.MIG = g
	}
	return m, nil
}

// geometry validates a MIG block and builds the geometry, profile memory
// capped at its share of the model's usable memory.
func (fg *FileMIG) geometry(doc *yamldoc.Doc, path []any, m *Model) (*MIGGeometry, error) {
	at := func(field ...any) []any { return append(append([]any{}, path...), field...) }
	if m.Usable <= 0 {
		return nil, doc.Errorf(path, "a MIG model needs usableMiB, which caps its profiles' memory")
	}
	if fg.MemorySlots < 1 || fg.MemorySlots > maxMemorySlots {
		return nil, doc.Errorf(at("memorySlots"), "%d: want 1..%d (8 on A100, H100, H200 and B200; 4 on A30)", fg.MemorySlots, maxMemorySlots)
	}
	if fg.ComputeSlices < 1 || fg.ComputeSlices > fg.MemorySlots {
		return nil, doc.Errorf(at("computeSlices"), "%d: want 1..memorySlots (%d); 7 on A100, H100, H200 and B200", fg.ComputeSlices, fg.MemorySlots)
	}
	if len(fg.Profiles) == 0 {
		return nil, doc.Errorf(at("profiles"), "no profiles; list at least one, such as {name: 7g.80gb, compute: 7, slots: 8, starts: [0]}")
	}
	g := &MIGGeometry{MemorySlots: fg.MemorySlots, ComputeSlices: fg.ComputeSlices}
	seen := map[string]int{}
	for i, fp := range fg.Profiles {
		pat := func(field ...any) []any { return at(append([]any{"profiles", i}, field...)...) }
		match := profileName.FindStringSubmatch(fp.Name)
		if match == nil {
			return nil, doc.Errorf(pat("name"), "%q: want a MIG profile name such as 3g.40gb (compute slices, then memory in GB)", fp.Name)
		}
		if j, dup := seen[fp.Name]; dup {
			return nil, doc.Errorf(pat("name"), "%s is also profiles[%d]; give each profile once", fp.Name, j)
		}
		seen[fp.Name] = i
		if named, _ := strconv.Atoi(match[1]); named != fp.Compute {
			return nil, doc.Errorf(pat("compute"), "%d, but the name %s says %s", fp.Compute, fp.Name, match[1])
		}
		if fp.Compute < 1 || fp.Compute > fg.ComputeSlices {
			return nil, doc.Errorf(pat("compute"), "%d: want 1..computeSlices (%d)", fp.Compute, fg.ComputeSlices)
		}
		if fp.Slots < 1 || fp.Slots > fg.MemorySlots {
			return nil, doc.Errorf(pat("slots"), "%d: want 1..memorySlots (%d)", fp.Slots, fg.MemorySlots)
		}
		if len(fp.Starts) == 0 {
			return nil, doc.Errorf(pat("starts"), "none; list the memory slots where an instance may begin, such as [0, 4]")
		}
		for k, s := range fp.Starts {
			if s < 0 || s+fp.Slots > fg.MemorySlots {
				return nil, doc.Errorf(pat("starts", k), "%d: an instance of %d slots from slot %d would end past slot %d", s, fp.Slots, s, fg.MemorySlots-1)
			}
			if k > 0 && s <= fp.Starts[k-1] {
				return nil, doc.Errorf(pat("starts", k), "%d after %d: list starts once each, in increasing order", s, fp.Starts[k-1])
			}
		}
		gb, _ := strconv.Atoi(match[2])
		memory := min(GiB(float64(gb)), m.Usable*MiB(fp.Slots)/MiB(fg.MemorySlots))
		g.Profiles = append(g.Profiles, Profile{Name: fp.Name, Compute: fp.Compute, Slots: fp.Slots, Memory: memory, Starts: append([]int(nil), fp.Starts...)})
	}
	return g, nil
}

// duplicateKeyError says that two models of a catalogue share a name or
// alias.
type duplicateKeyError struct {
	key           string
	first, second *Model
}

func (e *duplicateKeyError) Error() string {
	return fmt.Sprintf("%q names both %s and %s", e.key, e.first.Name, e.second.Name)
}

func asDuplicate(err error, target **duplicateKeyError) bool {
	d, ok := err.(*duplicateKeyError)
	if ok {
		*target = d
	}
	return ok
}
