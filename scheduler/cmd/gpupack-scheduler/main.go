// Command gpupack-scheduler is the upstream kube-scheduler with gpupack's
// framework plugin registered; enable it in a profile of the
// KubeSchedulerConfiguration (deploy/scheduler.yaml runs it as the profile
// "gpupack" beside nothing else).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gpupack/gpupack/scheduler/gpupack"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(gpupack.Name, gpupack.New))
	os.Exit(cli.Run(command))
}
