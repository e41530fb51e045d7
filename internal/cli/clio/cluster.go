package clio

import (
	"github.com/spf13/pflag"
)

// AddCatalogueFlag registers --catalogue, the file whose GPU models extend
// or override the built-in catalogue.
func AddCatalogueFlag(f *pflag.FlagSet, path *string) {
	f.StringVar(path, "catalogue", "", "GPU catalogue file (YAML or JSON, the format of gpupack's gpu/catalogue.yaml): its models are added to the built-in ones, or replace those of the same name")
}
