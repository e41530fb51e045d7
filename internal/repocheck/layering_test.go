package repocheck

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayering runs the rules over both modules as they are.
func TestLayering(t *testing.T) {
	root := repoRoot(t)
	var pkgs []Package
	for _, dir := range []string{root, filepath.Join(root, "scheduler")} {
		pkgs = append(pkgs, list(t, dir)...)
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list found %d packages in both modules; expected the whole tree", len(pkgs))
	}
	for _, v := range Violations(pkgs) {
		t.Error(v)
	}
}

// TestRulesCatch shows that each rule fails on the import it forbids and
// passes the imports it allows.
func TestRulesCatch(t *testing.T) {
	m := func(rel string) string { return Module + "/" + rel }
	cases := map[string]struct {
		pkg  string
		deps []string
		want int
	}{
		"plan on net/http":                 {m("plan"), []string{"net/url", "net/http"}, 1},
		"plan on the Kubernetes API":       {m("plan"), []string{"k8s.io/api/core/v1", "k8s.io/apimachinery/pkg/runtime"}, 2},
		"usage on Prometheus' client":      {m("usage"), []string{"github.com/prometheus/client_golang/prometheus"}, 1},
		"diagnose on cobra":                {m("diagnose"), []string{"github.com/spf13/cobra"}, 1},
		"core on an adapter":               {m("diagnose"), []string{m("internal/source/kube")}, 1},
		"vocabulary on client-go":          {m("api/wellknown"), []string{"k8s.io/client-go/kubernetes"}, 1},
		"core on its leaves and the api":   {m("usage"), []string{m("internal/util/mempolicy"), m("internal/util/yamldoc"), m("api/gpuoperator"), m("gpu"), "sigs.k8s.io/yaml"}, 0},
		"verb on verb":                     {m("internal/cli/report"), []string{m("internal/cli/diagnose")}, 1},
		"verb on its own subpackage":       {m("internal/cli/report"), []string{m("internal/cli/report/table")}, 0},
		"verb on clio and the app":         {m("internal/cli/report"), []string{m("internal/cli/clio"), m("internal/app")}, 0},
		"serve on a verb":                  {m("internal/serve"), []string{m("internal/cli/plan")}, 1},
		"app on a verb":                    {m("internal/app"), []string{m("internal/cli/report")}, 1},
		"app on serve":                     {m("internal/app"), []string{m("internal/serve")}, 1},
		"adapter on the app":               {m("internal/source/kube"), []string{m("internal/app")}, 1},
		"actuator on the app":              {m("internal/actuator/kube"), []string{m("internal/app")}, 1},
		"change on client-go":              {m("change"), []string{"k8s.io/client-go/kubernetes"}, 1},
		"production on the test kit":       {m("internal/source/demo"), []string{m("internal/testkit/golden")}, 1},
		"scheduler module on the test kit": {m("scheduler/gpupack"), []string{m("internal/testkit/testcluster")}, 1},
		"test kit on the test kit":         {m("internal/testkit/difftest"), []string{m("internal/testkit/testcluster")}, 0},
		"another module's package":         {"k8s.io/kubernetes/pkg/scheduler", []string{"net/http"}, 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := Violations([]Package{{Path: c.pkg, Deps: c.deps}})
			if len(got) != c.want {
				t.Errorf("%d violations, want %d: %q", len(got), c.want, got)
			}
		})
	}
}

// list returns the packages of the module in dir with their dependencies.
func list(t *testing.T, dir string) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	var pkgs []Package
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs = append(pkgs, Package{Path: f[0], Deps: f[1:]})
	}
	return pkgs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}
