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

// builtinModels is the built-in table. Nominal is the size the model is sold
// by; Usable is the framebuffer total the driver reports (nvidia-smi's
// memory.total, DCGM_FI_DEV_FB_TOTAL), taken from public nvidia-smi output
// of the most recent driver found, as cited beside each model. A live
// cluster's nvidia.com/gpu.memory label, where present, overrides Usable.
func builtinModels() []*Model {
	models := []*Model{
		// 143771 MiB: nvidia-smi on an H200 NVL (driver 580) in public
		// benchmark notes; no H200 SXM figure was found, and both carry the
		// same 141 GB of HBM3e.
		{Name: "H200-141GB", Product: "NVIDIA H200", Aliases: []string{"H200", "H200-141GB-HBM3E"}, Nominal: GiB(141), Usable: 143771, PricePerHour: 3.80,
			MIG: mig7("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")},
		// 81559 MiB: "NVIDIA H100 80GB HBM3" in NVIDIA/nccl#1264 (driver 550)
		// and modal-labs/modal-client#2797.
		{Name: "H100-80GB", Product: "NVIDIA H100 80GB HBM3", Aliases: []string{"H100", "H100-80GB-HBM3", "H100-SXM5-80GB", "H100-PCIE"}, Nominal: GiB(80), Usable: 81559, PricePerHour: 2.90,
			MIG: mig7("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")},
		// 81920 MiB: "NVIDIA A100-SXM4-80GB" in NVIDIA/mig-parted#31 (driver
		// 545) and modal-labs/modal-client#2797 (driver 450 reported 81252).
		{Name: "A100-80GB", Product: "NVIDIA A100-SXM4-80GB", Aliases: []string{"A100-SXM4-80GB", "A100-80GB-PCIE"}, Nominal: GiB(80), Usable: 81920, PricePerHour: 2.10,
			MIG: mig7("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")},
		// 40960 MiB: "NVIDIA A100-SXM4-40GB" in
		// bottlerocket-os/bottlerocket-core-kit#834 (driver 580) and
		// modal-labs/modal-client#2797.
		{Name: "A100-40GB", Product: "NVIDIA A100-SXM4-40GB", Aliases: []string{"A100", "A100-SXM4-40GB", "A100-PCIE-40GB"}, Nominal: GiB(40), Usable: 40960, PricePerHour: 1.50,
			MIG: mig7("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")},
		// 46068 MiB: "NVIDIA L40S" in akash-network/provider-configs#99
		// (driver 595), gpustack/gpustack#301 (driver 550) and
		// modal-labs/modal-client#2797.
		{Name: "L40S", Product: "NVIDIA L40S", Aliases: []string{"L40S-48GB"}, Nominal: GiB(48), Usable: 46068, PricePerHour: 1.74},
		// 24169 MiB is an ESTIMATE: no nvidia-smi figure for the A30 was
		// found. It is the CUDA total global memory of a public A30 device
		// query (25,343,295,488 bytes), which is below the driver's total on
		// every model where both are known (H100 81106 vs 81559, A100-40GB
		// 40339 vs 40960), so it errs towards "does not fit".
		{Name: "A30", Product: "NVIDIA A30", Aliases: []string{"A30-24GB"}, Nominal: GiB(24), Usable: 24169, PricePerHour: 0.95, MIG: migA30()},
		// 23028 MiB: "A10" in modal-labs/modal-client#2797.
		{Name: "A10", Product: "NVIDIA A10", Aliases: []string{"A10-24GB"}, Nominal: GiB(24), Usable: 23028, PricePerHour: 0.90},
		// 23034 MiB: "L4" in modal-labs/modal-client#2797.
		{Name: "L4", Product: "NVIDIA L4", Aliases: []string{"L4-24GB"}, Nominal: GiB(24), Usable: 23034, PricePerHour: 0.70},
		// 32768 MiB: "Tesla V100-SXM2-32GB" in Wan-Video/Wan2.1#5 (driver 525)
		// and a V100 PCIe 32GB in akash-network/provider-configs#90; older
		// drivers reported 32510.
		{Name: "V100-32GB", Product: "Tesla V100-SXM2-32GB", Aliases: []string{"V100M32", "V100-SXM2-32GB", "V100-PCIE-32GB"}, Nominal: GiB(32), Usable: 32768, PricePerHour: 1.20},
		// 16384 MiB: "Tesla V100-SXM2-16GB" in 1CatAI/1Cat-vLLM#85 (driver
		// 570); older drivers reported 16160.
		{Name: "V100-16GB", Product: "Tesla V100-SXM2-16GB", Aliases: []string{"V100M16", "V100", "V100-SXM2-16GB", "V100-PCIE-16GB"}, Nominal: GiB(16), Usable: 16384, PricePerHour: 1.00},
		// 15360 MiB: "Tesla T4" in modal-labs/modal-client#2797.
		{Name: "T4", Product: "Tesla T4", Aliases: []string{"T4-16GB"}, Nominal: GiB(16), Usable: 15360, PricePerHour: 0.35},
		// 16280 MiB: "Tesla P100-PCIE-16GB" in public nvidia-smi output of
		// drivers 396 to 450; no figure for the SXM2 board was found.
		{Name: "P100", Product: "Tesla P100-PCIE-16GB", Aliases: []string{"P100-16GB", "P100-PCIE-16GB", "P100-SXM2-16GB"}, Nominal: GiB(16), Usable: 16280, PricePerHour: 0.55},
		{Name: "G1"},
		{Name: "G2"},
		{Name: "G3"},
	}
	for _, m := range models {
		capMIGMemory(m)
	}
	return models
}

// capMIGMemory keeps a MIG slice within its share of the GPU's usable
// memory (slots / memory slots of Usable), so that the slices of one GPU
// never add up to more than the GPU has. Profile names carry nominal sizes;
// the driver gives slices less (nvidia-smi mig -lgip on an H200 in
// NVIDIA/mig-parted#120: 1g.18gb 16.00 GiB, 3g.71gb 69.50 GiB), so the capped
// figure is still an upper bound, not a measured size.
func capMIGMemory(m *Model) {
	if m.MIG == nil {
		return
	}
	for i := range m.MIG.Profiles {
		p := &m.MIG.Profiles[i]
		p.Memory = min(p.Memory, m.Usable*MiB(p.Slots)/MiB(m.MIG.MemorySlots))
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
