package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// promSecret is the Secret that everythingPrometheus names.
const promSecret = "prometheus-credentials"

// everythingPrometheus is a query API behind basic auth with a private CA
// and a tenant header, its secrets in an existing Secret.
func everythingPrometheus() map[string]any {
	return map[string]any{
		"url":               "https://mimir.monitoring.svc:8080/prometheus",
		"auth":              map[string]any{"secretName": promSecret, "username": "gpupack", "passwordKey": "password", "caKey": "ca.crt"},
		"headers":           map[string]any{"X-Team": "platform"},
		"headersFromSecret": map[string]any{"X-Scope-OrgID": "tenant"},
	}
}

// renderObjects renders the chart and decodes every built-in object,
// keyed "Kind name".
func renderObjects(t *testing.T, values map[string]any, apis ...string) map[string]runtime.Object {
	t.Helper()
	docs, err := Render(Options{Values: values, APIVersions: apis})
	if err != nil {
		t.Fatal(err)
	}
	dec := strictDecoder()
	out := map[string]runtime.Object{}
	for _, d := range docs {
		if strings.Contains(d.YAML, "monitoring.coreos.com") || strings.Contains(d.YAML, "cert-manager.io/v1\n") {
			continue
		}
		obj, _, err := dec.Decode([]byte(d.YAML), nil, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", d.Kind, d.Name, err)
		}
		out[d.Kind+" "+d.Name] = obj
	}
	return out
}

// TestPrometheusCredentialsAreMountedNotArgs: with prometheus.auth the
// Secret is mounted read-only and serve is given file paths under the
// mount; no argument holds a secret's value or the Secret's name.
func TestPrometheusCredentialsAreMountedNotArgs(t *testing.T) {
	objs := renderObjects(t, map[string]any{"prometheus": everythingPrometheus()})
	d := objs["Deployment gpupack"].(*appsv1.Deployment)
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	for _, want := range []string{
		"--prometheus=https://mimir.monitoring.svc:8080/prometheus",
		"--prometheus-username=gpupack",
		"--prometheus-password-file=/etc/gpupack/prometheus/password",
		"--prometheus-ca-file=/etc/gpupack/prometheus/ca.crt",
		"--prometheus-header=X-Team=platform",
		"--prometheus-header-file=X-Scope-OrgID=/etc/gpupack/prometheus/tenant",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("serve's args %q lack %s", c.Args, want)
		}
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/gpupack/prometheus" {
			mounted = m.ReadOnly
			for _, v := range spec.Volumes {
				if v.Name == m.Name && (v.Secret == nil || v.Secret.SecretName != promSecret) {
					t.Errorf("volume %s at /etc/gpupack/prometheus is not the Secret %s: %+v", v.Name, promSecret, v.VolumeSource)
				}
			}
		}
	}
	if !mounted {
		t.Errorf("the Secret %s is not mounted read-only at /etc/gpupack/prometheus: %+v", promSecret, c.VolumeMounts)
	}
	for _, a := range c.Args {
		if strings.Contains(a, promSecret) {
			t.Errorf("argument %q names the Secret", a)
		}
	}
}

// TestServeIsClosedByDefault: the default install ships a NetworkPolicy
// that admits only the named Prometheus's pods to serve's port; with
// serve.auth: kubernetes, serve asks the apiserver, may only delegate
// (system:auth-delegator), the viewer Role grants get on serve's
// services/proxy and the metrics ClusterRole the nonResourceURL /metrics,
// each bound to the subjects named.
func TestServeIsClosedByDefault(t *testing.T) {
	objs := renderObjects(t, nil)
	np, ok := objs["NetworkPolicy gpupack"].(*networkingv1.NetworkPolicy)
	if !ok {
		t.Fatal("the default install has no NetworkPolicy for serve")
	}
	if got := np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]; got != "gpupack" {
		t.Errorf("the NetworkPolicy selects %v, want serve's pods", np.Spec.PodSelector.MatchLabels)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 {
		t.Fatalf("ingress %+v, want one rule from the Prometheus alone", np.Spec.Ingress)
	}
	from := np.Spec.Ingress[0].From[0]
	if from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" ||
		from.PodSelector == nil || from.PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
		t.Errorf("ingress from %+v, want the pods app.kubernetes.io/name=prometheus of namespace monitoring", from)
	}
	if slices.ContainsFunc(objs["Deployment gpupack"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--auth") }) {
		t.Error("the default install turns --auth on; it is serve.auth: kubernetes's")
	}
	for _, id := range []string{"Role gpupack-viewer", "ClusterRole gpupack-metrics", "ClusterRoleBinding gpupack-auth-delegator"} {
		if objs[id] != nil {
			t.Errorf("the default install has %s; it belongs to serve.auth: kubernetes", id)
		}
	}

	objs = renderObjects(t, map[string]any{"serve": map[string]any{"auth": "kubernetes",
		"viewers":        []any{map[string]any{"kind": "Group", "name": "gpu-admins", "apiGroup": "rbac.authorization.k8s.io"}},
		"metricsReaders": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}}}})
	if args := objs["Deployment gpupack"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--auth=kubernetes") || !slices.Contains(args, "--auth-service=gpupack-system/gpupack") {
		t.Errorf("serve's args %q lack --auth=kubernetes --auth-service=gpupack-system/gpupack", args)
	}
	delegate := objs["ClusterRoleBinding gpupack-auth-delegator"].(*rbacv1.ClusterRoleBinding)
	if delegate.RoleRef.Name != "system:auth-delegator" || delegate.Subjects[0].Name != "gpupack" {
		t.Errorf("auth-delegator binding %+v, want serve's ServiceAccount bound to system:auth-delegator", delegate)
	}
	viewer := objs["Role gpupack-viewer"].(*rbacv1.Role)
	if diff := cmp.Diff([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services/proxy"}, ResourceNames: []string{"gpupack"}, Verbs: []string{"get"}}}, viewer.Rules); diff != "" {
		t.Errorf("Role gpupack-viewer's rules (-want +got):\n%s", diff)
	}
	metrics := objs["ClusterRole gpupack-metrics"].(*rbacv1.ClusterRole)
	if diff := cmp.Diff([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, metrics.Rules); diff != "" {
		t.Errorf("ClusterRole gpupack-metrics's rules (-want +got):\n%s", diff)
	}
	vb := objs["RoleBinding gpupack-viewer"].(*rbacv1.RoleBinding)
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "Group", Name: "gpu-admins", APIGroup: "rbac.authorization.k8s.io"}}, vb.Subjects); vb.RoleRef.Name != "gpupack-viewer" || diff != "" {
		t.Errorf("RoleBinding gpupack-viewer: role %s, subjects (-want +got):\n%s", vb.RoleRef.Name, diff)
	}
	mb := objs["ClusterRoleBinding gpupack-metrics"].(*rbacv1.ClusterRoleBinding)
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}, mb.Subjects); mb.RoleRef.Name != "gpupack-metrics" || diff != "" {
		t.Errorf("ClusterRoleBinding gpupack-metrics: role %s, subjects (-want +got):\n%s", mb.RoleRef.Name, diff)
	}
}

