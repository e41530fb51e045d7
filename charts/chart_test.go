package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/cli"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/reclaim"
)

// Optional APIs a cluster may serve, as .Capabilities.APIVersions lists them.
const (
	certManagerAPI    = "cert-manager.io/v1"
	serviceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"
	prometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"
)

// variant is one way to install the chart.
type variant struct {
	name   string
	values map[string]any
	apis   []string
}

// variants covers each part switched on alone and each optional feature.
func variants(t *testing.T) []variant {
	requests, err := os.ReadFile("../internal/cli/plan/testdata/out-workload-requests.yaml.golden")
	if err != nil {
		t.Fatal(err)
	}
	return []variant{
		{name: "defaults"},
		{name: "defaults with cert-manager served", apis: []string{certManagerAPI}},
		{name: "serve only", values: map[string]any{"scheduler": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": false}}},
		{name: "scheduler only", values: map[string]any{"serve": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": false}}},
		{name: "webhook only", values: map[string]any{"serve": map[string]any{"enabled": false}, "scheduler": map[string]any{"enabled": false}}},
		{name: "everything", apis: []string{certManagerAPI, serviceMonitorAPI, prometheusRuleAPI}, values: map[string]any{
			"prices":     map[string]any{"currency": "USD", "prices": map[string]any{"H100-80GB": 2.49, "L40S": 1.1, "A100-40GB": 1.3, "L4": 0.6}},
			"prometheus": everythingPrometheus(),
			"serve": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}}, "nodeSelector": map[string]any{"role": "system"}, "tolerations": []any{map[string]any{"key": "system", "operator": "Exists"}},
				"auth": "kubernetes", "viewers": []any{map[string]any{"kind": "Group", "name": "gpu-admins", "apiGroup": "rbac.authorization.k8s.io"}},
				"metricsReaders": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}},
				"networkPolicy":  map[string]any{"namespaces": []any{"platform"}}},
			"scheduler":        map[string]any{"policy": "fgd", "replicas": 2},
			"webhook":          map[string]any{"certificate": "cert-manager", "requests": string(requests), "namespaces": []any{"ml", "inference"}},
			"imagePullSecrets": []any{map[string]any{"name": "ghcr"}},
			"commonLabels":     map[string]any{"team": "platform"},
			"rules":            map[string]any{"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}}},
			"agent":            map[string]any{"enabled": true, "runtimeClassName": "", "serviceMonitor": map[string]any{"enabled": true}},
			"apply": map[string]any{"enabled": true, "maintenanceWindow": "22:00-06:00", "letJobsFinish": true,
				"approvers": []any{map[string]any{"kind": "Group", "name": "gpu-admins", "apiGroup": "rbac.authorization.k8s.io"}}},
			"reclaim": reclaimValues(),
		}},
	}
}

// TestDeployIsRenderedFromChart keeps deploy/ and the chart one source of
// truth: deploy/ must be exactly what the chart renders with its defaults.
func TestDeployIsRenderedFromChart(t *testing.T) {
	files, err := DeployFiles()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("../deploy")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("deploy/%s is not rendered from the chart: remove it, or make the chart render it", e.Name())
		}
	}
	for _, name := range DeployNames(files) {
		have, err := os.ReadFile(filepath.Join("../deploy", name))
		if err != nil {
			t.Errorf("deploy/%s: %v (run make deploy)", name, err)
			continue
		}
		if diff := cmp.Diff(files[name], string(have)); diff != "" {
			t.Errorf("deploy/%s differs from the chart (run make deploy; -chart +deploy):\n%s", name, diff)
		}
	}
}

// TestLint runs helm lint, strict, on each variant: no error, no warning.
func TestLint(t *testing.T) {
	for _, v := range variants(t) {
		if len(v.apis) > 0 {
			continue // lint renders without a cluster's optional APIs
		}
		t.Run(v.name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = DeployNamespace
			res := lint.Run([]string{Dir}, v.values)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m.Error())
				}
			}
			for _, err := range res.Errors {
				t.Errorf("helm lint: %v", err)
			}
			if res.TotalChartsLinted != 1 {
				t.Errorf("helm lint linted %d charts, want 1", res.TotalChartsLinted)
			}
		})
	}
}

// strictDecoder decodes YAML into the built-in types, refusing unknown and
// duplicate fields: the rendered YAML's lint.
func strictDecoder() runtime.Decoder {
	return k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, clientgoscheme.Scheme, clientgoscheme.Scheme,
		k8sjson.SerializerOptions{Yaml: true, Strict: true})
}

