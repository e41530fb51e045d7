package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzLine matches one target of the Makefile's fuzz rule.
var fuzzLine = regexp.MustCompile(`\$\(GO\) test \./(\S+) -run XXX -fuzz '\^(Fuzz\w+)\$\$'`)

// TestMakeFuzzListsEveryFuzzTarget fails when a Fuzz function of either
// module is missing from `make fuzz`, or when the rule names one that is
// gone (it would fuzz nothing and pass).
func TestMakeFuzzListsEveryFuzzTarget(t *testing.T) {
	root := repoRoot(t)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range fuzzLine.FindAllStringSubmatch(string(makefile), -1) {
		listed[m[1]+" "+m[2]] = true
	}
	found := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				found[filepath.ToSlash(rel)+" "+fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("no Fuzz function found in the repository")
	}
	if diff := cmp.Diff(found, listed); diff != "" {
		t.Errorf("make fuzz differs from the Fuzz functions in the tree (-found +listed); add or remove its lines:\n%s", diff)
	}
}
