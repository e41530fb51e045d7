package plan

import (
	"math/rand/v2"
	"testing"

	"github.com/gpupack/gpupack/gpu"
)

var migModels = []string{"A100-40GB", "H100-80GB", "H200-141GB", "A30"}

// randomMIGInstance draws n instances of the model's profiles: uniformly
// when skewed is false, else with random weights per profile (so that some
// instances are mostly 3g, others mostly 1g or 4g, which is where packing
// is hard).
func randomMIGInstance(rng *rand.Rand, g *gpu.MIGGeometry, n int, skewed bool) []string {
	weights := make([]float64, len(g.Profiles))
	total := 0.0
	for k := range weights {
		weights[k] = 1
		if skewed {
			weights[k] = rng.Float64() * rng.Float64()
		}
		total += weights[k]
	}
	out := make([]string, n)
	for i := range out {
		x := rng.Float64() * total
		k := 0
		for ; k < len(weights)-1 && x >= weights[k]; k++ {
			x -= weights[k]
		}
		out[i] = g.Profiles[k].Name
	}
	return out
}

// checkPacking verifies every layout against the catalogue's placement
// rules and that every instance sits on a slice of its own profile.
func checkPacking(t *testing.T, g *gpu.MIGGeometry, profiles []string, p MIGPacking) {
	t.Helper()
	for i, l := range p.Layouts {
		if err := g.Validate(l); err != nil {
			t.Fatalf("GPU %d: %v", i, err)
		}
	}
	taken := map[SlicePlace]bool{}
	for i, pl := range p.Placed {
		if taken[pl] {
			t.Fatalf("instance %d shares slice %+v", i, pl)
		}
		taken[pl] = true
		if got := p.Layouts[pl.GPU][pl.Slice].Profile; got != profiles[i] {
			t.Fatalf("instance %d (%s) placed on a %s slice", i, profiles[i], got)
		}
	}
	if len(p.Layouts) < p.LowerBound || p.LowerBound < p.AreaBound {
		t.Fatalf("%d GPUs, lower bound %d, area bound %d: bounds are wrong", len(p.Layouts), p.LowerBound, p.AreaBound)
	}
}

func TestPackMIGSmall(t *testing.T) {
	cases := map[string]struct {
		model    string
		profiles []string
		want     int
	}{
		"nothing":              {"H100-80GB", nil, 0},
		"seven 1g on one":      {"H100-80GB", rep("1g.10gb", 7), 1},
		"eight 1g on two":      {"H100-80GB", rep("1g.10gb", 8), 2},
		"4g+3g pairs":          {"H100-80GB", append(rep("4g.40gb", 3), rep("3g.40gb", 3)...), 3},
		"4g alone each":        {"H100-80GB", rep("4g.40gb", 5), 5},
		"2g three per GPU":     {"A100-40GB", rep("2g.10gb", 6), 2},
		"2g+1g fill":           {"A100-40GB", append(rep("2g.10gb", 3), rep("1g.5gb", 1)...), 1},
		"a30 halves":           {"A30", rep("2g.12gb", 4), 2},
		"h200 no slot for 1g":  {"H200-141GB", []string{"7g.141gb", "3g.71gb", "3g.71gb", "1g.18gb"}, 3},
		"double-memory 1g x 4": {"H100-80GB", rep("1g.20gb", 4), 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := gpu.Default().MustLookup(tc.model).MIG
			p, err := PackMIG(g, tc.profiles)
			if err != nil {
				t.Fatal(err)
			}
			checkPacking(t, g, tc.profiles, p)
			if len(p.Layouts) != tc.want || !p.Optimal {
				t.Errorf("%d GPUs (optimal %v), want %d", len(p.Layouts), p.Optimal, tc.want)
			}
		})
	}
	if _, err := PackMIG(gpu.Default().MustLookup("H100-80GB").MIG, []string{"1g.5gb"}); err == nil {
		t.Error("an A100 profile packed onto an H100")
	}
}

// TestPackMIGRandom is the solver's acceptance test: on seeded random
// instances of up to 500 MIG instances it meets the lower bound on at
// least 95% and never needs more GPUs than first-fit-decreasing.
func TestPackMIGRandom(t *testing.T) {
	instances := 400
	if testing.Short() {
		instances = 60
	}
	rng := rand.New(rand.NewPCG(6, 500))
	atBound, atArea, proven, worse := 0, 0, 0, 0
	gapGPUs, ffdWorse, ffdExtra := 0, 0, 0
	for i := range instances {
		m := gpu.Default().MustLookup(migModels[i%len(migModels)])
		profiles := randomMIGInstance(rng, m.MIG, 1+rng.IntN(500), i%2 == 1)
		p, err := PackMIG(m.MIG, profiles)
		if err != nil {
			t.Fatal(err)
		}
		checkPacking(t, m.MIG, profiles, p)
		if len(p.Layouts) > p.FirstFitDecreasing {
			worse++
			t.Errorf("instance %d (%s, %d slices): %d GPUs, first-fit-decreasing %d", i, m.Name, len(profiles), len(p.Layouts), p.FirstFitDecreasing)
		}
		if p.Gap() == 0 {
			atBound++
		}
		if len(p.Layouts) == p.AreaBound {
			atArea++
		}
		if p.Optimal {
			proven++
		}
		gapGPUs += p.Gap()
		if p.FirstFitDecreasing > len(p.Layouts) {
			ffdWorse++
			ffdExtra += p.FirstFitDecreasing - len(p.Layouts)
		}
	}
	t.Logf("%d instances: %d at the lower bound (%.1f%%), %d at the area bound alone, %d proven optimal, %d GPUs above the bound in all; first-fit-decreasing needs more GPUs on %d (%d GPUs in all), fewer on none",
		instances, atBound, 100*float64(atBound)/float64(instances), atArea, proven, gapGPUs, ffdWorse, ffdExtra)
	if 100*atBound < 95*instances {
		t.Errorf("only %d of %d instances at the lower bound, want at least 95%%", atBound, instances)
	}
}

func BenchmarkPackMIG500(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 500))
	var cases [][]string
	var geos []*gpu.MIGGeometry
	for i := range 16 {
		m := gpu.Default().MustLookup(migModels[i%len(migModels)])
		cases = append(cases, randomMIGInstance(rng, m.MIG, 500, i%2 == 1))
		geos = append(geos, m.MIG)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := PackMIG(geos[i%16], cases[i%16]); err != nil {
			b.Fatal(err)
		}
	}
}

func rep(p string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = p
	}
	return out
}
