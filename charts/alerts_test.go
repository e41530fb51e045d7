package charts

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// alertsFile is the chart's alerting rules file.
var alertsFile = filepath.Join(Dir, "rules", "gpupack-alerts.yaml")

// alertFile is a Prometheus rules file of alerting rules.
type alertFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readAlerts(t *testing.T, b []byte) alertFile {
	t.Helper()
	var f alertFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("alerting rules: %v", err)
	}
	return f
}

// TestAlertsCheck: promtool accepts the chart's alerting rules, and each
// expression names only metrics that gpupack exports, with a severity and
// a summary and description.
func TestAlertsCheck(t *testing.T) {
	promtool := testcluster.NeedBinary(t, "promtool", "prometheus")
	if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	n := 0
	for _, g := range readAlerts(t, b).Groups {
		for _, r := range g.Rules {
			n++
			for _, m := range metricNames(t, r.Expr) {
				if !exported[m] {
					t.Errorf("alert %s names %s, which gpupack does not export (it exports %v)", r.Alert, m, keys(exported))
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a severity label and a summary and description", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s holds no alert", alertsFile)
	}
}

// TestAlertsFire runs the unit tests of the alerts with promtool test
// rules: each fires after its wait on a series that calls for it, not
// before, and not on a healthy one.
func TestAlertsFire(t *testing.T) {
	promtool := testcluster.NeedBinary(t, "promtool", "prometheus")
	test := filepath.Join("testdata", "gpupack-alerts-test.yaml")
	if out, err := exec.Command(promtool, "test", "rules", test).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", test, err, out)
	}
}

// TestAlertsReadBack: the rules ConfigMap and the alerts PrometheusRule
// hold exactly the chart's alerting rules, and rules.alerts.enabled=false
// leaves them out.
func TestAlertsReadBack(t *testing.T) {
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	want := readAlerts(t, b)
	for _, enabled := range []bool{true, false} {
		docs, err := Render(Options{APIVersions: []string{prometheusRuleAPI}, Values: map[string]any{"rules": map[string]any{
			"prometheusRule": map[string]any{"enabled": true}, "alerts": map[string]any{"enabled": enabled}}}})
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, d := range docs {
			var got alertFile
			switch {
			case d.Kind == "ConfigMap":
				text, ok := configMapFile(t, d, "gpupack-alerts.yaml")
				if !ok {
					continue
				}
				got = readAlerts(t, []byte(text))
			case d.Kind == "PrometheusRule" && d.Name == "gpupack-alerts":
				got = ruleSpec[alertFile](t, d)
			default:
				continue
			}
			found[d.Kind] = true
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s holds other alerts than %s (-want +got):\n%s", d.Kind, d.Name, alertsFile, diff)
			}
		}
		if enabled && (!found["ConfigMap"] || !found["PrometheusRule"]) {
			t.Errorf("alerts enabled: rendered %v; want the alerts in the ConfigMap and a PrometheusRule", found)
		}
		if !enabled && len(found) != 0 {
			t.Errorf("alerts disabled: rendered them in %v", found)
		}
	}
}
