// Package sourceflag registers the flags that say where a verb reads from:
// the cluster (app.Cluster) and the most bytes of one Prometheus answer.
// It is apart from clio so that clio's small helpers do not pull the
// application layer and the adapters into every binary that prints a
// version (gpupack-scheduler imports internal/cli/version).
package sourceflag

import (
	"github.com/spf13/pflag"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
)

// AddCluster registers --snapshot, --kubeconfig, --live and
// --catalogue into c; verb names the command in the help ("diagnose",
// "plan").
func AddCluster(f *pflag.FlagSet, c *app.Cluster, verb string) {
	f.StringVar(&c.Snapshot, "snapshot", "", "cluster snapshot file (YAML or JSON); the embedded demo when no cluster is named")
	f.StringVar(&c.Kubeconfig, "kubeconfig", "", clio.KubeconfigUsage)
	f.BoolVar(&c.Live, "live", false, verb+" the live cluster, found as --kubeconfig says when it is not given")
	clio.AddCatalogueFlag(f, &c.Catalogue)
}
