package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// The served workload of the KEDA test: a vLLM Deployment of two replicas.
const (
	kedaNS       = "serve"
	kedaWorkload = "chat-server"
	// kedaTarget is the queue depth one replica should carry (AverageValue).
	kedaTarget = 8
)

var scaledObjectResource = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// TestKEDAScalesPlannedDeployment: `gpupack plan` writes the ScaledObject
// of a served Deployment whose busy replicas measured per hour run from 0
// (the night) to 2, scaled on vLLM's queue depth, and the real KEDA
// (operator and metrics API server, through the apiserver's aggregation
// layer to the real HPA controller) scales the Deployment on a real
// Prometheus scraping a vLLM-format target: while the replica loads its
// model and serves no metrics, KEDA leaves it running; when 30 requests
// wait, the HPA controller scales it to the plan's 3; when the queue
// drains, back down to 1. A watch of the Deployment sees every replica
// count it is given, and none is 0.
func TestKEDAScalesPlannedDeployment(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.StartKEDA()
	c.AddGPUNode("gpu-a", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 8})
	c.CreateNamespace(kedaNS)
	client := c.Client()
	createServingDeployment(t, client, 2)
	c.WaitDeploymentAvailable(kedaNS, kedaWorkload)
	pods := deploymentPods(t, client)
	replicas := watchReplicas(t, client)

	vllm := newVLLMTarget(t)
	config := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n"+
		"  - {job_name: vllm, static_configs: [{targets: [%q], labels: {namespace: %s, pod: %s}}]}\n",
		vllm.addr(), kedaNS, pods[0])
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Config: config})

	so := plannedScaledObject(t, c.Kubeconfig(), prom.URL, pods)
	if got := scaledObjectRange(t, so); got != "1..3" {
		t.Errorf("the plan's ScaledObject scales %s replicas, want 1..3 (busy replicas per hour 0 to 2, never fewer than 1):\n%s", got, so)
	}
	dyn := c.Dynamic()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(so, &obj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(scaledObjectResource).Namespace(kedaNS).Create(t.Context(), &obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the plan's ScaledObject: %v", err)
	}

	// The model loads: the replicas serve no metrics, so the queue reads
	// nothing and KEDA's trigger is inactive. KEDA has decided once it
	// says so; the HPA controller takes the two replicas to the minimum.
	waitScaledObjectInactive(t, c)
	waitReplicas(t, client, 1, "the HPA controller to scale to minReplicaCount while the queue reads nothing")

	// The model is loaded and 30 requests wait: ceil(30 / 8) = 4 replicas,
	// capped at maxReplicaCount.
	vllm.serve(30)
	waitReplicas(t, client, 3, "the HPA controller to scale up on KEDA's external metric of 30 waiting requests")

	// The queue drains: back down to the minimum.
	vllm.serve(0)
	waitReplicas(t, client, 1, "the HPA controller to scale down once the queue drained")
	waitScaledObjectInactive(t, c)

	if seen := replicas.seen(); strings.Contains(" "+seen+" ", " 0 ") {
		t.Errorf("the Deployment was scaled to 0 replicas; replica counts seen, in order: %s", seen)
	} else {
		t.Logf("replica counts seen, in order: %s", seen)
	}
}

// createServingDeployment creates the vLLM Deployment: replicas pods of one
// H100, named by their component as a server.
func createServingDeployment(t *testing.T, client kubernetes.Interface, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": kedaWorkload, "app.kubernetes.io/component": "inference"}
	tmpl := makePod(kedaNS, "").gpus(testcluster.ResourceGPU, 1).obj()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kedaNS, Name: kedaWorkload}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": kedaWorkload}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}}}
	if _, err := client.AppsV1().Deployments(kedaNS).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deploymentPods names the Deployment's pods.
func deploymentPods(t *testing.T, client kubernetes.Interface) []string {
	t.Helper()
	list, err := client.CoreV1().Pods(kedaNS).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + kedaWorkload})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// plannedScaledObject runs `gpupack plan` on the live cluster with a usage
// file (both replicas busy for two hours, idle for two: the night) and an
// autoscaling file that scales the Deployment on vLLM's queue depth read
// from promURL, and returns the ScaledObject it writes.
func plannedScaledObject(t *testing.T, kubeconfig, promURL string, pods []string) []byte {
	t.Helper()
	dir := t.TempDir()
	var usage strings.Builder
	usage.WriteString("apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\nwindow: 4h\npods:\n")
	for _, p := range pods {
		fmt.Fprintf(&usage, "- {pod: %s/%s, activity: 0.4, pattern: bursty, vramUsedP95: 70Gi, idleHeldRatio: 0.5, hourlyActivity: [0.8, 0.8, 0, 0]}\n", kedaNS, p)
	}
	autoscaling := fmt.Sprintf(`apiVersion: gpupack.io/v1alpha1
kind: Autoscaling
prometheus: %s
workloads:
- workload: %s/%s
  kind: Deployment
  metric: queue_depth
  query: sum(vllm:num_requests_waiting{namespace="%s", pod=~"%s-.*"})
  target: %d
`, promURL, kedaNS, kedaWorkload, kedaNS, kedaWorkload, kedaTarget)
	for name, content := range map[string]string{"usage.yaml": usage.String(), "autoscaling.yaml": autoscaling} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	var stdout bytes.Buffer
	if err := newRoot(t, &stdout, "plan", "--kubeconfig", kubeconfig, "--usage", filepath.Join(dir, "usage.yaml"),
		"--autoscaling", filepath.Join(dir, "autoscaling.yaml"), "--out", out).Execute(); err != nil {
		t.Fatalf("plan: %v\n%s", err, stdout.String())
	}
	so, err := os.ReadFile(filepath.Join(out, planout.FileKEDA))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(so, []byte("kind: ScaledObject")) != 1 {
		t.Fatalf("%s: want one ScaledObject, for %s/%s:\n%s\nplan:\n%s", planout.FileKEDA, kedaNS, kedaWorkload, so, stdout.String())
	}
	return so
}