// TestWebhookIsHardened: the webhook's pods are probed for liveness,
// prefer different nodes and keep all but one through a drain; the
// apiserver sends it only GPU pods and never a pod of the system's
// namespaces or of its own.
func TestWebhookIsHardened(t *testing.T) {
	objs := renderObjects(t, nil)
	spec := objs["Deployment gpupack-webhook"].(*appsv1.Deployment).Spec.Template.Spec
	if p := spec.Containers[0].LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Scheme != "HTTPS" {
		t.Errorf("liveness probe %+v, want GET /readyz over HTTPS", p)
	}
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels["app.kubernetes.io/name"] != "gpupack-webhook" {
		t.Errorf("affinity %+v, want the replicas to prefer different nodes", spec.Affinity)
	}
	pdb, ok := objs["PodDisruptionBudget gpupack-webhook"].(*policyv1.PodDisruptionBudget)
	if !ok || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "gpupack-webhook" {
		t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1 over the webhook's pods", pdb)
	}
	mwc := objs["MutatingWebhookConfiguration gpupack"].(*admissionregistrationv1.MutatingWebhookConfiguration)
	for _, w := range mwc.Webhooks {
		if len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, "nvidia.com/mig-") {
			t.Errorf("webhook %s: matchConditions %+v, want the GPU filter", w.Name, w.MatchConditions)
		}
		var excluded []string
		for _, e := range w.NamespaceSelector.MatchExpressions {
			if e.Key == "kubernetes.io/metadata.name" && e.Operator == "NotIn" {
				excluded = e.Values
			}
		}
		if diff := cmp.Diff([]string{"kube-system", "kube-public", "kube-node-lease", DeployNamespace}, excluded); diff != "" {
			t.Errorf("webhook %s: namespaces never sent (-want +got):\n%s", w.Name, diff)
		}
	}

	// One replica: no budget that would block every drain; a given
	// affinity replaces the default.
	objs = renderObjects(t, map[string]any{"webhook": map[string]any{"replicas": 1, "affinity": map[string]any{"nodeAffinity": map[string]any{}}}})
	if objs["PodDisruptionBudget gpupack-webhook"] != nil {
		t.Error("one replica has a PodDisruptionBudget")
	}
	if a := objs["Deployment gpupack-webhook"].(*appsv1.Deployment).Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity != nil {
		t.Errorf("affinity %+v, want webhook.affinity's in place of the default", a)
	}
}

// TestAgentIsHardened: the agent is off by default; on, it is a DaemonSet
// that is not privileged, adds no capability, has a read-only root
// filesystem and exactly one hostPath, the kubelet's pod-resources
// directory, mounted read-only; it may list pods and nothing more.
func TestAgentIsHardened(t *testing.T) {
	if objs := renderObjects(t, nil); objs["DaemonSet gpupack-agent"] != nil {
		t.Fatal("the agent is on by default")
	}
	objs := renderObjects(t, map[string]any{"agent": map[string]any{"enabled": true}})
	ds, ok := objs["DaemonSet gpupack-agent"].(*appsv1.DaemonSet)
	if !ok {
		t.Fatal("agent.enabled renders no DaemonSet gpupack-agent")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || spec.HostNetwork || spec.HostIPC {
		t.Errorf("hostPID %v, hostNetwork %v, hostIPC %v; want the host's PID namespace only", spec.HostPID, spec.HostNetwork, spec.HostIPC)
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security %+v, want unprivileged, no capabilities, read-only root", sc)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Error("the agent has no memory limit")
	}
	var hostPaths []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	if diff := cmp.Diff([]string{"/var/lib/kubelet/pod-resources"}, hostPaths); diff != "" {
		t.Errorf("hostPath volumes (-want +got):\n%s", diff)
	}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.MountPath)
		}
	}
	role := objs["ClusterRole gpupack-agent"].(*rbacv1.ClusterRole)
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("the agent's ClusterRole (-want +got):\n%s", diff)
	}
}
