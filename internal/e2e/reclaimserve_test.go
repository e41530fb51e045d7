package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/charts"
	actuator "github.com/gpupack/gpupack/internal/actuator/kube"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/reclaim"
)

// TestReclaimControllerWithChartRBAC runs the reclaim controller as
// serve's ServiceAccount with exactly the RBAC the chart grants with
// reclaim.enabled, on a real apiserver: it notifies a new candidate's
// owner, leaves a due one alone until the approver (with the chart's
// approver Role) adds its ID to the approvals ConfigMap, then scales it
// to 0 through the scale subresource and records it in the ledger; a
// restore puts the replicas back and the controller counts it. Detection
// is given (the reclaim e2e tests detect on Prometheus): this is the
// controller's loop and its rights.
func TestReclaimControllerWithChartRBAC(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	const ns, approvals = "gpupack-system", "gpupack-reclaim-approvals"
	c.CreateNamespace(ns)
	c.CreateNamespace(reclaimNS)
	chartReclaimRBAC(t, c, ns)
	ctx := t.Context()
	due, fresh := createReclaimDeployment(t, c, "llm"), createReclaimDeployment(t, c, "chat")

	client := c.ClientAs(ns, "gpupack")
	dyn, err := kube.Dynamic(client)
	if err != nil {
		t.Fatal(err)
	}
	a := &actuator.Reclaimer{Client: client, Dynamic: dyn, LedgerNamespace: ns, LedgerName: "gpupack-reclaim-ledger", Component: "gpupack-reclaim-e2e"}
	set := &reclaim.Set{Hash: "e2e", Candidates: []reclaim.Candidate{candidateOf(due, reclaim.StateDue), candidateOf(fresh, reclaim.StateToNotify)}}
	counted := map[string]int{}
	ctl := &app.ReclaimController{
		Detect: func(context.Context) (*app.Detection, error) {
			return &app.Detection{Set: set, Policy: reclaim.DefaultPolicy()}, nil
		},
		Approvals: func(ctx context.Context) (map[string]string, error) { return a.Approvals(ctx, ns, approvals) },
		Actuator:  a,
		Observe:   func(kind reclaim.Kind, outcome string) { counted[string(kind)+" "+outcome]++ },
	}

	ctl.Once(ctx)
	st := ctl.Status()
	if st.Error != "" || len(st.Outcome.Notified) != 1 || len(st.Outcome.Waiting) != 1 || len(st.Outcome.Records) != 0 {
		t.Fatalf("unapproved round: error %q, outcome %+v; want chat notified, llm awaiting approval", st.Error, st.Outcome)
	}
	if d := getDeployment(t, c, "chat"); d.Annotations[wellknown.AnnotationReclaimNotice] == "" {
		t.Errorf("chat carries no notice: %v", d.Annotations)
	}
	if d := getDeployment(t, c, "llm"); *d.Spec.Replicas != 2 {
		t.Fatalf("llm scaled to %d before its approval", *d.Spec.Replicas)
	}

	patch := []byte(`{"data":{"` + set.Candidates[0].ID + `":"alice"}}`)
	if _, err := c.ClientAs(ns, "reclaim-approver").CoreV1().ConfigMaps(ns).Patch(ctx, approvals, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the approver patching the approvals ConfigMap: %v", err)
	}
	set.Candidates = set.Candidates[:1]
	ctl.Once(ctx)
	st = ctl.Status()
	if st.Error != "" || len(st.Outcome.Records) != 1 || st.Outcome.Records[0].Outcome != reclaim.OutcomeReclaimed || st.Outcome.Records[0].ApprovedBy != "alice" {
		t.Fatalf("approved round: error %q, records %+v; want llm reclaimed on alice's approval", st.Error, st.Outcome.Records)
	}
	if d := getDeployment(t, c, "llm"); *d.Spec.Replicas != 0 || d.Annotations[wellknown.AnnotationReclaimed] == "" {
		t.Errorf("llm after its reclaim: %d replicas, annotations %v; want 0 and the record", *d.Spec.Replicas, d.Annotations)
	}
	if len(st.Ledger) != 1 || st.Ledger[0].Outcome != reclaim.OutcomeReclaimed || st.Totals.ByOutcome[reclaim.OutcomeReclaimed] != 1 {
		t.Errorf("ledger %+v, totals %+v; want llm's record", st.Ledger, st.Totals)
	}

	if _, err := app.Restore(ctx, a, app.RestoreRequest{ID: set.Candidates[0].ID, By: "bob", Now: time.Now()}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	set.Candidates = nil
	ctl.Once(ctx)
	if d := getDeployment(t, c, "llm"); *d.Spec.Replicas != 2 {
		t.Errorf("llm after its restore: %d replicas, want 2", *d.Spec.Replicas)
	}
	if d := cmp.Diff(map[string]int{"Deployment reclaimed": 1, "Deployment restored": 1}, counted); d != "" {
		t.Errorf("counted (-want +got):\n%s", d)
	}
}

// chartReclaimRBAC creates serve's and the approver's ServiceAccounts and
// what the chart renders for reclaim.enabled (its roles, bindings and the
// approvals ConfigMap) in namespace ns.
func chartReclaimRBAC(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	ctx := t.Context()
	cs := c.Client()
	for _, sa := range []string{"gpupack", "reclaim-approver"} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := charts.Render(charts.Options{Namespace: ns, Values: map[string]any{"reclaim": map[string]any{"enabled": true,
		"approvers": []any{map[string]any{"kind": "ServiceAccount", "name": "reclaim-approver", "namespace": ns}}}}})
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, d := range docs {
		if d.Source != "templates/reclaim.yaml" {
			continue
		}
		var err error
		switch d.Kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			unmarshalDoc(t, d, &o)
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			unmarshalDoc(t, d, &o)
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			unmarshalDoc(t, d, &o)
			_, err = cs.RbacV1().Roles(ns).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			unmarshalDoc(t, d, &o)
			_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &o, metav1.CreateOptions{})
		case "ConfigMap":
			var o corev1.ConfigMap
			unmarshalDoc(t, d, &o)
			_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &o, metav1.CreateOptions{})
		default:
			t.Fatalf("templates/reclaim.yaml renders a %s, which this test does not create", d.Kind)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", d.Kind, d.Name, err)
		}
		created++
	}
	if created == 0 {
		t.Fatal("the chart rendered nothing from templates/reclaim.yaml")
	}
}

