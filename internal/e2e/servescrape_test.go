package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/charts"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/reclaim"
)

// scrapePolicy opts namespace ml in; every class idle for an hour, no
// notice, no standing approval: a bare pod waits for a person's.
const scrapePolicy = `apiVersion: gpupack.io/v1alpha1
kind: ReclaimPolicy
namespaces: [ml]
classes:
  notebook: {idleFor: 1h, grace: 1s, notice: "0"}
  inference: {idleFor: 1h, grace: 1s, notice: "0"}
  training: {idleFor: 1h, grace: 1s, notice: "0"}
`

// alertWait replaces each alert's for: in the test; see loadedAlerts.
const alertWait = "3s"

// TestServeScrapedAlertsFire: a real Prometheus scrapes `gpupack serve
// --auth kubernetes` every second with the token of the chart's metrics
// ServiceAccount (read from a file, as the chart's ServiceMonitor
// sends it), loads the chart's alerting rules and evaluates them on what
// it scraped. serve runs on three hours of fake-dcgm history and the
// live cluster, and is driven into three states that call for an alert:
// a GPU with XID 79 (GPUPackGPUUnhealthy), a GPU pod that names a
// scheduler that does not run (GPUPackPodsWaitForScheduler), and an
// approved reclaim of an idle bare pod whose eviction its
// PodDisruptionBudget refuses (GPUPackReclaimFailed). Each fires, with
// the labels that name where; GPUPackRefreshFailing and GPUPackDataStale,
// whose series say serve is healthy, do not. Then every query of the
// chart's Grafana dashboard returns series from this Prometheus.
func TestServeScrapedAlertsFire(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	bin := testcluster.BuildGpupack(t)
	c.AddGPUNode("gpu-a", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 4})
	const ns = "gpupack"
	c.CreateNamespace(ns)
	c.CreateNamespace(reclaimNS)
	client := c.Client()
	ctx := t.Context()
	labelNamespace(t, client, reclaimNS, wellknown.LabelReclaim, wellknown.ReclaimEnabled)

	// A busy Deployment, and a bare pod left idle whose
	// PodDisruptionBudget allows no eviction.
	if _, err := client.AppsV1().Deployments(reclaimNS).Create(ctx, reclaimDeployment("chat"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods(reclaimNS).Create(ctx, reclaimPod("dev"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: reclaimNS, Name: "dev"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dev"}}}}
	if _, err := client.PolicyV1().PodDisruptionBudgets(reclaimNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitRunning(t, client, 2)
	// A GPU pod for gpupack-scheduler, which does not run here.
	waiting := makePod(reclaimNS, "waiting").gpus(resourceGPU, 1).obj()
	waiting.Spec.SchedulerName = "gpupack"
	if _, err := client.CoreV1().Pods(reclaimNS).Create(ctx, waiting, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gpupack-reclaim-approvals"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The chart's roles for serve.auth: kubernetes, the metrics
	// ServiceAccount's token as the chart's ServiceMonitor sends it, and
	// a viewer's for the API.
	chartServeRoles(t, c, ns)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "metrics-token")
	if err := os.WriteFile(tokenFile, []byte(serviceAccountToken(t, c, ns, "gpupack-metrics", "ClusterRole gpupack-metrics")), 0o600); err != nil {
		t.Fatal(err)
	}
	viewer := serviceAccountToken(t, c, ns, "viewer", "Role gpupack-viewer")

	prom := scrapeHistory(t, running)
	alerts, dashboard := chartAlertsAndDashboard(t)
	alertsFile := filepath.Join(dir, "gpupack-alerts.yaml")
	if err := os.WriteFile(alertsFile, loadedAlerts(t, alerts), 0o644); err != nil {
		t.Fatal(err)
	}
	// serve's address is known once it runs: Prometheus finds it in a
	// file_sd target file written then.
	targets := filepath.Join(dir, "targets")
	if err := os.Mkdir(targets, 0o755); err != nil {
		t.Fatal(err)
	}
	prom.Configure(fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: gpupack
    authorization: {type: Bearer, credentials_file: %q}
    file_sd_configs: [{files: [%q], refresh_interval: 1s}]
`, alertsFile, tokenFile, filepath.Join(targets, "*.json")))

	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(scrapePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := c.Run("gpupack-serve", bin, "serve", "--prometheus", prom.URL, "--kubeconfig", c.Kubeconfig(), "--listen", "127.0.0.1:0",
		"--window", "3h", "--refresh", "2s", "--auth", "kubernetes", "--auth-service", ns+"/gpupack",
		"--reclaim-controller", "--reclaim-interval", "2s", "--reclaim-policy", policy, "--reclaim-approvals", ns+"/gpupack-reclaim-approvals")
	serveAddr := serve.LogAddress(regexp.MustCompile(`serving gpupack on http://(\S+?)/`))
	writeTargets(t, targets, serveAddr)

	// The failed reclaim counts only if Prometheus saw the counter at 0
	// first (increase() of a series that starts at 1 is 0): approve once
	// it has.
	poll(t, "Prometheus scraping serve's reclaim counter", func(ctx context.Context) (bool, string, error) {
		v, err := promVector(ctx, prom.URL, `gpupack_reclaims_total{job="gpupack",kind="Pod",outcome="failed"} == 0`)
		return len(v) == 1, fmt.Sprint(v), err
	})
	approve(t, c, "http://"+serveAddr, viewer, ns)

	want := map[string]map[string]string{
		"GPUPackReclaimFailed":        {"kind": "Pod"},
		"GPUPackPodsWaitForScheduler": {"namespace": reclaimNS},
		"GPUPackGPUUnhealthy":         {"node": "gpu-a"},
	}
	var seen string // the last answer, for the failure message
	poll(t, "the alerts to fire", func(ctx context.Context) (bool, string, error) {
		firing, err := promVector(ctx, prom.URL, `ALERTS{alertstate="firing"}`)
		if err != nil {
			return false, fmt.Sprintf("%v; before that, firing: %s", err, seen), nil
		}
		got := map[string]map[string]string{}
		for _, s := range firing {
			got[s.Metric["alertname"]] = s.Metric
		}
		for name, labels := range want {
			for k, v := range labels {
				if got[name][k] != v {
					seen = fmt.Sprint(got)
					return false, "firing: " + seen, nil
				}
			}
		}
		t.Logf("firing: %v", got)
		return true, "", nil
	})
	// serve is healthy: its refresh succeeds and its data is current,
	// and the alerts on them are neither firing nor pending.
	for _, q := range []string{`gpupack_refresh_ok{job="gpupack"} == 1`, `time() - gpupack_data_as_of_timestamp_seconds{job="gpupack"} < 600`} {
		if v, err := promVector(ctx, prom.URL, q); err != nil || len(v) != 1 {
			t.Errorf("%s: %v %v; want serve's one series", q, v, err)
		}
	}
	for _, name := range []string{"GPUPackRefreshFailing", "GPUPackDataStale"} {
		if v, err := promVector(ctx, prom.URL, fmt.Sprintf(`ALERTS{alertname=%q}`, name)); err != nil || len(v) != 0 {
			t.Errorf("%s: %v %v; want it neither pending nor firing", name, v, err)
		}
	}
	checkDashboard(t, prom.URL, dashboard)
}

// scrapeHistory backfills three hours of fake-dcgm's series of the
// running pods into a new Prometheus, ending now: the chat Deployment's
// pod at 70%, the bare pod idle, and GPU 3, which no pod holds, with XID
// 79 (fallen off the bus).
func scrapeHistory(t *testing.T, pods []*corev1.Pod) *testcluster.Prometheus {
	t.Helper()
	var doc strings.Builder
	doc.WriteString("duration: 3h\nnodes:\n  - {name: gpu-a, model: H100-80GB, gpus: 4, xids: {\"3\": 79}}\npods:\n")
	for i, p := range pods {
		activity := "{pattern: idle}"
		if strings.HasPrefix(p.Name, "chat-") {
			activity = "{pattern: constant, level: 0.7}"
		}
		fmt.Fprintf(&doc, "  - {namespace: %s, name: %s, node: gpu-a, gpu: %d, memoryMiB: 4000, activity: %s}\n", p.Namespace, p.Name, i, activity)
	}
	sc, err := gpusim.Parse([]byte(doc.String()), "scrape scenario", gpu.Default())
	if err != nil {
		t.Fatalf("%v\n%s", err, doc.String())
	}
	return testcluster.FleetHistory(t, sc, time.Now().Add(-3*time.Hour).Truncate(time.Minute), 30*time.Second, gpusim.Faults{})
}

// chartAlertsAndDashboard are the alerting rules and the Grafana
// dashboard that the chart installs (its rules and dashboard ConfigMaps).
func chartAlertsAndDashboard(t *testing.T) (alerts, dashboard string) {
	t.Helper()
	docs, err := charts.Render(charts.Options{Namespace: "gpupack"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Kind != "ConfigMap" {
			continue
		}
		var cm corev1.ConfigMap
		unmarshalDoc(t, d, &cm)
		if s, ok := cm.Data["gpupack-alerts.yaml"]; ok {
			alerts = s
		}
		if s, ok := cm.Data["gpupack.json"]; ok {
			dashboard = s
		}
	}
	if alerts == "" || dashboard == "" {
		t.Fatal("the chart's default values rendered no alerting rules or no dashboard ConfigMap")
	}
	return alerts, dashboard
}

// loadedAlerts is the chart's alerting rules with each for: shortened to
// alertWait: a test cannot wait the 5 to 15 minutes they ask, and the
// waits themselves are checked by promtool test rules
// (charts/testdata/gpupack-alerts-test.yaml). Expressions, labels and
// annotations are the chart's.
func loadedAlerts(t *testing.T, text string) []byte {
	t.Helper()
	var f map[string]any
	if err := yaml.Unmarshal([]byte(text), &f); err != nil {
		t.Fatal(err)
	}
	groups, _ := f["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if rule := r.(map[string]any); rule["for"] != nil {
				rule["for"] = alertWait
			}
		}
	}
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeTargets points the gpupack job's file_sd at addr, written whole
// and renamed into place so that Prometheus never reads half a file.
func writeTargets(t *testing.T, dir, addr string) {
	t.Helper()
	b, err := json.Marshal([]map[string]any{{"targets": []string{addr}}})
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "serve.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "serve.json")); err != nil {
		t.Fatal(err)
	}
}

// approve waits until serve's reclaim controller lists the bare pod dev
// as a candidate (its API, read with the viewer's token), then approves
// it in the approvals ConfigMap as its approver would.
func approve(t *testing.T, c *testcluster.Cluster, base, token, ns string) {
	t.Helper()
	var id string
	poll(t, "serve's reclaim candidate ml/dev", func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/reclaims", nil)
		if err != nil {
			return false, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		var st app.ReclaimStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return false, fmt.Sprintf("%d: %v", resp.StatusCode, err), nil
		}
		if st.Set == nil {
			return false, "no detection yet: " + st.Error, nil
		}
		for _, cand := range st.Set.Candidates {
			if cand.Owner.Kind == reclaim.Pod && cand.Owner.Name == "dev" {
				id = cand.ID
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("candidates %+v, skipped %+v, error %q", st.Set.Candidates, st.Set.Skipped, st.Error), nil
	})
	patch := fmt.Appendf(nil, `{"data":{%q:"alice"}}`, id)
	if _, err := c.Client().CoreV1().ConfigMaps(ns).Patch(t.Context(), "gpupack-reclaim-approvals", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grafanaVars are the values the dashboard's variables take here: all
// namespaces, Grafana's usual intervals.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$__interval", "1m", "$namespace", ".*")

// checkDashboard runs every query of the dashboard's panels, and its
// label_values variables' metrics, on the Prometheus that scrapes serve:
// each returns at least one series.
func checkDashboard(t *testing.T, promURL, dashboard string) {
	t.Helper()
	panels, vars, err := charts.ParseDashboard([]byte(dashboard))
	if err != nil {
		t.Fatalf("the chart's dashboard: %v", err)
	}
	var queries [][2]string
	for _, p := range panels {
		for _, e := range p.Exprs {
			queries = append(queries, [2]string{p.Title, grafanaVars.Replace(e)})
		}
	}
	for _, v := range vars {
		if v.Metric == "" {
			t.Errorf("variable query %q: want label_values(METRIC, LABEL)", v.Query)
			continue
		}
		queries = append(queries, [2]string{"variable " + v.Query, v.Metric})
	}
	if len(queries) == 0 {
		t.Fatal("the dashboard has no query")
	}
	for _, q := range queries {
		v, err := promVector(t.Context(), promURL, q[1])
		if err != nil || len(v) == 0 {
			t.Errorf("panel %q: %s returns %v %v; want series from serve's /metrics", q[0], q[1], v, err)
			continue
		}
		t.Logf("panel %q: %d series", q[0], len(v))
	}
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// promVector runs an instant query and returns its series.
func promVector(ctx context.Context, promURL, q string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, promURL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", q, err, b)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: %s %s (%s)", q, r.Status, r.Error, r.Data.ResultType)
	}
	return r.Data.Result, nil
}
