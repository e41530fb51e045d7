package repocheck

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the main module's path; scheduler/ is Module + "/scheduler".
const Module = "github.com/gpupack/gpupack"

// Package is what the rules read of one package: its import path and its
// transitive dependencies without tests (`go list -deps`' Deps).
type Package struct {
	Path string
	Deps []string
}

// corePaths are the pure core and the vocabulary it imports: they know
// nothing of HTTP, flags, client-go or Prometheus' client.
var corePaths = []string{"gpu", "cluster", "placement", "sim", "usage", "diagnose", "plan", "change", "reclaim", "vram", "dataset", "api", "agent"}

// forbiddenInCore are the dependencies a core package must not have, by
// prefix: the edges' libraries.
var forbiddenInCore = []string{
	"net/http",
	"k8s.io/client-go",
	"k8s.io/api/",
	"k8s.io/apimachinery",
	"sigs.k8s.io/controller-runtime",
	"github.com/spf13/cobra",
	"github.com/prometheus/",
}

// coreLeaves are the internal packages that the core may import: leaf
// utilities that import nothing of the edges themselves.
var coreLeaves = []string{"internal/util/yamldoc", "internal/util/mempolicy"}

// Violations returns every broken layering rule, one line each, sorted:
//   - a core package (see corePaths) depends on an edge library or on an
//     internal package other than coreLeaves;
//   - a verb (internal/cli/<verb>) depends on another verb; internal/cli/clio,
//     the verbs' shared flag and output helpers, is not a verb;
//   - internal/serve depends on a verb;
//   - internal/app depends on a verb or on internal/serve;
//   - an adapter (internal/source, internal/render, internal/actuator)
//     depends on internal/app,
//     internal/serve or a verb;
//   - production code depends on internal/testkit.
func Violations(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := relative(p.Path)
		if !ok {
			continue
		}
		for _, d := range p.Deps {
			if why := broken(rel, d); why != "" {
				out = append(out, fmt.Sprintf("%s imports %s: %s", p.Path, d, why))
			}
		}
	}
	slices.Sort(out)
	return out
}

// broken says which rule package rel (relative to the module, or to
// scheduler/'s module as "scheduler/...") breaks by depending on dep, or "".
func broken(rel, dep string) string {
	depRel, ours := relative(dep)
	switch {
	case isCore(rel):
		if !ours {
			for _, f := range forbiddenInCore {
				if dep == strings.TrimSuffix(f, "/") || strings.HasPrefix(dep, f) || strings.HasPrefix(dep, f+"/") {
					return "the core is pure: no HTTP, client-go, Kubernetes API types, cobra or Prometheus client"
				}
			}
			return ""
		}
		if under(depRel, "internal") && !slices.Contains(coreLeaves, depRel) {
			return "the core imports no internal package but " + strings.Join(coreLeaves, " and ")
		}
	case ours && under(depRel, "internal/testkit") && !under(rel, "internal/testkit"):
		return "production code never imports the test kit"
	case verb(rel) != "" && ours && verb(depRel) != "" && verb(depRel) != verb(rel):
		return "a verb never imports another verb; shared code belongs in internal/app"
	case under(rel, "internal/serve") && ours && verb(depRel) != "":
		return "serve calls internal/app, never a verb"
	case under(rel, "internal/app") && ours && (verb(depRel) != "" || under(depRel, "internal/serve")):
		return "the application layer is called by the edges, never the reverse"
	case (under(rel, "internal/source") || under(rel, "internal/render") || under(rel, "internal/actuator")) && ours &&
		(under(depRel, "internal/app") || under(depRel, "internal/serve") || verb(depRel) != ""):
		return "adapters are called by the application layer, never the reverse"
	}
	return ""
}

// relative returns path relative to the main module ("plan",
// "internal/cli/report", "scheduler/gpupack"), and whether it is ours.
func relative(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, Module+"/")
	return rel, ok
}

func isCore(rel string) bool {
	return slices.ContainsFunc(corePaths, func(c string) bool { return under(rel, c) })
}

// under reports whether rel is dir or a package below it.
func under(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// verb returns the verb that package rel belongs to (internal/cli/<verb>/...),
// or "" for any other package, internal/cli itself and internal/cli/clio.
func verb(rel string) string {
	rest, ok := strings.CutPrefix(rel, "internal/cli/")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "/")
	if v == "clio" {
		return ""
	}
	return v
}
