package charts

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

const (
	installNamespace = "gpupack-system"
	installRelease   = "gpupack"
	// waitTimeout bounds each wait for the cluster to converge; a bound on
	// a hang, not an expectation of speed.
	waitTimeout = 2 * time.Minute
)

// helm is Helm's SDK pointed at the test cluster, with the release stored
// in Secrets as `helm install` stores it.
type helm struct {
	t   *testing.T
	cfg *action.Configuration
}

func newHelm(t *testing.T, kubeconfig string) *helm {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	ns := installNamespace
	flags.Namespace = &ns
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := cfg.Init(flags, installNamespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return &helm{t: t, cfg: cfg}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("helm: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

func (h *helm) install(values map[string]any) {
	h.t.Helper()
	c, err := Load()
	if err != nil {
		h.t.Fatal(err)
	}
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = installRelease, installNamespace, true
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, waitTimeout
	if _, err := in.RunWithContext(h.t.Context(), c, values); err != nil {
		h.t.Fatalf("helm install: %v", err)
	}
}

func (h *helm) upgrade(values map[string]any) {
	h.t.Helper()
	c, err := Load()
	if err != nil {
		h.t.Fatal(err)
	}
	up := action.NewUpgrade(h.cfg)
	up.Namespace = installNamespace
	up.WaitStrategy, up.Timeout = kube.HookOnlyStrategy, waitTimeout
	if _, err := up.RunWithContext(h.t.Context(), installRelease, c, values); err != nil {
		h.t.Fatalf("helm upgrade: %v", err)
	}
}

func (h *helm) uninstall() {
	h.t.Helper()
	un := action.NewUninstall(h.cfg)
	un.WaitStrategy, un.Timeout = kube.HookOnlyStrategy, waitTimeout
	if _, err := un.Run(installRelease); err != nil {
		h.t.Fatalf("helm uninstall: %v", err)
	}
}

// TestInstallUpgradeUninstall installs the chart with Helm's SDK on a real
// control plane (apiserver, controller-manager, scheduler, kwok running the
// pods): every object passes the apiserver's validation, every Deployment
// becomes Available, each ServiceAccount may do exactly what its component
// needs, and the webhook fails open: pods of opted-in namespaces are
// created while it is unreachable, throughout an upgrade, and no
// registration is left after uninstall.
func TestInstallUpgradeUninstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("system-0", testcluster.GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 1})
	client := c.Client()
	ctx := t.Context()
	h := newHelm(t, c.Kubeconfig())

	c.CreateNamespace("ml")
	labelNamespace(t, client, "ml")

	// serve in its authenticated mode, one ServiceAccount its viewer.
	h.install(map[string]any{"serve": map[string]any{"auth": "kubernetes",
		"viewers": []any{map[string]any{"kind": "ServiceAccount", "name": "viewer", "namespace": installNamespace}}}})
	waitDeployments(c, "gpupack", "gpupack-scheduler", "gpupack-webhook")

	t.Run("serve is closed to all but the named", func(t *testing.T) {
		np, err := client.NetworkingV1().NetworkPolicies(installNamespace).Get(ctx, "gpupack", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the NetworkPolicy for serve: %v", err)
		}
		if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector == nil {
			t.Errorf("NetworkPolicy ingress %+v, want one rule from the Prometheus's pods", np.Spec.Ingress)
		}
		if _, err := client.CoreV1().ServiceAccounts(installNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		viewer := c.ClientAs(installNamespace, "viewer")
		if !can(t, viewer, access{"get", "", "services/proxy", installNamespace, "gpupack"}) {
			t.Error("serve.viewers' ServiceAccount may not get serve's services/proxy: it cannot read the page")
		}
		for _, a := range []access{{"get", "", "services/proxy", installNamespace, "gpupack-webhook"}, {"get", "", "services", installNamespace, "gpupack"}, {"list", "", "pods", "ml", ""}} {
			if can(t, viewer, a) {
				t.Errorf("serve.viewers' ServiceAccount can %s; it needs no such right", a)
			}
		}
	})

	t.Run("the webhook registration fails open", func(t *testing.T) {
		mwc, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, installRelease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkFailOpen(t, mwc)
		// The webhook's pods are kwok's: nothing answers at its Service, so
		// each admission fails, and the pod must be created all the same.
		createGPUPod(t, client, "ml", "while-unreachable")
	})

	t.Run("each ServiceAccount may do what its component needs", func(t *testing.T) {
		for _, sa := range accessCases() {
			as := c.ClientAs(installNamespace, sa.name)
			for _, a := range sa.allowed {
				if !can(t, as, a) {
					t.Errorf("%s cannot %s; its component needs it", sa.name, a)
				}
			}
			for _, a := range sa.denied {
				if can(t, as, a) {
					t.Errorf("%s can %s; it needs no such right", sa.name, a)
				}
			}
		}
	})

	t.Run("the reader and the webhook have exactly their rules", func(t *testing.T) {
		// What any ServiceAccount may do (discovery, self reviews) is not
		// the chart's doing: compare against a ServiceAccount with no
		// binding at all.
		if _, err := client.CoreV1().ServiceAccounts(installNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		base := rules(t, c.ClientAs(installNamespace, "nobody"), installNamespace)
		want := map[string][]string{
			"gpupack": {
				"/events [list watch]",
				"/nodes [list watch]",
				"/persistentvolumeclaims [list watch]",
				"/pods [list watch]",
				"/resourcequotas [list watch]",
				// system:auth-delegator, for serve.auth: kubernetes.
				"authentication.k8s.io/tokenreviews [create]",
				"authorization.k8s.io/subjectaccessreviews [create]",
				"coordination.k8s.io/leases [list watch]",
				"kueue.x-k8s.io/clusterqueues [list watch]",
				"kueue.x-k8s.io/localqueues [list watch]",
				"kueue.x-k8s.io/resourceflavors [list watch]",
				"kueue.x-k8s.io/workloads [list watch]",
				"resource.k8s.io/deviceclasses [list watch]",
				"resource.k8s.io/devicetaintrules [list watch]",
				"resource.k8s.io/resourceclaims [list watch]",
				"resource.k8s.io/resourceclaimtemplates [list watch]",
				"resource.k8s.io/resourceslices [list watch]",
			},
			"gpupack-webhook": {
				"/secrets/gpupack-webhook-tls [get update]",
				"admissionregistration.k8s.io/mutatingwebhookconfigurations/gpupack [get patch]",
			},
		}
		for sa, wantRules := range want {
			got := slices.DeleteFunc(rules(t, c.ClientAs(installNamespace, sa), installNamespace), func(r string) bool { return slices.Contains(base, r) })
			if !slices.Equal(got, wantRules) {
				t.Errorf("%s's rules in %s beyond any ServiceAccount's:\n got %q\nwant %q", sa, installNamespace, got, wantRules)
			}
		}
	})

	t.Run("upgrade with changed values stays fail-open throughout", func(t *testing.T) {
		c.CreateNamespace("inference")
		c.CreateNamespace("gpu-operator") // the apply controller's configs live there
		// Watch every version of the registration the apiserver stores, and
		// keep creating pods in an opted-in namespace, while Helm upgrades.
		watchCtx, stop := context.WithCancel(ctx)
		w, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Watch(watchCtx, metav1.ListOptions{FieldSelector: "metadata.name=" + installRelease})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var versions []*admissionregistrationv1.MutatingWebhookConfiguration
		var podErrs []error
		var wg sync.WaitGroup
		wg.Go(func() {
			for ev := range w.ResultChan() {
				if mwc, ok := ev.Object.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
					mu.Lock()
					versions = append(versions, mwc)
					mu.Unlock()
				}
			}
		})
		wg.Go(func() {
			for i := 0; watchCtx.Err() == nil; i++ {
				if err := tryCreateGPUPod(watchCtx, client, "ml", fmt.Sprintf("during-upgrade-%d", i)); err != nil && watchCtx.Err() == nil {
					mu.Lock()
					podErrs = append(podErrs, err)
					mu.Unlock()
				}
			}
		})
		h.upgrade(map[string]any{
			"scheduler": map[string]any{"policy": "fgd"},
			"serve":     map[string]any{"window": "12h"},
			"webhook":   map[string]any{"namespaces": []any{"inference"}, "timeoutSeconds": 1},
			"apply": map[string]any{"enabled": true,
				"approvers": []any{map[string]any{"kind": "ServiceAccount", "name": "approver", "namespace": installNamespace}}},
			"reclaim": map[string]any{"enabled": true,
				"approvers": []any{map[string]any{"kind": "ServiceAccount", "name": "reclaim-approver", "namespace": installNamespace}}},
		})
		waitDeployments(c, "gpupack", "gpupack-scheduler", "gpupack-webhook")
		mwc, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, installRelease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stop()
		w.Stop()
		wg.Wait()
		checkFailOpen(t, mwc)
		if len(mwc.Webhooks) != 2 {
			t.Errorf("after the upgrade: %d webhooks, want 2 (labelled and named namespaces)", len(mwc.Webhooks))
		}
		for _, v := range versions {
			checkFailOpen(t, v)
		}
		if len(versions) == 0 {
			t.Error("saw no version of the registration during the upgrade")
		}
		for _, err := range podErrs {
			t.Errorf("pod creation failed during the upgrade: %v", err)
		}
		cm, err := client.CoreV1().ConfigMaps(installNamespace).Get(ctx, "gpupack-scheduler-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cm.Data["scheduler-config.yaml"], "policy: fgd") {
			t.Errorf("the upgrade did not change the scheduler's policy:\n%s", cm.Data["scheduler-config.yaml"])
		}
		createGPUPod(t, client, "inference", "named-namespace")
	})

	t.Run("the apply controller may do exactly its writes, the approver only approve", func(t *testing.T) {
		checkApplyAccess(t, c)
	})

	t.Run("the reclaim controller may do exactly its writes, the approver only approve", func(t *testing.T) {
		checkReclaimAccess(t, c)
	})

	t.Run("uninstall leaves no registration behind", func(t *testing.T) {
		h.uninstall()
		mwcs, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mwcs.Items {
			for _, w := range m.Webhooks {
				if s := w.ClientConfig.Service; s != nil && s.Namespace == installNamespace {
					t.Errorf("MutatingWebhookConfiguration %s still sends pods to %s/%s", m.Name, s.Namespace, s.Name)
				}
			}
		}
		for _, kind := range []string{"clusterroles", "clusterrolebindings"} {
			var names []string
			sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + installRelease}
			switch kind {
			case "clusterroles":
				l, err := client.RbacV1().ClusterRoles().List(ctx, sel)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range l.Items {
					names = append(names, o.Name)
				}
			default:
				l, err := client.RbacV1().ClusterRoleBindings().List(ctx, sel)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range l.Items {
					names = append(names, o.Name)
				}
			}
			if len(names) > 0 {
				t.Errorf("uninstall left %s %v", kind, names)
			}
		}
		createGPUPod(t, client, "ml", "after-uninstall")
	})
}

// access is a question to the apiserver's authorizer.
type access struct {
	verb, group, resource, namespace, name string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r = a.group + "/" + r
	}
	if a.name != "" {
		r += "/" + a.name
	}
	if a.namespace != "" {
		r += " in " + a.namespace
	}
	return a.verb + " " + r
}

