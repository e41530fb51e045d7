// Command gpupack-scheduler is the upstream kube-scheduler with gpupack's
// framework plugin registered; enable it in a profile of the
// KubeSchedulerConfiguration (deploy/scheduler.yaml runs it as the profile
// "gpupack" beside nothing else).
//
// `gpupack-scheduler version` prints gpupack's build (module version,
// commit, Go version, platform) and the Kubernetes version it is built on;
// upstream's --version prints gpupack's line before the Kubernetes one.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	k8sversion "k8s.io/component-base/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	versioncmd "github.com/gpupack/gpupack/internal/cli/version"
	"github.com/gpupack/gpupack/internal/util/buildversion"
	"github.com/gpupack/gpupack/scheduler/gpupack"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(gpupack.Name, gpupack.New))
	command.Use = "gpupack-scheduler"
	command.CompletionOptions.DisableDefaultCmd = true
	command.AddCommand(versioncmd.NewCommand(versioncmd.Extra{Name: "kubernetes", Value: k8sversion.Get().GitVersion}))
	// Upstream's --version (handled inside its RunE) prints only the
	// Kubernetes version; say which gpupack this is first.
	run := command.RunE
	command.RunE = func(cmd *cobra.Command, args []string) error {
		if f := cmd.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
			v := buildversion.Get()
			fmt.Fprintf(cmd.OutOrStdout(), "gpupack %s (commit %s, modified %s)\n", v.Version, v.Commit, v.Modified)
		}
		return run(cmd, args)
	}
	os.Exit(cli.Run(command))
}
