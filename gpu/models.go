package gpu

import (
	"fmt"
	"sync"
)

// Default returns the built-in catalogue, prices in EUR per GPU-hour: the
// data file gpu/catalogue.yaml, embedded, whose comments cite the source
// of every figure.
//
// The prices are round on-demand figures for planning, not quotes; override
// them with WithPrices, and extend or override the models with Extend. The
// trace's undisclosed models G1, G2 and G3 have unknown memory and price
// and are treated as whole-GPU-only.
//
// A MIG profile's memory is the size its name carries, capped at its share
// of the GPU's usable memory (slots / memory slots of Usable), so that the
// slices of one GPU never add up to more than the GPU has. The driver gives
// slices less than their names say (nvidia-smi mig -lgip on an H200 in
// NVIDIA/mig-parted#120: 1g.18gb 16.00 GiB, 3g.71gb 69.50 GiB), so the
// figure is an upper bound, not a measured size.
func Default() *Catalogue {
	defaultOnce.Do(func() {
		c, err := ParseCatalogue(builtinData, "gpu/catalogue.yaml")
		if err != nil {
			panic(fmt.Sprintf("gpu: the built-in catalogue is invalid: %v", err))
		}
		defaultCatalogue = c
	})
	return defaultCatalogue
}

var (
	defaultOnce      sync.Once
	defaultCatalogue *Catalogue
)
