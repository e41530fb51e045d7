package gpu

import (
	"strconv"
	"strings"
	"sync"
)

// Default returns the built-in catalogue, prices in EUR per GPU-hour.
//
// The prices are round on-demand figures for planning, not quotes; override
// them with WithPrices. Models are listed smallest memory first within each
// generation. The trace's undisclosed models G1, G2 and G3 have unknown
// memory and price and are treated as whole-GPU-only.
func Default() *Catalogue {
	defaultOnce.Do(func() {
		models := builtinModels()
		for _, m := range models {
			m.Priced = m.PricePerHour > 0
		}
		defaultCatalogue = newCatalogue("EUR", models)
	})
	return defaultCatalogue
}

var (
	defaultOnce      sync.Once
	defaultCatalogue *Catalogue
)

func builtinModels() []*Model {
	return []*Model{
		{Name: "H200-141GB", Product: "NVIDIA H200", Aliases: []string{"H200", "H200-141GB-HBM3E"}, Memory: GiB(141), PricePerHour: 3.80,
			MIG: mig7("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")},
		{Name: "H100-80GB", Product: "NVIDIA H100 80GB HBM3", Aliases: []string{"H100", "H100-80GB-HBM3", "H100-SXM5-80GB", "H100-PCIE"}, Memory: GiB(80), PricePerHour: 2.90,
			MIG: mig7("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")},
		{Name: "A100-80GB", Product: "NVIDIA A100-SXM4-80GB", Aliases: []string{"A100-SXM4-80GB", "A100-80GB-PCIE"}, Memory: GiB(80), PricePerHour: 2.10,
			MIG: mig7("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")},
		{Name: "A100-40GB", Product: "NVIDIA A100-SXM4-40GB", Aliases: []string{"A100", "A100-SXM4-40GB", "A100-PCIE-40GB"}, Memory: GiB(40), PricePerHour: 1.50,
			MIG: mig7("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")},
		{Name: "L40S", Product: "NVIDIA L40S", Aliases: []string{"L40S-48GB"}, Memory: GiB(48), PricePerHour: 1.74},
		{Name: "A30", Product: "NVIDIA A30", Aliases: []string{"A30-24GB"}, Memory: GiB(24), PricePerHour: 0.95, MIG: migA30()},
		{Name: "A10", Product: "NVIDIA A10", Aliases: []string{"A10-24GB"}, Memory: GiB(24), PricePerHour: 0.90},
		{Name: "L4", Product: "NVIDIA L4", Aliases: []string{"L4-24GB"}, Memory: GiB(24), PricePerHour: 0.70},
		{Name: "V100-32GB", Product: "Tesla V100-SXM2-32GB", Aliases: []string{"V100M32", "V100-SXM2-32GB", "V100-PCIE-32GB"}, Memory: GiB(32), PricePerHour: 1.20},
		{Name: "V100-16GB", Product: "Tesla V100-SXM2-16GB", Aliases: []string{"V100M16", "V100", "V100-SXM2-16GB", "V100-PCIE-16GB"}, Memory: GiB(16), PricePerHour: 1.00},
		{Name: "T4", Product: "Tesla T4", Aliases: []string{"T4-16GB"}, Memory: GiB(16), PricePerHour: 0.35},
		{Name: "P100", Product: "Tesla P100-PCIE-16GB", Aliases: []string{"P100-16GB", "P100-PCIE-16GB", "P100-SXM2-16GB"}, Memory: GiB(16), PricePerHour: 0.55},
		{Name: "G1"},
		{Name: "G2"},
		{Name: "G3"},
	}
}

// mig7 builds the geometry shared by A100, H100 and H200: 8 memory slots and
// 7 compute slices. The six names are, in order, the single-slot 1g, the
// double-memory 1g, 2g, 3g, 4g and 7g profiles.
func mig7(g1, g1x2, g2, g3, g4, g7 string) *MIGGeometry {
	return &MIGGeometry{
		MemorySlots:   8,
		ComputeSlices: 7,
		Profiles: []Profile{
			{Name: g1, Compute: 1, Slots: 1, Memory: profileMemory(g1), Starts: []int{0, 1, 2, 3, 4, 5, 6}},
			{Name: g1x2, Compute: 1, Slots: 2, Memory: profileMemory(g1x2), Starts: []int{0, 2, 4, 6}},
			{Name: g2, Compute: 2, Slots: 2, Memory: profileMemory(g2), Starts: []int{0, 2, 4}},
			{Name: g3, Compute: 3, Slots: 4, Memory: profileMemory(g3), Starts: []int{0, 4}},
			{Name: g4, Compute: 4, Slots: 4, Memory: profileMemory(g4), Starts: []int{0}},
			{Name: g7, Compute: 7, Slots: 8, Memory: profileMemory(g7), Starts: []int{0}},
		},
	}
}

// migA30 is the A30's smaller geometry: 4 memory slots and 4 compute slices.
func migA30() *MIGGeometry {
	return &MIGGeometry{
		MemorySlots:   4,
		ComputeSlices: 4,
		Profiles: []Profile{
			{Name: "1g.6gb", Compute: 1, Slots: 1, Memory: GiB(6), Starts: []int{0, 1, 2, 3}},
			{Name: "2g.12gb", Compute: 2, Slots: 2, Memory: GiB(12), Starts: []int{0, 2}},
			{Name: "4g.24gb", Compute: 4, Slots: 4, Memory: GiB(24), Starts: []int{0}},
		},
	}
}

// profileMemory reads the nominal memory from a profile name: "3g.40gb" is
// 40 GiB.
func profileMemory(name string) MiB {
	_, mem, _ := strings.Cut(name, ".")
	n, err := strconv.Atoi(strings.TrimSuffix(mem, "gb"))
	if err != nil {
		panic("gpu: bad built-in MIG profile name " + name)
	}
	return GiB(float64(n))
}
