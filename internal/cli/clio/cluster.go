package clio

import (
	"github.com/spf13/pflag"

	"github.com/gpupack/gpupack/internal/app"
)

// AddClusterFlags registers --snapshot, --kubeconfig, --live and
// --catalogue into c; verb names the command in the help ("diagnose",
// "plan").
func AddClusterFlags(f *pflag.FlagSet, c *app.Cluster, verb string) {
	f.StringVar(&c.Snapshot, "snapshot", "", "cluster snapshot file (YAML or JSON); the embedded demo when no cluster is named")
	f.StringVar(&c.Kubeconfig, "kubeconfig", "", KubeconfigUsage)
	f.BoolVar(&c.Live, "live", false, verb+" the live cluster, found as --kubeconfig says when it is not given")
	AddCatalogueFlag(f, &c.Catalogue)
}

// AddCatalogueFlag registers --catalogue, the file whose GPU models extend
// or override the built-in catalogue.
func AddCatalogueFlag(f *pflag.FlagSet, path *string) {
	f.StringVar(path, "catalogue", "", "GPU catalogue file (YAML or JSON, the format of gpupack's gpu/catalogue.yaml): its models are added to the built-in ones, or replace those of the same name")
}