type saCase struct {
	name            string
	allowed, denied []access
}

// accessCases: what each component does (allowed) and what a compromised
// one must not be able to do (denied).
func accessCases() []saCase {
	ns := installNamespace
	return []saCase{
		{name: "gpupack",
			allowed: []access{{"list", "", "nodes", "", ""}, {"watch", "", "pods", "", ""}, {"list", "", "pods", "ml", ""}, {"list", "", "events", "ml", ""}, {"list", "", "persistentvolumeclaims", "", ""}, {"list", "", "resourcequotas", "", ""}, {"watch", "kueue.x-k8s.io", "workloads", "", ""}, {"list", "kueue.x-k8s.io", "clusterqueues", "", ""}},
			denied:  []access{{"get", "", "secrets", ns, ""}, {"create", "", "pods", "ml", ""}, {"update", "", "resourcequotas", "ml", ""}, {"patch", "kueue.x-k8s.io", "clusterqueues", "", ""}, {"update", "", "nodes", "", ""}, {"delete", "", "pods", "ml", ""}, {"get", "", "configmaps", ns, ""}}},
		{name: "gpupack-scheduler",
			allowed: []access{{"create", "", "pods/binding", "ml", ""}, {"patch", "", "pods/status", "ml", ""}, {"list", "", "nodes", "", ""}, {"watch", "", "pods", "", ""},
				{"create", "coordination.k8s.io", "leases", ns, ""}, {"update", "coordination.k8s.io", "leases", ns, "gpupack-scheduler"}, {"create", "events.k8s.io", "events", "ml", ""},
				{"get", "", "configmaps", "kube-system", "extension-apiserver-authentication"}},
			denied: []access{{"get", "", "secrets", ns, ""}, {"update", "", "nodes", "", ""}, {"update", "coordination.k8s.io", "leases", ns, "other"}, {"update", "", "configmaps", ns, "gpupack-scheduler-config"}}},
		{name: "gpupack-webhook",
			allowed: []access{{"get", "", "secrets", ns, "gpupack-webhook-tls"}, {"update", "", "secrets", ns, "gpupack-webhook-tls"},
				{"get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "gpupack"}, {"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "gpupack"}},
			denied: []access{{"get", "", "secrets", ns, "other"}, {"list", "", "secrets", ns, ""}, {"create", "", "secrets", ns, ""}, {"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "other"}, {"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "gpupack"},
				{"create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", ""}, {"list", "", "pods", "", ""}}},
	}
}