func unmarshalDoc(t *testing.T, d charts.Doc, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(d.YAML), into); err != nil {
		t.Fatalf("%s %s: %v", d.Kind, d.Name, err)
	}
}

// createReclaimDeployment creates the reclaim tests' Deployment name
// with 2 replicas.
func createReclaimDeployment(t *testing.T, c *testcluster.Cluster, name string) *appsv1.Deployment {
	t.Helper()
	d := reclaimDeployment(name)
	d.Spec.Replicas = ptr.To(int32(2))
	created, err := c.Client().AppsV1().Deployments(reclaimNS).Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func getDeployment(t *testing.T, c *testcluster.Cluster, name string) *appsv1.Deployment {
	t.Helper()
	d, err := c.Client().AppsV1().Deployments(reclaimNS).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// candidateOf is the Deployment's candidate in the given notice state,
// its ID the deployment's name.
func candidateOf(d *appsv1.Deployment, state string) reclaim.Candidate {
	return reclaim.Candidate{ID: strings.Repeat(d.Name[:1], 12), Owner: reclaim.Ref{Kind: reclaim.Deployment, APIVersion: "apps/v1", Namespace: d.Namespace, Name: d.Name, UID: string(d.UID)},
		Class: reclaim.ClassInference, Action: reclaim.ScaleToZero, Restorable: true, Replicas: d.Spec.Replicas, State: state,
		Pods: []reclaim.PodRef{{Namespace: d.Namespace, Name: d.Name + "-0", GPUs: 1}}}
}
