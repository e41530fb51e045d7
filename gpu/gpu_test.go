package gpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMIGFit(t *testing.T) {
	cases := map[string]struct {
		model    string
		profiles []string
		want     string // layout, or "" when it must not fit
	}{
		"a100-40 seven 1g.5gb":            {"A100-40GB", rep("1g.5gb", 7), "1g.5gb@0,1g.5gb@1,1g.5gb@2,1g.5gb@3,1g.5gb@4,1g.5gb@5,1g.5gb@6"},
		"a100-40 eight 1g.5gb":            {"A100-40GB", rep("1g.5gb", 8), ""},
		"a100-40 four 1g.10gb":            {"A100-40GB", rep("1g.10gb", 4), "1g.10gb@0,1g.10gb@2,1g.10gb@4,1g.10gb@6"},
		"a100-40 five 1g.10gb":            {"A100-40GB", rep("1g.10gb", 5), ""},
		"a100-40 three 2g.10gb":           {"A100-40GB", rep("2g.10gb", 3), "2g.10gb@0,2g.10gb@2,2g.10gb@4"},
		"a100-40 four 2g.10gb":            {"A100-40GB", rep("2g.10gb", 4), ""},
		"a100-40 two 3g.20gb":             {"A100-40GB", rep("3g.20gb", 2), "3g.20gb@0,3g.20gb@4"},
		"a100-40 4g+3g":                   {"A100-40GB", []string{"3g.20gb", "4g.20gb"}, "4g.20gb@0,3g.20gb@4"},
		"a100-40 two 4g":                  {"A100-40GB", rep("4g.20gb", 2), ""},
		"a100-40 7g alone":                {"A100-40GB", []string{"7g.40gb"}, "7g.40gb@0"},
		"a100-40 7g+1g":                   {"A100-40GB", []string{"7g.40gb", "1g.5gb"}, ""},
		"a100-40 3x2g+1g":                 {"A100-40GB", []string{"2g.10gb", "2g.10gb", "2g.10gb", "1g.5gb"}, "2g.10gb@0,2g.10gb@2,2g.10gb@4,1g.5gb@6"},
		"a100-40 3g+2g+2g":                {"A100-40GB", []string{"3g.20gb", "2g.10gb", "2g.10gb"}, "2g.10gb@0,2g.10gb@2,3g.20gb@4"},
		"a100-40 3g+2g+2g+1g (8 compute)": {"A100-40GB", []string{"3g.20gb", "2g.10gb", "2g.10gb", "1g.5gb"}, ""},
		"a100-40 3g+2g+1g+1g":             {"A100-40GB", []string{"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"}, "2g.10gb@0,1g.5gb@2,1g.5gb@3,3g.20gb@4"},
		"a100-40 4g+1g.10gb+1g.10gb":      {"A100-40GB", []string{"4g.20gb", "1g.10gb", "1g.10gb"}, "4g.20gb@0,1g.10gb@4,1g.10gb@6"},
		"a100-40 4g+2g+1g":                {"A100-40GB", []string{"4g.20gb", "2g.10gb", "1g.5gb"}, "4g.20gb@0,2g.10gb@4,1g.5gb@6"},
		"h100 3g.40gb+3g.40gb":            {"H100-80GB", []string{"3g.40gb", "3g.40gb"}, "3g.40gb@0,3g.40gb@4"},
		"h100 seven 1g.10gb":              {"H100-80GB", rep("1g.10gb", 7), "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"},
		"h100 four 1g.20gb":               {"H100-80GB", rep("1g.20gb", 4), "1g.20gb@0,1g.20gb@2,1g.20gb@4,1g.20gb@6"},
		"h100 1g.20gb x3 + 1g.10gb x2":    {"H100-80GB", []string{"1g.20gb", "1g.20gb", "1g.20gb", "1g.10gb", "1g.10gb"}, "1g.20gb@0,1g.20gb@2,1g.10gb@4,1g.10gb@5,1g.20gb@6"},
		"h100 1g.20gb x3 + 1g.10gb x3":    {"H100-80GB", []string{"1g.20gb", "1g.20gb", "1g.20gb", "1g.10gb", "1g.10gb", "1g.10gb"}, ""},
		"h100 a100 profile":               {"H100-80GB", []string{"1g.5gb"}, ""},
		"h200 4g+3g":                      {"H200-141GB", []string{"4g.71gb", "3g.71gb"}, "4g.71gb@0,3g.71gb@4"},
		"h200 two 1g.35gb + 2g.35gb":      {"H200-141GB", []string{"1g.35gb", "1g.35gb", "2g.35gb"}, "1g.35gb@0,1g.35gb@2,2g.35gb@4"},
		"h200 7g.141gb + 1g.18gb":         {"H200-141GB", []string{"7g.141gb", "1g.18gb"}, ""},
		"a30 four 1g.6gb":                 {"A30", rep("1g.6gb", 4), "1g.6gb@0,1g.6gb@1,1g.6gb@2,1g.6gb@3"},
		"a30 2g+2g+1g":                    {"A30", []string{"2g.12gb", "2g.12gb", "1g.6gb"}, ""},
		"b200 two 3g.90gb":                {"B200", rep("3g.90gb", 2), "3g.90gb@0,3g.90gb@4"},
		"b200 seven 1g.23gb":              {"B200", rep("1g.23gb", 7), "1g.23gb@0,1g.23gb@1,1g.23gb@2,1g.23gb@3,1g.23gb@4,1g.23gb@5,1g.23gb@6"},
		"gb200 4g+3g":                     {"GB200", []string{"4g.93gb", "3g.93gb"}, "4g.93gb@0,3g.93gb@4"},
		"h100 nvl five 1g.24gb":           {"H100-NVL", rep("1g.24gb", 5), ""},
		"gh200 three 2g.24gb + 1g.12gb":   {"GH200", []string{"2g.24gb", "2g.24gb", "2g.24gb", "1g.12gb"}, "2g.24gb@0,2g.24gb@2,2g.24gb@4,1g.12gb@6"},
		"rtx pro 6000 four 1g.24gb":       {"RTX-PRO-6000", rep("1g.24gb", 4), "1g.24gb@0,1g.24gb@1,1g.24gb@2,1g.24gb@3"},
		"rtx pro 6000 2g+1g+1g":           {"RTX-PRO-6000", []string{"2g.48gb", "1g.24gb", "1g.24gb"}, "2g.48gb@0,1g.24gb@2,1g.24gb@3"},
		"rtx pro 6000 4g+1g":              {"RTX-PRO-6000", []string{"4g.96gb", "1g.24gb"}, ""},
	}
	c := Default()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := c.MustLookup(tc.model).MIG
			layout, err := g.Fit(tc.profiles)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("Fit(%v) = %s, want no fit", tc.profiles, layout)
				}
				return
			}
			if err != nil {
				t.Fatalf("Fit(%v): %v", tc.profiles, err)
			}
			if diff := cmp.Diff(tc.want, layout.String()); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
			if err := g.Validate(layout); err != nil {
				t.Errorf("Fit returned an invalid layout: %v", err)
			}
		})
	}
}

