// Command render-deploy writes deploy/ from the Helm chart (charts/gpupack)
// with its default values, so that `kubectl apply -f deploy/` installs what
// `helm install` would. Run it from the repository root: make deploy.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpupack/gpupack/charts"
)

func main() {
	dir := "deploy"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	files, err := charts.DeployFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "render-deploy:", err)
		os.Exit(1)
	}
	for _, name := range charts.DeployNames(files) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "render-deploy:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", p)
	}
}
