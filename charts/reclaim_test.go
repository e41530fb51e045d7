package charts

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// reclaimValues switch the reclaim controller on with a policy, an
// approver and the notice webhook's Secret.
func reclaimValues() map[string]any {
	return map[string]any{"enabled": true, "interval": "15m",
		"policy": map[string]any{"namespaces": []any{"ml", "research"},
			"classes": map[string]any{"notebook": map[string]any{"idleFor": "24h", "grace": "1h", "notice": "4h", "autoApprove": map[string]any{"excludeNamespaces": []any{"prod"}}}}},
		"approvers":     []any{map[string]any{"kind": "Group", "name": "gpu-admins", "apiGroup": "rbac.authorization.k8s.io"}},
		"notifyWebhook": map[string]any{"secretName": "reclaim-hook", "key": "url"}}
}

// ruleLines writes RBAC rules one "group/resource[/name] [verbs]" per
// resource and name, sorted, as install_test's rules does for what the
// apiserver grants.
func ruleLines(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
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
					out = append(out, fmt.Sprintf("%s %v", s, slices.Sorted(slices.Values(r.Verbs))))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestReclaimRBAC: reclaim.enabled grants serve exactly what the
// Reclaimer writes and what ReadReclaim reads, the ledger by name, the
// approvals read-only, and the approver Role only the approvals; off (the
// default) it renders none of it, and serve runs no reclaim controller.
func TestReclaimRBAC(t *testing.T) {
	dec := strictDecoder()
	render := func(values map[string]any) map[string]any {
		docs, err := Render(Options{Values: values})
		if err != nil {
			t.Fatal(err)
		}
		objs := map[string]any{}
		for _, d := range docs {
			obj, _, err := dec.Decode([]byte(d.YAML), nil, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", d.Kind, d.Name, err)
			}
			objs[d.Kind+" "+d.Name] = obj
		}
		return objs
	}
	off := render(nil)
	for id := range off {
		if strings.Contains(id, "reclaim") {
			t.Errorf("reclaim is off by default, but the chart renders %s", id)
		}
	}
	if args := serveArgs(t, off); slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "reclaim") }) {
		t.Errorf("reclaim is off by default, but serve runs with %v", args)
	}

	on := render(map[string]any{"reclaim": reclaimValues()})
	cases := map[string][]string{
		"ClusterRole gpupack-reclaim": {
			"/events [create]", "/namespaces [get list]", "/pods [get list]", "/pods/eviction [create]",
			"apps/deployments [get list patch]", "apps/deployments/scale [get update]",
			"apps/replicasets [get list patch]", "apps/replicasets/scale [get update]",
			"apps/statefulsets [get list patch]", "apps/statefulsets/scale [get update]",
			"autoscaling/horizontalpodautoscalers [get list]", "batch/jobs [get list patch]",
			"keda.sh/scaledobjects [get list patch]", "kubeflow.org/notebooks [get list patch]", "kueue.x-k8s.io/workloads [get list patch]",
		},
		"Role gpupack-reclaim": {
			"/configmaps [create]", "/configmaps/gpupack-reclaim-approvals [get]", "/configmaps/gpupack-reclaim-ledger [get update]",
		},
		"Role gpupack-reclaim-approver": {"/configmaps/gpupack-reclaim-approvals [get patch update]"},
	}
	for id, want := range cases {
		var rules []rbacv1.PolicyRule
		switch o := on[id].(type) {
		case *rbacv1.ClusterRole:
			rules = o.Rules
		case *rbacv1.Role:
			rules = o.Rules
		default:
			t.Errorf("%s not rendered (have %T)", id, on[id])
			continue
		}
		if d := cmp.Diff(want, ruleLines(rules)); d != "" {
			t.Errorf("%s's rules (-want +got):\n%s", id, d)
		}
	}
	for _, id := range []string{"ClusterRoleBinding gpupack-reclaim", "RoleBinding gpupack-reclaim"} {
		b, ok := on[id].(*rbacv1.ClusterRoleBinding)
		var subjects []rbacv1.Subject
		if ok {
			subjects = b.Subjects
		} else if rb, ok := on[id].(*rbacv1.RoleBinding); ok {
			subjects = rb.Subjects
		}
		if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gpupack", Namespace: "gpupack-system"}}; !cmp.Equal(want, subjects) {
			t.Errorf("%s binds %v, want serve's ServiceAccount only", id, subjects)
		}
	}
	if rb, ok := on["RoleBinding gpupack-reclaim-approver"].(*rbacv1.RoleBinding); !ok || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "gpu-admins" {
		t.Errorf("the approver Role is not bound to reclaim.approvers: %+v", on["RoleBinding gpupack-reclaim-approver"])
	}
	if _, ok := on["ConfigMap gpupack-reclaim-approvals"]; !ok {
		t.Error("the approvals ConfigMap is not rendered")
	}
	args := serveArgs(t, on)
	for _, want := range []string{"--reclaim-controller", "--reclaim-interval=15m", "--reclaim-approvals=gpupack-system/gpupack-reclaim-approvals",
		"--ledger=gpupack-system/gpupack-reclaim-ledger", "--reclaim-policy=/etc/gpupack/reclaim/reclaim-policy.yaml",
		"--notify-webhook-file=/etc/gpupack/reclaim-webhook/url"} {
		if !slices.Contains(args, want) {
			t.Errorf("serve's args %v lack %s", args, want)
		}
	}
}

// serveArgs are the serve container's arguments among the rendered
// objects.
func serveArgs(t *testing.T, objs map[string]any) []string {
	t.Helper()
	d, ok := objs["Deployment gpupack"].(*appsv1.Deployment)
	if !ok {
		t.Fatal("no serve Deployment rendered")
	}
	return d.Spec.Template.Spec.Containers[0].Args
}
