package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestRBACSufficesAndFaultsAreClear applies deploy/rbac.yaml, reads the
// cluster once and through the Watcher with its ServiceAccount's token, and
// checks the errors for a ServiceAccount without the role, a bad token and
// an apiserver that is not there.
func TestRBACSufficesAndFaultsAreClear(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("h100-0", testcluster.GPUNode{Product: h100Product, MemoryMiB: 81559, GPUs: 8})
	applyRBAC(t, c.Client())
	const ns = "ml"
	c.CreateNamespace(ns)
	if _, err := c.Client().CoreV1().Pods(ns).Create(t.Context(), makePod(ns, "too-big").gpus(testcluster.ResourceGPU, 9).obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	admin, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	reader := c.ClientAs("gpupack-system", "gpupack")

	t.Run("the ClusterRole suffices for Load", func(t *testing.T) {
		poll(t, "the scheduler's verdict on too-big", func(ctx context.Context) (bool, string, error) {
			st, err := kube.Load(ctx, reader, gpu.Default())
			if err != nil {
				return false, "", err
			}
			f, ok := st.SchedulingFailures[ns+"/too-big"]
			return ok && len(st.Snapshot.Nodes) == 1 && st.Snapshot.GPUCount() == 8, fmt.Sprintf("%d nodes, failure %q", len(st.Snapshot.Nodes), f.Message), nil
		})
		// The reader may list Leases, and the apiserver takes Load's
		// selector on them: the running scheduler is known.
		st, err := kube.Load(t.Context(), reader, gpu.Default())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range st.Warnings {
			if strings.Contains(w, "cannot list leases") {
				t.Errorf("Load warned: %s", w)
			}
		}
		if !slices.Contains(st.Snapshot.Schedulers, "default-scheduler") {
			t.Errorf("schedulers seen running = %q, want default-scheduler among them", st.Snapshot.Schedulers)
		}
	})

	t.Run("the ClusterRole suffices for LoadStartup", func(t *testing.T) {
		// Pulled events and PersistentVolumeClaims are optional to
		// LoadStartup: without them it warns rather than fails.
		if _, warnings, err := kube.LoadStartup(t.Context(), reader); err != nil || len(warnings) > 0 {
			t.Errorf("LoadStartup: error %v, warnings %q; want neither", err, warnings)
		}
	})

	t.Run("the ClusterRole suffices for the Watcher", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := kube.NewWatcher(reader, gpu.Default())
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		c.AddGPUNode("l4-0", testcluster.GPUNode{Product: l4Product, MemoryMiB: 23034, GPUs: 1, Sharing: testcluster.SharingTimeSlicing, Replicas: 4})
		if _, err := c.Client().CoreV1().Pods(ns).Create(t.Context(), makePod(ns, "bound").gpus(testcluster.ResourceGPU, 1).node("l4-0").obj(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the Watcher to see the new node and pod", func(context.Context) (bool, string, error) {
			st, err := w.State()
			if err != nil {
				return false, "", err
			}
			nodes := []string{}
			for _, n := range st.Snapshot.Nodes {
				nodes = append(nodes, fmt.Sprintf("%s:%d GPUs", n.Name, len(n.GPUs)))
			}
			_, bound := st.Snapshot.Node("l4-0")
			pods := map[string]string{}
			for _, p := range st.Snapshot.Pods {
				pods[p.Key()] = p.NodeName
			}
			return bound && pods[ns+"/bound"] == "l4-0" && st.Snapshot.GPUCount() == 9, fmt.Sprintf("nodes %v, pods %v", nodes, pods), nil
		})
		// The role lets it watch the kubelet's Pulled events, the claims
		// and the quotas, so serve lacks nothing.
		if st, err := w.State(); err != nil {
			t.Errorf("Watcher.State: %v", err)
		} else if slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "cannot list") }) {
			t.Errorf("Watcher.State warns %q; want no list refused", st.Warnings)
		}
		// ... and, as Load, it tells which schedulers run (from the stock
		// scheduler's FailedScheduling event about too-big), so serve can
		// call a pod no-scheduler.
		poll(t, "the Watcher to see default-scheduler running", func(context.Context) (bool, string, error) {
			st, err := w.State()
			if err != nil {
				return false, "", err
			}
			return slices.Contains(st.Snapshot.Schedulers, "default-scheduler"), fmt.Sprintf("schedulers %q", st.Snapshot.Schedulers), nil
		})
		if startups, warnings, err := w.Startup(); err != nil || len(warnings) > 0 || len(startups) == 0 {
			t.Errorf("Watcher.Startup: %d start-ups, error %v, warnings %q; want the bound pod's, and neither", len(startups), err, warnings)
		}
	})

	t.Run("a ServiceAccount without the role is told what to grant", func(t *testing.T) {
		nobody := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: ns}}
		if _, err := c.Client().CoreV1().ServiceAccounts(ns).Create(t.Context(), nobody, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		client := c.ClientAs(ns, "nobody")
		_, err := kube.Load(t.Context(), client, gpu.Default())
		for _, want := range []string{`verb "list" on resource "nodes"`, `verb "list" on resource "pods"`, `verb "list" on resource "events"`, "deploy/rbac.yaml"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load error = %v, want one containing %q", err, want)
			}
		}
		err = kube.NewWatcher(client, gpu.Default()).Start(t.Context())
		if err == nil || !strings.Contains(err.Error(), `verb "list" on resource "nodes"`) {
			t.Errorf("Watcher.Start error = %v, want one naming the verb list on nodes", err)
		}
	})

	t.Run("a bad token is rejected clearly", func(t *testing.T) {
		_, err := kube.Load(t.Context(), clientWithToken(t, admin, "not-a-valid-token"), gpu.Default())
		if err == nil || !strings.Contains(err.Error(), "rejected gpupack's credentials (401 Unauthorized)") {
			t.Errorf("Load error = %v, want one saying the credentials were rejected", err)
		}
	})

	t.Run("an unreachable apiserver is named", func(t *testing.T) {
		gone := rest.CopyConfig(admin)
		gone.Host = "https://127.0.0.1:1"
		_, err := kube.Load(t.Context(), kubernetes.NewForConfigOrDie(gone), gpu.Default())
		if err == nil || !strings.Contains(err.Error(), "cannot reach the apiserver at https://127.0.0.1:1") {
			t.Errorf("Load error = %v, want one saying the apiserver cannot be reached", err)
		}
	})

	t.Run("gpupack snapshot writes a file that reads back", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "cluster.yaml")
		var stderr bytes.Buffer
		root := newRoot(t, &stderr, "snapshot", "--kubeconfig", c.Kubeconfig(), "-o", out)
		if err := root.Execute(); err != nil {
			t.Fatalf("gpupack snapshot: %v\n%s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "wrote "+out+": 2 nodes, 9 GPUs") {
			t.Errorf("gpupack snapshot said %q", stderr.String())
		}
		root = newRoot(t, &stderr, "diagnose", "--snapshot", out)
		if err := root.Execute(); err != nil {
			t.Fatalf("gpupack diagnose --snapshot on the written file: %v\n%s", err, stderr.String())
		}
	})
}