// TestRenderedObjectsAreValid decodes every rendered object strictly into
// its Kubernetes type (cert-manager and Prometheus Operator kinds are
// checked by apiVersion), and checks what every install must hold: pods
// run as non-root with a read-only root filesystem, each Deployment uses
// its own ServiceAccount, every webhook fails open, and object names are
// unique.
func TestRenderedObjectsAreValid(t *testing.T) {
	dec := strictDecoder()
	foreign := map[string]string{"Issuer": "cert-manager.io/v1", "Certificate": "cert-manager.io/v1", "ServiceMonitor": "monitoring.coreos.com/v1", "PrometheusRule": "monitoring.coreos.com/v1"}
	for _, v := range variants(t) {
		t.Run(v.name, func(t *testing.T) {
			docs, err := Render(Options{Values: v.values, APIVersions: v.apis})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, d := range docs {
				id := d.Kind + " " + d.Namespace + "/" + d.Name
				if seen[id] {
					t.Errorf("%s rendered twice", id)
				}
				seen[id] = true
				if api, ok := foreign[d.Kind]; ok {
					if !strings.Contains(d.YAML, "apiVersion: "+api+"\n") {
						t.Errorf("%s (%s): want apiVersion %s", id, d.Source, api)
					}
					continue
				}
				obj, _, err := dec.Decode([]byte(d.YAML), nil, nil)
				if err != nil {
					t.Errorf("%s (%s): %v", id, d.Source, err)
					continue
				}
				checkObject(t, id, obj)
			}
		})
	}
}

func checkObject(t *testing.T, id string, obj runtime.Object) {
	t.Helper()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec := o.Spec.Template.Spec
		if spec.ServiceAccountName == "" || spec.ServiceAccountName == "default" {
			t.Errorf("%s runs as the default ServiceAccount", id)
		}
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
			t.Errorf("%s: pods must run as non-root user 65532 (the images' user)", id)
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s container %s: want a read-only root filesystem and no privilege escalation", id, c.Name)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s container %s: want memory requests and limits", id, c.Name)
			}
		}
		if want := o.Spec.Selector.MatchLabels; !subset(want, o.Spec.Template.Labels) {
			t.Errorf("%s: the selector %v does not select its own pods %v", id, want, o.Spec.Template.Labels)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
				t.Errorf("%s webhook %s: failurePolicy must be Ignore (fail open)", id, w.Name)
			}
			if w.TimeoutSeconds == nil || *w.TimeoutSeconds > 5 {
				t.Errorf("%s webhook %s: want a timeout of at most 5 s, so that pod creation is never held long", id, w.Name)
			}
		}
	}
}

func subset(small, big map[string]string) bool {
	for k, v := range small {
		if big[k] != v {
			return false
		}
	}
	return len(small) > 0
}