// can asks the authorizer whether the client may do a.
func can(t *testing.T, client kubernetes.Interface, a access) bool {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: resourceOf(a.resource), Subresource: subresourceOf(a.resource), Namespace: a.namespace, Name: a.name},
	}}
	res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectAccessReview %s: %v", a, err)
	}
	return res.Status.Allowed
}

func resourceOf(r string) string    { res, _, _ := strings.Cut(r, "/"); return res }
func subresourceOf(r string) string { _, sub, _ := strings.Cut(r, "/"); return sub }

// rules lists the client's resource rules in ns, one "group/resource[/name]
// [verbs]" per resource and name, sorted.
func rules(t *testing.T, client kubernetes.Interface, ns string) []string {
	t.Helper()
	res, err := client.AuthorizationV1().SelfSubjectRulesReviews().Create(t.Context(),
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res.Status.ResourceRules {
		verbs := slices.Sorted(slices.Values(r.Verbs))
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					s := g + "/" + res
					if n != "" {
						s += "/" + n
					}
					out = append(out, fmt.Sprintf("%s %v", s, verbs))
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func checkFailOpen(t *testing.T, mwc *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	if len(mwc.Webhooks) == 0 {
		t.Errorf("MutatingWebhookConfiguration %s (resourceVersion %s) has no webhooks", mwc.Name, mwc.ResourceVersion)
	}
	for _, w := range mwc.Webhooks {
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("MutatingWebhookConfiguration %s (resourceVersion %s) webhook %s: failurePolicy %v, want Ignore", mwc.Name, mwc.ResourceVersion, w.Name, w.FailurePolicy)
		}
	}
}

func labelNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"gpupack.io/pack":"enabled"}}}`)
	if _, err := client.CoreV1().Namespaces().Patch(t.Context(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func gpuPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: "example.invalid/train:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		}}},
	}
}

func tryCreateGPUPod(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	_, err := client.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, name), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func createGPUPod(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := tryCreateGPUPod(t.Context(), client, ns, name); err != nil {
		t.Errorf("creating GPU pod %s/%s: %v (the webhook must fail open)", ns, name, err)
	}
}

// waitDeployments waits until each of the chart's Deployments is rolled out
// and available.
func waitDeployments(c *testcluster.Cluster, names ...string) {
	for _, name := range names {
		c.WaitDeploymentAvailable(installNamespace, name)
	}
}

// checkApplyAccess checks the rights apply.enabled grants: the controller
// (serve's ServiceAccount) patches nodes, evicts through the Eviction API,
// reads budgets, writes the two operator ConfigMaps and DeviceTaintRules
// and reads the approvals; it may not delete pods or approve. The approver
// may write the approvals and nothing the controller does.
func checkApplyAccess(t *testing.T, c *testcluster.Cluster) {
	ns, op := installNamespace, "gpu-operator"
	if _, err := c.Client().CoreV1().ConfigMaps(ns).Get(t.Context(), "gpupack-approvals", metav1.GetOptions{}); err != nil {
		t.Errorf("the approvals ConfigMap: %v", err)
	}
	if _, err := c.Client().CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "approver"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []saCase{
		{name: "gpupack",
			allowed: []access{{"get", "", "nodes", "", "gpu-1"}, {"patch", "", "nodes", "", "gpu-1"}, {"update", "", "nodes", "", "gpu-1"},
				{"create", "", "pods/eviction", "ml", "p"}, {"list", "policy", "poddisruptionbudgets", "", ""},
				{"create", "resource.k8s.io", "devicetaintrules", "", ""}, {"delete", "resource.k8s.io", "devicetaintrules", "", "r"},
				{"create", "", "events", "default", ""},
				{"get", "", "configmaps", op, "custom-mig-config"}, {"update", "", "configmaps", op, "custom-mig-config"},
				{"update", "", "configmaps", op, "gpupack-device-plugin-configs"}, {"create", "", "configmaps", op, ""},
				{"get", "", "configmaps", ns, "gpupack-approvals"}},
			denied: []access{{"delete", "", "pods", "ml", ""}, {"create", "", "pods", "ml", ""}, {"delete", "", "nodes", "", "gpu-1"},
				{"update", "", "configmaps", ns, "gpupack-approvals"}, {"patch", "", "configmaps", ns, "gpupack-approvals"},
				{"update", "", "configmaps", op, "other"}, {"get", "", "secrets", op, ""}, {"update", "policy", "poddisruptionbudgets", "ml", ""}}},
		{name: "approver",
			allowed: []access{{"patch", "", "configmaps", ns, "gpupack-approvals"}, {"get", "", "configmaps", ns, "gpupack-approvals"}},
			denied: []access{{"patch", "", "configmaps", ns, "other"}, {"patch", "", "nodes", "", "gpu-1"}, {"create", "", "pods/eviction", "ml", "p"},
				{"update", "", "configmaps", op, "custom-mig-config"}}},
	}
	for _, sa := range cases {
		as := c.ClientAs(ns, sa.name)
		for _, a := range sa.allowed {
			if !can(t, as, a) {
				t.Errorf("%s cannot %s; apply needs it", sa.name, a)
			}
		}
		for _, a := range sa.denied {
			if can(t, as, a) {
				t.Errorf("%s can %s; apply needs no such right", sa.name, a)
			}
		}
	}
}

// checkReclaimAccess checks the rights reclaim.enabled grants: the
// controller (serve's ServiceAccount) patches the owners, scales through
// the scale subresource, evicts through the Eviction API, reads what
// finds an owner, writes its ledger and reads the approvals; it may not
// delete or create workloads, scale other than through the subresource,
// or approve. The approver may write the approvals and nothing the
// controller does.
func checkReclaimAccess(t *testing.T, c *testcluster.Cluster) {
	ns := installNamespace
	if _, err := c.Client().CoreV1().ConfigMaps(ns).Get(t.Context(), "gpupack-reclaim-approvals", metav1.GetOptions{}); err != nil {
		t.Errorf("the reclaim approvals ConfigMap: %v", err)
	}
	if _, err := c.Client().CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reclaim-approver"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []saCase{
		{name: "gpupack",
			allowed: []access{{"patch", "apps", "deployments", "ml", "d"}, {"patch", "apps", "statefulsets", "ml", "s"}, {"patch", "apps", "replicasets", "ml", "r"},
				{"get", "apps", "deployments/scale", "ml", "d"}, {"update", "apps", "deployments/scale", "ml", "d"}, {"update", "apps", "statefulsets/scale", "ml", "s"},
				{"patch", "batch", "jobs", "ml", "j"}, {"patch", "kubeflow.org", "notebooks", "ml", "n"}, {"patch", "kueue.x-k8s.io", "workloads", "ml", "w"},
				{"patch", "keda.sh", "scaledobjects", "ml", "so"}, {"list", "autoscaling", "horizontalpodautoscalers", "ml", ""}, {"get", "", "namespaces", "", "ml"},
				{"create", "", "pods/eviction", "ml", "p"}, {"create", "", "events", "ml", ""},
				{"get", "", "configmaps", ns, "gpupack-reclaim-ledger"}, {"update", "", "configmaps", ns, "gpupack-reclaim-ledger"}, {"create", "", "configmaps", ns, ""},
				{"get", "", "configmaps", ns, "gpupack-reclaim-approvals"}},
			denied: []access{{"delete", "apps", "deployments", "ml", "d"}, {"create", "apps", "deployments", "ml", ""}, {"update", "apps", "deployments", "ml", "d"},
				{"delete", "batch", "jobs", "ml", "j"}, {"delete", "kubeflow.org", "notebooks", "ml", "n"}, {"patch", "autoscaling", "horizontalpodautoscalers", "ml", "h"},
				{"update", "", "configmaps", ns, "gpupack-reclaim-approvals"}, {"patch", "", "configmaps", ns, "gpupack-reclaim-approvals"},
				{"update", "", "configmaps", ns, "other"}, {"update", "", "configmaps", "ml", "gpupack-reclaim-ledger"}, {"get", "", "secrets", "ml", ""}}},
		{name: "reclaim-approver",
			allowed: []access{{"patch", "", "configmaps", ns, "gpupack-reclaim-approvals"}, {"get", "", "configmaps", ns, "gpupack-reclaim-approvals"}},
			denied: []access{{"patch", "", "configmaps", ns, "gpupack-approvals"}, {"update", "", "configmaps", ns, "gpupack-reclaim-ledger"},
				{"patch", "apps", "deployments", "ml", "d"}, {"create", "", "pods/eviction", "ml", "p"}}},
	}
	for _, sa := range cases {
		as := c.ClientAs(ns, sa.name)
		for _, a := range sa.allowed {
			if !can(t, as, a) {
				t.Errorf("%s cannot %s; reclaim needs it", sa.name, a)
			}
		}
		for _, a := range sa.denied {
			if can(t, as, a) {
				t.Errorf("%s can %s; reclaim needs no such right", sa.name, a)
			}
		}
	}
}
