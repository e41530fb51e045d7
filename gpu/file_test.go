package gpu

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuiltinCatalogue checks the data file against rules the parser does
// not enforce: every model but the trace's undisclosed ones has memory and a
// price, and every MIG profile fits an empty GPU, with its memory within
// the GPU's.
func TestBuiltinCatalogue(t *testing.T) {
	c := Default()
	for _, m := range c.Models() {
		undisclosed := m.Name == "G1" || m.Name == "G2" || m.Name == "G3"
		if !undisclosed && (!m.MemoryKnown() || !m.Priced || m.Product == "") {
			t.Errorf("%s: usable %v, priced %v, product %q; want all known", m.Name, m.Usable, m.Priced, m.Product)
		}
		if m.MIG == nil {
			continue
		}
		for _, p := range m.MIG.Profiles {
			if _, err := m.MIG.Fit([]string{p.Name}); err != nil {
				t.Errorf("%s %s does not fit an empty GPU: %v", m.Name, p.Name, err)
			}
			if p.Memory <= 0 || p.Memory > m.Usable {
				t.Errorf("%s %s: memory %v outside (0, %v]", m.Name, p.Name, p.Memory, m.Usable)
			}
		}
	}
}

// TestIssueModels: the GPUs users run now are in the catalogue under their
// GPU feature discovery product labels, with the memory nvidia-smi reports
// and MIG where NVIDIA's MIG user guide lists the model.
func TestIssueModels(t *testing.T) {
	type want struct {
		name    string
		usable  MiB
		largest string // the whole-GPU MIG profile; "" without MIG
	}
	cases := map[string]want{
		"NVIDIA-B200":             {"B200", 183359, "7g.180gb"},
		"NVIDIA-GB200":            {"GB200", 189471, "7g.186gb"},
		"NVIDIA-H200-NVL":         {"H200-NVL", 143771, "7g.141gb"},
		"NVIDIA-H100-NVL":         {"H100-NVL", 95830, "7g.94gb"},
		"NVIDIA-H100-PCIe":        {"H100-PCIe", 81559, "7g.80gb"},
		"NVIDIA-GH200-480GB":      {"GH200", 97871, "7g.96gb"},
		"NVIDIA-GH200-144G-HBM3e": {"GH200-144GB", 146831, "7g.144gb"},
		"NVIDIA-H20":              {"H20", 97871, "7g.96gb"},
		"NVIDIA-L40":              {"L40", 46068, ""},
		"NVIDIA-L40S":             {"L40S", 46068, ""},
		"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition": {"RTX-PRO-6000", 97887, "4g.96gb"},
		"NVIDIA-A10G":           {"A10G", 23028, ""},
		"NVIDIA-A16":            {"A16", 15356, ""},
		"NVIDIA-H100-80GB-HBM3": {"H100-80GB", 81559, "7g.80gb"},
	}
	for label, w := range cases {
		m, ok := Default().Lookup(label)
		if !ok {
			t.Errorf("%s: not found", label)
			continue
		}
		got := want{name: m.Name, usable: m.Usable}
		if m.MIG != nil {
			got.largest = m.MIG.Profiles[len(m.MIG.Profiles)-1].Name
		}
		if diff := cmp.Diff(w, got, cmp.AllowUnexported(want{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", label, diff)
		}
	}
}

func TestParseCatalogueErrors(t *testing.T) {
	cases := map[string]struct {
		file string
		want string
	}{
		"empty":            {"", "no models given"},
		"no currency":      {"models: [{name: X}]", "currency: no currency given"},
		"bad currency":     {"currency: euro\nmodels: [{name: X}]", "c.yaml:1: currency: \"euro\" is not a currency code"},
		"unknown field":    {"currency: EUR\nmodels:\n  - name: X\n    memory: 80\n", "c.yaml:4: models[0]: unknown field \"memory\""},
		"missing name":     {"currency: EUR\nmodels:\n  - usableMiB: 100\n", "models[0].name: missing"},
		"usable > nominal": {"currency: EUR\nmodels:\n  - name: X\n    nominalGiB: 16\n    usableMiB: 20000\n", "c.yaml:5: models[0].usableMiB: 20000 MiB is more than the nominal 16 GiB"},
		"negative price":   {"currency: EUR\nmodels:\n  - name: X\n    pricePerHour: -1\n", "models[0].pricePerHour: -1 is not a price"},
		"duplicate":        {"currency: EUR\nmodels:\n  - name: X\n  - name: Y\n    aliases: [x]\n", "models[1]: \"x\" names both X and Y"},
		"mig without memory": {"currency: EUR\nmodels:\n  - name: X\n    mig: {memorySlots: 4, computeSlices: 4, profiles: [{name: 4g.24gb, compute: 4, slots: 4, starts: [0]}]}\n",
			"models[0].mig: a MIG model needs usableMiB"},
		"bad profile name": {mig("{name: big, compute: 4, slots: 4, starts: [0]}"), "models[0].mig.profiles[0].name: \"big\""},
		"compute vs name":  {mig("{name: 2g.12gb, compute: 1, slots: 2, starts: [0]}"), "profiles[0].compute: 1, but the name 2g.12gb says 2"},
		"start past end":   {mig("{name: 2g.12gb, compute: 2, slots: 2, starts: [0, 3]}"), "profiles[0].starts[1]: 3: an instance of 2 slots from slot 3 would end past slot 3"},
		"starts unordered": {mig("{name: 1g.6gb, compute: 1, slots: 1, starts: [1, 0]}"), "profiles[0].starts[1]: 0 after 1"},
		"twice":            {mig("{name: 1g.6gb, compute: 1, slots: 1, starts: [0]}, {name: 1g.6gb, compute: 1, slots: 1, starts: [1]}"), "profiles[1].name: 1g.6gb is also profiles[0]"},
		"slots":            {"currency: EUR\nmodels:\n  - name: X\n    usableMiB: 24000\n    mig: {memorySlots: 40, computeSlices: 4, profiles: [{name: 1g.6gb, compute: 1, slots: 1, starts: [0]}]}\n", "mig.memorySlots: 40: want 1..32"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCatalogue([]byte(tc.file), "c.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func mig(profiles string) string {
	return "currency: EUR\nmodels:\n  - name: X\n    usableMiB: 24000\n    mig: {memorySlots: 4, computeSlices: 4, profiles: [" + profiles + "]}\n"
}

func TestExtend(t *testing.T) {
	file := `
models:
  - name: B300
    product: NVIDIA B300 SXM6 AC
    aliases: [NVIDIA-B300-SXM6-AC]
    nominalGiB: 288
    usableMiB: 275040
    mig:
      memorySlots: 8
      computeSlices: 7
      profiles:
        - {name: 1g.34gb, compute: 1, slots: 1, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 7g.269gb, compute: 7, slots: 8, starts: [0]}
  - name: t4          # replaces the built-in T4: owned, free
    product: Tesla T4
    nominalGiB: 16
    usableMiB: 15000
    pricePerHour: 0
`
	base := Default()
	c, err := base.Extend([]byte(file), "mine.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(c.Models()), len(base.Models())+1; got != want {
		t.Errorf("%d models, want %d (one added, one replaced)", got, want)
	}
	b300, ok := c.Lookup("NVIDIA-B300-SXM6-AC")
	if !ok || b300.Priced || b300.MIG == nil || b300.Index != len(c.Models())-1 {
		t.Fatalf("B300 = %+v, want an unpriced MIG model at the end", b300)
	}
	if _, err := b300.MIG.Fit(rep("1g.34gb", 7)); err != nil {
		t.Errorf("seven 1g.34gb on a B300: %v", err)
	}
	t4 := c.MustLookup("T4")
	if t4.Usable != 15000 || !t4.Priced || t4.PricePerHour != 0 || t4.Index != base.MustLookup("T4").Index {
		t.Errorf("T4 = %+v, want the file's, in the built-in's place", t4)
	}
	if base.MustLookup("T4").Usable != 15360 {
		t.Errorf("Extend changed the base catalogue")
	}
	for name, tc := range map[string]struct{ file, want string }{
		"currency":      {"currency: USD\nmodels: [{name: X}]", "mine.yaml:1: currency: \"USD\" differs from the catalogue's EUR"},
		"twice":         {"models: [{name: T4}, {name: t4-16gb}]", "models[1].name: models[0] already replaces T4"},
		"alias clashes": {"models: [{name: X, aliases: [H100]}]", "models[0]: \"H100\" names both H100-80GB and X"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := base.Extend([]byte(tc.file), "mine.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestUnlisted(t *testing.T) {
	c, err := ParseCatalogue([]byte("currency: EUR\nmodels: [{name: A, usableMiB: 100}]"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup("NVIDIA-B300-SXM6-AC"); ok {
		t.Fatal("an unlisted product was found before it was met")
	}
	var wg sync.WaitGroup
	got := make([]*Model, 8)
	for i := range got {
		wg.Go(func() { got[i] = c.Unlisted("NVIDIA-B300-SXM6-AC", 275040) })
	}
	wg.Wait()
	for _, m := range got[1:] {
		if m != got[0] {
			t.Fatal("Unlisted made two models of one product")
		}
	}
	m := got[0]
	want := Model{Name: "NVIDIA-B300-SXM6-AC", Usable: 275040, Unlisted: true, Index: 1}
	if diff := cmp.Diff(want, *m); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if other := c.Unlisted("NVIDIA-X1", 0); other.Index != 2 || other.MemoryKnown() {
		t.Errorf("second unlisted model = %+v, want index 2, memory unknown", other)
	}
	if found, ok := c.Lookup("nvidia-b300-sxm6-ac"); !ok || found != m {
		t.Errorf("Lookup after Unlisted = %v, %v", found, ok)
	}
	priced, err := c.WithPrices(PriceFile{Prices: map[string]float64{"A": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok := priced.Lookup("NVIDIA-B300-SXM6-AC"); !ok || cp.Index != 1 {
		t.Errorf("WithPrices lost the unlisted model: %v, %v", cp, ok)
	}
}

// FuzzParseCatalogue: whatever the file, parsing does not panic, and a
// catalogue it accepts holds only models whose MIG profiles each fit an
// empty GPU, within its memory.
func FuzzParseCatalogue(f *testing.F) {
	f.Add(builtinData)
	f.Add([]byte(mig("{name: 1g.6gb, compute: 1, slots: 1, starts: [0, 1, 2, 3]}")))
	f.Add([]byte("currency: EUR\nmodels: [{name: X, aliases: [Y, y]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalogue(data, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		for _, m := range c.Models() {
			if m.MIG == nil {
				continue
			}
			for _, p := range m.MIG.Profiles {
				if _, err := m.MIG.Fit([]string{p.Name}); err != nil {
					t.Errorf("%s %s: %v", m.Name, p.Name, err)
				}
				if p.Memory > m.Usable {
					t.Errorf("%s %s: %v of %v", m.Name, p.Name, p.Memory, m.Usable)
				}
			}
		}
	})
}