// TestBadValuesAreRefused: a typo, a wrong type or a combination the
// cluster cannot serve fails the render with what to do, instead of
// installing something else.
func TestBadValuesAreRefused(t *testing.T) {
	cases := []struct {
		name   string
		values map[string]any
		apis   []string
		want   string
	}{
		{"unknown key", map[string]any{"webhook": map[string]any{"certificat": "auto"}}, nil, "certificat"},
		{"unknown policy", map[string]any{"scheduler": map[string]any{"policy": "spread"}}, nil, "policy"},
		{"bad duration", map[string]any{"serve": map[string]any{"window": "a day"}}, nil, "window"},
		{"bad currency", map[string]any{"prices": map[string]any{"currency": "dollars", "prices": map[string]any{"L4": 1}}}, nil, "currency"},
		{"negative price", map[string]any{"prices": map[string]any{"prices": map[string]any{"L4": -1}}}, nil, "minimum"},
		{"bad namespace", map[string]any{"webhook": map[string]any{"namespaces": []any{"ML team"}}}, nil, "namespaces"},
		{"no prometheus", map[string]any{"prometheus": map[string]any{"url": ""}}, nil, "prometheus.url"},
		{"cert-manager absent", map[string]any{"webhook": map[string]any{"certificate": "cert-manager"}}, nil, "install cert-manager"},
		{"ServiceMonitor absent", map[string]any{"serve": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}, nil, "ServiceMonitor API"},
		{"PrometheusRule absent", map[string]any{"rules": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}, nil, "PrometheusRule API"},
		{"requests not YAML", map[string]any{"webhook": map[string]any{"requests": "workloads: [unclosed"}}, nil, "--set-file webhook.requests="},
		{"apply: no node may change", map[string]any{"apply": map[string]any{"maxPerPool": 0}}, nil, "maxPerPool"},
		{"apply: a window that is no time", map[string]any{"apply": map[string]any{"maintenanceWindow": "22:00-25:00"}}, nil, "maintenanceWindow"},
		{"apply: bad drain timeout", map[string]any{"apply": map[string]any{"drainTimeout": "ten minutes"}}, nil, "drainTimeout"},
		{"reclaim: a typo in the policy", map[string]any{"reclaim": map[string]any{"enabled": true, "policy": map[string]any{"namespace": []any{"ml"}}}}, nil, "namespace"},
		{"reclaim: a floor that is a percentage", map[string]any{"reclaim": map[string]any{"policy": map[string]any{"activityFloor": 5}}}, nil, "activityFloor"},
		{"reclaim: the webhook URL in the values", map[string]any{"reclaim": map[string]any{"notifyWebhook": map[string]any{"url": "https://hooks.example.com/x?token=s3cret"}}}, nil, "notifyWebhook"},
		{"reclaim: the ledger is the approvals", map[string]any{"reclaim": map[string]any{"enabled": true, "ledger": "gpupack-reclaim-approvals"}}, nil, "a name of its own"},
		{"reclaim: the ledger is apply's approvals", map[string]any{"reclaim": map[string]any{"enabled": true, "ledger": "gpupack-approvals"}}, nil, "a name of its own"},
		{"password in the URL", map[string]any{"prometheus": map[string]any{"url": "http://gpupack:s3cret@prometheus:9090"}}, nil, "prometheus.auth"},
		{"user in the URL", map[string]any{"prometheus": map[string]any{"url": "https://gpupack@prometheus"}}, nil, "prometheus.auth"},
		{"keys without a Secret", map[string]any{"prometheus": map[string]any{"auth": map[string]any{"bearerTokenKey": "token"}}}, nil, "prometheus.auth.secretName"},
		{"header from no Secret", map[string]any{"prometheus": map[string]any{"headersFromSecret": map[string]any{"X-Scope-OrgID": "tenant"}}}, nil, "prometheus.auth.secretName"},
		{"a Secret without keys", map[string]any{"prometheus": map[string]any{"auth": map[string]any{"secretName": "prom-creds"}}}, nil, "no key of it is used"},
		{"user without password", map[string]any{"prometheus": map[string]any{"auth": map[string]any{"secretName": "prom-creds", "username": "gpupack", "caKey": "ca.crt"}}}, nil, "username and passwordKey"},
		{"bad header name", map[string]any{"prometheus": map[string]any{"headers": map[string]any{"X Scope": "a"}}}, nil, "'X Scope'"},
		{"unknown serve auth", map[string]any{"serve": map[string]any{"auth": "basic"}}, nil, "/serve/auth"},
		{"network policy naming no one", map[string]any{"serve": map[string]any{"networkPolicy": map[string]any{"prometheus": map[string]any{"namespace": ""}}}}, nil, "serve.networkPolicy.enabled=false"},
		{"webhook in kube-system", map[string]any{"webhook": map[string]any{"namespaces": []any{"ml", "kube-system"}}}, nil, "namespaces"},
		{"webhook in its own namespace", map[string]any{"webhook": map[string]any{"namespaces": []any{DeployNamespace}}}, nil, "the release's own namespace"},
		{"webhook timeout of 30 s", map[string]any{"webhook": map[string]any{"timeoutSeconds": 30}}, nil, "timeoutSeconds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(Options{Values: c.values, APIVersions: c.apis})
			if err == nil {
				t.Fatalf("rendered; want an error naming %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %q", err, c.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestSchemaPoliciesArePlacementPolicies keeps the schema's policy list
// equal to the policies the scheduler plugin accepts.
func TestSchemaPoliciesArePlacementPolicies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(Dir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Scheduler struct {
				Properties struct {
					Policy struct {
						Enum []string `json:"enum"`
					} `json:"policy"`
				} `json:"properties"`
			} `json:"scheduler"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(schema.Properties.Scheduler.Properties.Policy.Enum))
	if diff := cmp.Diff(placement.Policies(), got); diff != "" {
		t.Errorf("values.schema.json scheduler.policy enum differs from placement.Policies() (-placement +schema):\n%s", diff)
	}
}

// TestContainerArgsAreTheVerbsFlags runs each gpupack container's rendered
// arguments through gpupack's own command line (with --help, so nothing
// starts): an unknown flag or a value of the wrong type fails here, not in
// a CrashLoopBackOff.
func TestContainerArgsAreTheVerbsFlags(t *testing.T) {
	dec := strictDecoder()
	for _, v := range variants(t) {
		docs, err := Render(Options{Values: v.values, APIVersions: v.apis})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Kind != "Deployment" && d.Kind != "DaemonSet" {
				continue
			}
			obj, _, err := dec.Decode([]byte(d.YAML), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var spec corev1.PodSpec
			switch o := obj.(type) {
			case *appsv1.Deployment:
				spec = o.Spec.Template.Spec
			case *appsv1.DaemonSet:
				spec = o.Spec.Template.Spec
			}
			for _, c := range spec.Containers {
				if !strings.Contains(c.Image, "/gpupack:") && !strings.Contains(c.Image, "/gpupack-agent:") {
					continue
				}
				root := cli.NewRoot(context.Background())
				var out bytes.Buffer
				root.SetOut(&out)
				root.SetErr(&out)
				root.SetArgs(append(slices.Clone(c.Args), "--help"))
				if err := root.Execute(); err != nil {
					t.Errorf("%s: %s %s: container %s: gpupack %s: %v", v.name, d.Kind, d.Name, c.Name, strings.Join(c.Args, " "), err)
				}
			}
		}
	}
}

// TestConfigMapsReadBack: what the chart puts in its ConfigMaps is read by
// the components as they read it: the plan's requests by the webhook's
// parser, the prices by report.
func TestConfigMapsReadBack(t *testing.T) {
	v := variants(t)[len(variants(t))-1] // everything
	docs, err := Render(Options{Values: v.values, APIVersions: v.apis})
	if err != nil {
		t.Fatal(err)
	}
	dec := strictDecoder()
	found := 0
	for _, d := range docs {
		if d.Kind != "ConfigMap" {
			continue
		}
		obj, _, err := dec.Decode([]byte(d.YAML), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cm := obj.(*corev1.ConfigMap)
		switch {
		case cm.Data["workload-requests.yaml"] != "":
			found++
			reqs, err := plan.ParseWorkloadRequests([]byte(cm.Data["workload-requests.yaml"]))
			if err != nil {
				t.Errorf("%s: workload-requests.yaml: %v", cm.Name, err)
			}
			if len(reqs) == 0 {
				t.Errorf("%s: no workload requests read back", cm.Name)
			}
		case cm.Data["prices.yaml"] != "":
			found++
			path := filepath.Join(t.TempDir(), "prices.yaml")
			if err := os.WriteFile(path, []byte(cm.Data["prices.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			root := cli.NewRoot(context.Background())
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs([]string{"report", "--demo", "--prices", path, "--format", "json"})
			if err := root.Execute(); err != nil {
				t.Errorf("%s: gpupack report --prices: %v", cm.Name, err)
			} else if !strings.Contains(out.String(), `"USD"`) {
				t.Errorf("%s: report with the chart's prices does not price in USD", cm.Name)
			}
		case cm.Data["reclaim-policy.yaml"] != "":
			found++
			p, err := reclaim.ParsePolicy([]byte(cm.Data["reclaim-policy.yaml"]), cm.Name)
			if err != nil {
				t.Errorf("%s: reclaim-policy.yaml: %v", cm.Name, err)
			} else if !slices.Equal(p.Namespaces, []string{"ml", "research"}) || p.Classes[reclaim.ClassNotebook].AutoApprove == nil {
				t.Errorf("%s: the policy read back opts in %v, notebook auto-approval %v; want the values' ml, research and auto-approval", cm.Name, p.Namespaces, p.Classes[reclaim.ClassNotebook].AutoApprove)
			}
		case cm.Data["scheduler-config.yaml"] != "":
			found++
			var cfg map[string]any
			if err := yaml.UnmarshalStrict([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
				t.Errorf("%s: scheduler-config.yaml: %v", cm.Name, err)
			}
			if !strings.Contains(cm.Data["scheduler-config.yaml"], "policy: fgd") {
				t.Errorf("%s: scheduler.policy=fgd not in the plugin args", cm.Name)
			}
		}
	}
	if found != 4 {
		t.Errorf("found %d of the 4 ConfigMaps (requests, prices, scheduler, reclaim policy)", found)
	}
}