func rep(p string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = p
	}
	return out
}

// TestMaximalLayouts checks every enumerated layout against the placement
// rules independently: valid, and no placement can be added.
func TestMaximalLayouts(t *testing.T) {
	for _, name := range []string{"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "A30", "B200", "RTX-PRO-6000"} {
		t.Run(name, func(t *testing.T) {
			g := Default().MustLookup(name).MIG
			layouts := g.MaximalLayouts()
			if len(layouts) == 0 {
				t.Fatal("no layouts")
			}
			seen := map[string]bool{}
			for _, l := range layouts {
				if seen[l.String()] {
					t.Errorf("layout %s listed twice", l)
				}
				seen[l.String()] = true
				if err := g.Validate(l); err != nil {
					t.Errorf("layout %s: %v", l, err)
				}
				for _, p := range g.Profiles {
					for _, s := range p.Starts {
						bigger := append(append(Layout(nil), l...), Slice{p.Name, s})
						if g.Validate(bigger) == nil {
							t.Errorf("layout %s is not maximal: %s@%d can be added", l, p.Name, s)
						}
					}
				}
			}
			whole := g.Profiles[len(g.Profiles)-1].Name
			for _, want := range []string{whole, "4g", "2g"} {
				found := false
				for k := range seen {
					if strings.HasPrefix(k, want) {
						found = true
					}
				}
				if !found {
					t.Errorf("no maximal layout starts with a %s profile", want)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	cases := map[string]string{
		"V100M16":                 "V100-16GB",
		"v100m32":                 "V100-32GB",
		"NVIDIA-A100-SXM4-80GB":   "A100-80GB",
		"NVIDIA-A100-PCIE-40GB":   "A100-40GB",
		"NVIDIA-H100-80GB-HBM3":   "H100-80GB",
		"NVIDIA-H200-141GB-HBM3e": "H200-141GB",
		"NVIDIA-L40S":             "L40S",
		"NVIDIA-L4":               "L4",
		"NVIDIA-A10":              "A10",
		"Tesla-T4":                "T4",
		"Tesla-V100-SXM2-32GB":    "V100-32GB",
		"G2":                      "G2",
		"NVIDIA A30":              "A30",
		"NVIDIA-GH200-480GB":      "GH200",
		"NVIDIA-H100-PCIe-80GB":   "H100-PCIe",
	}
	for in, want := range cases {
		m, ok := Default().Lookup(in)
		if !ok {
			t.Errorf("Lookup(%q) found nothing, want %s", in, want)
			continue
		}
		if m.Name != want {
			t.Errorf("Lookup(%q) = %s, want %s", in, m.Name, want)
		}
	}
	// A family matches as whole dash-separated parts only: the T4G of AWS
	// g5g instances is not a T4, an L40G would not be an L40.
	for _, bad := range []string{"", "RTX-4090", "Radeon", "G", "t4g", "NVIDIA-T4G", "A100X", "XH100"} {
		if m, ok := Default().Lookup(bad); ok {
			t.Errorf("Lookup(%q) = %s, want not found", bad, m.Name)
		}
	}
	if _, err := Default().Resolve("RTX-4090"); err == nil || !strings.Contains(err.Error(), "known models") {
		t.Errorf("Resolve of an unknown model: %v", err)
	}
}

func TestPrices(t *testing.T) {
	c := Default()
	pf, err := ParsePrices([]byte("currency: USD\nprices:\n  NVIDIA-H100-80GB-HBM3: 2.5\n  t4: 0.2\n"), "prices.yaml", c)
	if err != nil {
		t.Fatal(err)
	}
	priced, err := c.WithPrices(pf)
	if err != nil {
		t.Fatal(err)
	}
	if got := priced.MustLookup("H100-80GB").PricePerHour; got != 2.5 {
		t.Errorf("H100 price = %v, want 2.5", got)
	}
	if priced.Currency != "USD" {
		t.Errorf("currency = %s", priced.Currency)
	}
	if got := c.MustLookup("H100-80GB").PricePerHour; got == 2.5 {
		t.Error("WithPrices changed the original catalogue")
	}
	bad := map[string]string{
		"unknown field": "prices: {T4: 1}\ndiscount: 3\n",
		"unknown model": "prices: {RTX-4090: 1}\n",
		"negative":      "prices: {T4: -1}\n",
		"absurd":        "prices: {T4: 1e9}\n",
		"empty":         "",
		"not yaml":      "prices: [\n",
		"string price":  "prices: {T4: cheap}\n",
		"priced twice":  "prices: {T4: 1, Tesla-T4: 2}\n",
		"bad currency":  "currency: US Dollar\nprices: {T4: 1}\n",
		"two docs":      "prices: {T4: 1}\n---\nprices: {T4: 2}\n",
	}
	for name, doc := range bad {
		if _, err := ParsePrices([]byte(doc), "p.yaml", c); err == nil || !strings.HasPrefix(err.Error(), "p.yaml") {
			t.Errorf("%s: err = %v, want an error naming the file", name, err)
		}
	}
}

// A price file in another currency must not leave the built-in EUR prices
// in place under its label, and a price of 0 is free, not unknown.
func TestPricesCurrencyAndFree(t *testing.T) {
	c := Default()
	if !c.MustLookup("L4").Priced || c.MustLookup("G1").Priced {
		t.Fatal("built-in table: L4 must be priced, the undisclosed G1 not")
	}
	pf, err := ParsePrices([]byte("currency: usd\nprices: {H100-80GB: 3.1, T4: 0}\n"), "usd.yaml", c)
	if err != nil {
		t.Fatal(err)
	}
	usd, err := c.WithPrices(pf)
	if err != nil {
		t.Fatal(err)
	}
	if usd.Currency != "USD" || !usd.Repriced() {
		t.Errorf("currency %s, repriced %v; want USD, true", usd.Currency, usd.Repriced())
	}
	if l4 := usd.MustLookup("L4"); l4.Priced {
		t.Errorf("L4 keeps its EUR price %v under USD", l4.PricePerHour)
	}
	if t4 := usd.MustLookup("T4"); !t4.Priced || t4.PricePerHour != 0 {
		t.Errorf("T4 priced 0: Priced=%v %v, want free", t4.Priced, t4.PricePerHour)
	}
	// The same currency keeps the rest of the table.
	pf, err = ParsePrices([]byte("currency: EUR\nprices: {T4: 0}\n"), "eur.yaml", c)
	if err != nil {
		t.Fatal(err)
	}
	eur, _ := c.WithPrices(pf)
	if eur.Repriced() || !eur.MustLookup("L4").Priced {
		t.Error("a file in the catalogue's own currency dropped the other prices")
	}
	// Type errors name line and field.
	_, err = ParsePrices([]byte("prices:\n  T4: 0.3\n  L4: \"x\"\n"), "p.yaml", c)
	if err == nil || !strings.Contains(err.Error(), "p.yaml:3: prices.L4") {
		t.Errorf("err = %v, want it placed at p.yaml:3: prices.L4", err)
	}
}

func FuzzParsePrices(f *testing.F) {
	f.Add([]byte("currency: EUR\nprices: {T4: 0.3}\n"))
	f.Add([]byte(`{"prices": {"H100": 2}}`))
	f.Add([]byte("prices: {T4: .nan}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := ParsePrices(data, "fuzz", Default())
		if err != nil {
			return
		}
		if _, err := Default().WithPrices(pf); err != nil {
			t.Fatalf("parsed file not applicable: %v", err)
		}
	})
}

// TestUsableMemory: every model of known memory reports no more usable
// memory than its nominal size, and no MIG slice claims more than its share
// of the usable memory.
func TestUsableMemory(t *testing.T) {
	for _, m := range Default().Models() {
		if (m.Usable == 0) != (m.Nominal == 0) {
			t.Errorf("%s: usable %d MiB, nominal %d MiB: give both or neither", m.Name, m.Usable, m.Nominal)
		}
		if m.Usable > m.Nominal {
			t.Errorf("%s: usable %d MiB above nominal %d MiB", m.Name, m.Usable, m.Nominal)
		}
		if m.MIG == nil {
			continue
		}
		for _, p := range m.MIG.Profiles {
			if share := m.Usable * MiB(p.Slots) / MiB(m.MIG.MemorySlots); p.Memory > share {
				t.Errorf("%s %s: %d MiB, more than its share %d MiB of %d usable", m.Name, p.Name, p.Memory, share, m.Usable)
			}
		}
	}
}