// applyRBAC creates the objects of deploy/rbac.yaml.
func applyRBAC(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("deploy/rbac.yaml document %d: %v", i, err)
		}
		var obj any
		var create func() error
		switch meta.Kind {
		case "Namespace":
			o := &corev1.Namespace{}
			obj, create = o, func() error {
				_, err := client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "ServiceAccount":
			o := &corev1.ServiceAccount{}
			obj, create = o, func() error {
				_, err := client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "ClusterRole":
			o := &rbacv1.ClusterRole{}
			obj, create = o, func() error {
				_, err := client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "ClusterRoleBinding":
			o := &rbacv1.ClusterRoleBinding{}
			obj, create = o, func() error {
				_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		default:
			t.Fatalf("deploy/rbac.yaml document %d: unexpected kind %q", i, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("deploy/rbac.yaml document %d (%s): %v", i, meta.Kind, err)
		}
		if err := create(); err != nil {
			t.Fatalf("apply deploy/rbac.yaml document %d (%s): %v", i, meta.Kind, err)
		}
	}
}

// clientWithToken is a client for the admin's cluster with another bearer token.
func clientWithToken(t *testing.T, admin *rest.Config, token string) kubernetes.Interface {
	t.Helper()
	config := rest.AnonymousClientConfig(admin)
	config.BearerToken = token
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
