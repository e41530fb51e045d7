package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/charts"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// chartServeRoles creates the roles that the chart ships for serve.auth:
// kubernetes in namespace ns (the viewer's Role, the metrics reader's
// ClusterRole), for a serve whose Service is ns/gpupack.
func chartServeRoles(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	docs, err := charts.Render(charts.Options{Namespace: ns, Values: map[string]any{"serve": map[string]any{"auth": "kubernetes"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, d := range docs {
		var err error
		switch {
		case d.Kind == "Role" && d.Name == "gpupack-viewer":
			var role rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(d.YAML), &role); err != nil {
				t.Fatal(err)
			}
			_, err = c.Client().RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{})
		case d.Kind == "ClusterRole" && d.Name == "gpupack-metrics":
			var role rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(d.YAML), &role); err != nil {
				t.Fatal(err)
			}
			_, err = c.Client().RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// serviceAccountToken creates the ServiceAccount ns/name, binds it to the
// role given ("Role NAME" in ns or "ClusterRole NAME"; none when ""), and
// returns a token for it.
func serviceAccountToken(t *testing.T, c *testcluster.Cluster, ns, name, role string) string {
	t.Helper()
	ctx := t.Context()
	cs := c.Client()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if kind, roleName, ok := strings.Cut(role, " "); ok {
		meta := metav1.ObjectMeta{Name: name}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}
		subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
		var err error
		if kind == "Role" {
			_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
		} else {
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestServeAuthenticated runs `gpupack serve --auth kubernetes` against the
// real apiserver with the chart's roles: without a token, or with one the
// apiserver does not know, every data route is 401; a ServiceAccount token
// without a role is 403 everywhere, the API under /api/v1/ included
// (which default RBAC's system:discovery opens to every token as a
// nonResourceURL); with the viewer Role the page and the API are 200 and
// /metrics 403, with the metrics ClusterRole the reverse; the probes'
// /healthz and /readyz ask for nothing.
func TestServeAuthenticated(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	const ns = "gpupack-system"
	c.CreateNamespace(ns)
	chartServeRoles(t, c, ns)
	viewer := serviceAccountToken(t, c, ns, "viewer", "Role gpupack-viewer")
	scraper := serviceAccountToken(t, c, ns, "scraper", "ClusterRole gpupack-metrics")
	stranger := serviceAccountToken(t, c, ns, "stranger", "")

	// The demo, so that no Prometheus is needed: the guard is the same.
	serve := c.Run("gpupack-serve", testcluster.BuildGpupack(t), "serve", "--demo", "--auth", "kubernetes", "--auth-service", ns+"/gpupack",
		"--kubeconfig", c.Kubeconfig(), "--listen", "127.0.0.1:0")
	base := "http://" + serve.LogAddress(regexp.MustCompile(`serving gpupack on http://(\S+?)/`))

	client := &http.Client{Timeout: 30 * time.Second}
	status := func(path, token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The demo builds its view while it serves: wait until it is ready,
	// which /readyz says without a token.
	poll(t, "serve's demo view", func(context.Context) (bool, string, error) {
		got := status("/readyz", "")
		return got == http.StatusOK, fmt.Sprintf("/readyz %d", got), nil
	})
	cases := []struct {
		who, token string
		path       string
		want       int
	}{
		{"no token", "", "/", http.StatusUnauthorized},
		{"no token", "", "/api/v1/report", http.StatusUnauthorized},
		{"no token", "", "/metrics", http.StatusUnauthorized},
		{"an unknown token", "not-a-token", "/api/v1/pending", http.StatusUnauthorized},
		{"a ServiceAccount without the role", stranger, "/", http.StatusForbidden},
		{"a ServiceAccount without the role", stranger, "/api/v1/report", http.StatusForbidden},
		{"the viewer", viewer, "/", http.StatusOK},
		{"the viewer", viewer, "/api/v1/report", http.StatusOK},
		{"the viewer", viewer, "/static/app.js", http.StatusOK},
		{"the viewer", viewer, "/metrics", http.StatusForbidden},
		{"the metrics reader", scraper, "/api/v1/pending", http.StatusForbidden},
		{"the metrics reader", scraper, "/metrics", http.StatusOK},
		{"no token", "", "/healthz", http.StatusOK},
		{"no token", "", "/readyz", http.StatusOK},
	}
	for _, tc := range cases {
		if got := status(tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s as %s: %d, want %d", tc.path, tc.who, got, tc.want)
		}
	}
}
