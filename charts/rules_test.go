package charts

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/golden"
)

// TestRulesFileIsGenerated keeps the chart's rules file what `gpupack
// rules` prints at its default step with the chart's default
// prometheus.selector (the one serve reads them with); refresh it with
// -update.
func TestRulesFileIsGenerated(t *testing.T) {
	b, err := promql.RulesYAML(30*time.Second, defaultSelector(t))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join(Dir, "rules", "gpupack-rules.yaml"), b)
}

// TestRulesReadBack: the rules ConfigMap and the PrometheusRule hold
// exactly gpupack's recording rules.
func TestRulesReadBack(t *testing.T) {
	want, err := promql.RecordingRules(30*time.Second, defaultSelector(t))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Render(Options{APIVersions: []string{prometheusRuleAPI}, Values: map[string]any{"rules": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, d := range docs {
		var got promql.RuleFile
		switch d.Kind {
		case "ConfigMap":
			text, ok := configMapFile(t, d, "gpupack-rules.yaml")
			if !ok {
				continue
			}
			if err := yaml.UnmarshalStrict([]byte(text), &got); err != nil {
				t.Fatalf("%s: gpupack-rules.yaml: %v", d.Name, err)
			}
		case "PrometheusRule":
			if d.Name != "gpupack-rules" {
				continue // the alerts: TestAlertsReadBack
			}
			got = ruleSpec[promql.RuleFile](t, d)
		default:
			continue
		}
		found[d.Kind] = true
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s %s holds other rules than gpupack rules prints (-want +got):\n%s", d.Kind, d.Name, diff)
		}
	}
	if !found["ConfigMap"] || !found["PrometheusRule"] {
		t.Errorf("rendered %v; want the rules as a ConfigMap and a PrometheusRule", found)
	}
}

// ruleSpec is the spec of a rendered PrometheusRule, read strictly as T.
func ruleSpec[T any](t *testing.T, d Doc) T {
	t.Helper()
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       T              `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(d.YAML), &pr); err != nil {
		t.Fatalf("%s: %v", d.Name, err)
	}
	return pr.Spec
}

// configMapFile is the file name of a rendered ConfigMap, read strictly;
// false when the ConfigMap holds no such file.
func configMapFile(t *testing.T, d Doc, name string) (string, bool) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(d.YAML), &cm); err != nil {
		t.Fatalf("%s: %v", d.Name, err)
	}
	text, ok := cm.Data[name]
	return text, ok
}

// defaultSelector is the chart's default prometheus.selector, parsed.
func defaultSelector(t *testing.T) promql.Selector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Prometheus struct {
			Selector string `json:"selector"`
		} `json:"prometheus"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	sel, err := promql.ParseSelector(v.Prometheus.Selector)
	if err != nil || sel.IsZero() {
		t.Fatalf("values.yaml: prometheus.selector %q: %v; want the job of dcgm-exporter", v.Prometheus.Selector, err)
	}
	return sel
}