// scaledObjectRange is "min..max" of a ScaledObject's replica counts.
func scaledObjectRange(t *testing.T, so []byte) string {
	t.Helper()
	var obj struct {
		Spec struct {
			Min *int `json:"minReplicaCount"`
			Max *int `json:"maxReplicaCount"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(so, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Spec.Min == nil || obj.Spec.Max == nil {
		return fmt.Sprintf("unset (minReplicaCount %v, maxReplicaCount %v)", obj.Spec.Min, obj.Spec.Max)
	}
	return fmt.Sprintf("%d..%d", *obj.Spec.Min, *obj.Spec.Max)
}

// waitScaledObjectInactive waits until KEDA's operator has evaluated the
// ScaledObject's trigger and found it inactive (condition Active False,
// ScalerNotActive), which it writes after the scaling that decision
// implies, and until KEDA's HPA exists.
func waitScaledObjectInactive(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	dyn, client := c.Dynamic(), c.Client()
	poll(t, "KEDA to find the queue trigger inactive", func(ctx context.Context) (bool, string, error) {
		so, err := dyn.Resource(scaledObjectResource).Namespace(kedaNS).Get(ctx, kedaWorkload, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		conds, _, _ := unstructured.NestedSlice(so.Object, "status", "conditions")
		state := fmt.Sprint(conds)
		inactive := false
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			inactive = inactive || (m["type"] == "Active" && m["status"] == "False" && m["reason"] == "ScalerNotActive")
		}
		if !inactive {
			return false, state, nil
		}
		_, err = client.AutoscalingV2().HorizontalPodAutoscalers(kedaNS).Get(ctx, "keda-hpa-"+kedaWorkload, metav1.GetOptions{})
		return err == nil, state + fmt.Sprintf("; KEDA's HPA: %v", err), nil
	})
}

// waitReplicas waits until the Deployment is scaled to n replicas.
func waitReplicas(t *testing.T, client kubernetes.Interface, n int32, what string) {
	t.Helper()
	poll(t, what, func(ctx context.Context) (bool, string, error) {
		d, err := client.AppsV1().Deployments(kedaNS).Get(ctx, kedaWorkload, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		hpa, herr := client.AutoscalingV2().HorizontalPodAutoscalers(kedaNS).Get(ctx, "keda-hpa-"+kedaWorkload, metav1.GetOptions{})
		state := fmt.Sprintf("replicas %d; KEDA's HPA: %v", ptr.Deref(d.Spec.Replicas, 1), herr)
		if herr == nil {
			state = fmt.Sprintf("replicas %d; KEDA's HPA: metrics %+v, conditions %+v", ptr.Deref(d.Spec.Replicas, 1), hpa.Status.CurrentMetrics, hpa.Status.Conditions)
		}
		return ptr.Deref(d.Spec.Replicas, 1) == n, state, nil
	})
}

// replicaWatch records every replica count the Deployment is given.
type replicaWatch struct {
	mu     sync.Mutex
	counts []int32
}

// watchReplicas watches the Deployment until the test ends.
func watchReplicas(t *testing.T, client kubernetes.Interface) *replicaWatch {
	t.Helper()
	d, err := client.AppsV1().Deployments(kedaNS).Get(t.Context(), kedaWorkload, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", kedaWorkload).String()
		return client.AppsV1().Deployments(kedaNS).Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(t.Context(), d.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	r := &replicaWatch{counts: []int32{ptr.Deref(d.Spec.Replicas, 1)}}
	go func() {
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				r.add(ptr.Deref(d.Spec.Replicas, 1))
			}
		}
	}()
	return r
}

func (r *replicaWatch) add(n int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts[len(r.counts)-1] != n {
		r.counts = append(r.counts, n)
	}
}

// seen is the replica counts in order, each change once: "2 1 3 1".
func (r *replicaWatch) seen() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Trim(fmt.Sprint(r.counts), "[]")
}

// vllmTarget serves vLLM's queue depth gauge as a vLLM server's /metrics
// does, once its model is loaded; before, it answers 503, as a server
// still loading its model serves no metrics.
type vllmTarget struct {
	srv     *httptest.Server
	mu      sync.Mutex
	waiting *int
}

func newVLLMTarget(t *testing.T) *vllmTarget {
	v := &vllmTarget{}
	v.srv = httptest.NewServer(http.HandlerFunc(v.metrics))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *vllmTarget) addr() string { return strings.TrimPrefix(v.srv.URL, "http://") }

// serve says the model is loaded and n requests wait.
func (v *vllmTarget) serve(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.waiting = &n
}

func (v *vllmTarget) metrics(w http.ResponseWriter, _ *http.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.waiting == nil {
		http.Error(w, "loading model", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"+
		"# TYPE vllm:num_requests_waiting gauge\n"+
		"vllm:num_requests_waiting{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} %d.0\n", *v.waiting)
}
