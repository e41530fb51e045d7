package charts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// grafanaVars are the dashboard's variables with values a query may take.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__range", "1d", "$__interval", "1m", "$namespace", ".*")

// TestDashboard checks every PromQL expression of gpupack.json against a
// real Prometheus (a parse error is HTTP 400 bad_data) and that each names
// only metrics that gpupack's code declares.
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Prometheus")
	}
	exprs, varMetrics := dashboardQueries(t)
	exported := exportedMetrics(t)
	if len(exported) == 0 {
		t.Fatal("found no metric declared in gpupack's code")
	}
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{})
	for panel, list := range exprs {
		for _, e := range list {
			q := grafanaVars.Replace(e)
			resp, err := http.Get(prom.URL + "/api/v1/query?query=" + url.QueryEscape(q))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("panel %q: Prometheus refuses %s: %d %s", panel, q, resp.StatusCode, b)
			}
			for _, m := range metricNames(t, q) {
				if !exported[m] {
					t.Errorf("panel %q names %s, which gpupack does not export (it exports %v)", panel, m, keys(exported))
				}
			}
		}
	}
	for _, m := range varMetrics {
		if !exported[m] {
			t.Errorf("a variable queries %s, which gpupack does not export", m)
		}
	}
}

// dashboardQueries returns the expressions of each panel by title, and
// the metrics the variables' label_values queries read.
func dashboardQueries(t *testing.T) (map[string][]string, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir, "dashboards", "gpupack.json"))
	if err != nil {
		t.Fatal(err)
	}
	panels, vars, err := ParseDashboard(data)
	if err != nil {
		t.Fatalf("gpupack.json: %v", err)
	}
	exprs := map[string][]string{}
	for _, p := range panels {
		if len(p.Exprs) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		exprs[p.Title] = append(exprs[p.Title], p.Exprs...)
	}
	var metrics []string
	for _, v := range vars {
		if v.Metric == "" {
			t.Errorf("variable query %q: want label_values(METRIC, LABEL)", v.Query)
			continue
		}
		metrics = append(metrics, v.Metric)
	}
	return exprs, metrics
}

// metricNames are the metric names the PromQL expression selects.
func metricNames(t *testing.T, q string) []string {
	t.Helper()
	e, err := metricsql.Parse(q)
	if err != nil {
		t.Errorf("%s: %v", q, err)
		return nil
	}
	var names []string
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		me, ok := x.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, group := range me.LabelFilterss {
			found := false
			for _, f := range group {
				if f.Label == "__name__" && !f.IsRegexp && !f.IsNegative {
					names, found = append(names, f.Value), true
				}
			}
			if !found {
				t.Errorf("%s: a selector without a metric name", q)
			}
		}
	})
	return names
}

// exportedMetrics are the names that gpupack's (non-test) code declares
// with prometheus.NewDesc or a prometheus ...Opts{Name: ...} literal.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	root := ".."
	out := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "scheduler") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewDesc" && len(n.Args) > 0 {
					if s, ok := stringLit(n.Args[0]); ok {
						out[s] = true
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && strings.HasSuffix(sel.Sel.Name, "Opts") {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
								if s, ok := stringLit(kv.Value); ok {
									out[s] = true
								}
							}
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
