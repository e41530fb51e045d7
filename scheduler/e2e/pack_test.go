package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/internal/webhook/admission"
	"github.com/gpupack/gpupack/plan"
)

// planRequests is the planner's own workload-requests.yaml, the golden
// output of `gpupack plan` on its example cluster, which its tests
// regenerate with -update: the webhook here serves exactly what the planner
// writes.
const planRequests = "../../internal/cli/plan/testdata/out-workload-requests.yaml.golden"

// TestPackUnchangedManifests is the whole of pack on the real test cluster:
// `gpupack webhook` rewrites unchanged manifests (nvidia.com/gpu: 1) in
// opted-in namespaces per the plan, and gpupack-scheduler places them on
// the MIG slices and the time-sliced GPUs (offered as nvidia.com/gpu.shared)
// that the plan chose, keeping co-located time slices within each GPU's
// VRAM; the same manifests in a namespace that is not opted in are
// untouched and go to the default scheduler.
func TestPackUnchangedManifests(t *testing.T) {
	data, err := os.ReadFile(planRequests)
	if err != nil {
		t.Fatal(err)
	}
	requests, err := plan.ParseWorkloadRequests(data)
	if err != nil {
		t.Fatalf("%s: %v", planRequests, err)
	}
	c := testcluster.Start(t, testcluster.Options{})
	cs := client(t, c)
	ctx := t.Context()

	// The hardware the plan's pools need: H100 MIG slices, H100 time
	// slices (8 replicas, more than VRAM allows for big slices), and whole
	// H100s for the workloads the plan keeps.
	h100 := testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 2}
	mig, shared, whole := h100, h100, h100
	mig.MIG, mig.MIGConfig = map[string]int64{"3g.40gb": 2, "2g.20gb": 4}, "custom"
	shared.Sharing, shared.Replicas, shared.RenameByDefault = testcluster.SharingTimeSlicing, 8, true
	whole.GPUs = 8
	// Labelled as the plan's node-labels.yaml labels its pools' nodes: the
	// webhook selects the config that offers each rewritten resource.
	mig.Labels = map[string]string{"nvidia.com/device-plugin.config": "h100-mig"}
	shared.Labels = map[string]string{"nvidia.com/device-plugin.config": "h100-time-slicing"}
	whole.Labels = map[string]string{"nvidia.com/device-plugin.config": "h100-exclusive"}
	for name, spec := range map[string]testcluster.GPUNode{"h100-mig": mig, "h100-shared": shared, "h100-whole": whole} {
		c.AddGPUNode(name, spec)
	}

	hook := c.StartWebhook(testcluster.Webhook{Binary: testcluster.BuildGpupack(t), Args: []string{"--requests", planRequests},
		Path: admission.Path, NamespaceLabel: wellknown.LabelPack})
	for _, ns := range []string{"shop", "search", "ml", "staging"} {
		c.CreateNamespace(ns)
		if ns != "staging" {
			c.LabelNamespace(ns, wellknown.LabelPack, wellknown.PackEnabled)
		}
	}
	sched := startGpupackScheduler(t, c, "")

	// manifest is what a user writes: one whole GPU, the default scheduler.
	manifest := func(namespace, app string, i int) *corev1.Pod {
		p := gpuPod(namespace, fmt.Sprintf("%s-%d", app, i), map[string]int64{"nvidia.com/gpu": 1})
		p.Spec.SchedulerName = ""
		p.Labels = map[string]string{"app": app}
		return p
	}
	// The apiserver may take a moment to call a new webhook: create probe
	// pods of a workload the plan does not know until one comes back
	// mutated.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := hook.Exited(); err != nil {
			return false, err
		}
		p, err := cs.CoreV1().Pods("ml").Create(ctx, manifest("ml", "probe", int(time.Now().UnixNano())), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return p.Spec.SchedulerName == admission.SchedulerName, nil
	})
	if err != nil {
		t.Fatalf("the webhook never mutated a pod: %v", err)
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods("ml").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: "app=probe"}); err != nil {
		t.Fatalf("delete the probe pods: %v", err)
	}

	workloads := map[string]int{"shop/ranker": 3, "search/embedder": 2, "ml/chat-dev": 9, "ml/eval": 1, "staging/ranker": 1, "staging/chat-dev": 1}
	for key, n := range workloads {
		namespace, app, _ := strings.Cut(key, "/")
		for i := range n {
			if _, err := cs.CoreV1().Pods(namespace).Create(ctx, manifest(namespace, app, i), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s-%d: %v", key, i, err)
			}
		}
	}

	// Wait until every pod is bound or Pending with gpupack's reason (the
	// default scheduler's pods are all bound: the whole node has room).
	var pods []corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := sched.Exited(); err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, ns := range []string{"shop", "search", "ml", "staging"} {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			pods = append(pods, list.Items...)
		}
		for i := range pods {
			if p := &pods[i]; p.Spec.NodeName == "" && !explained(p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods not all bound or explained: %v", err)
	}

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var packed []corev1.Pod
	boundOn := map[string]map[string]int{} // workload -> node -> pods
	pending := map[string][]string{}       // workload -> gpupack's reasons
	for i := range pods {
		p := &pods[i]
		app := p.Labels["app"]
		if app == "probe" || p.DeletionTimestamp != nil {
			continue
		}
		key := p.Namespace + "/" + app
		limits := p.Spec.Containers[0].Resources.Limits
		if p.Namespace == "staging" {
			if p.Spec.SchedulerName != corev1.DefaultSchedulerName || len(p.Annotations) > 0 || limits.Name(kube.ResourceGPU, "").Value() != 1 || p.Spec.NodeName != "h100-whole" {
				t.Errorf("pod %s/%s of a namespace not opted in: scheduler %q, annotations %v, limits %v, node %q; want it untouched and bound by the default scheduler to h100-whole",
					p.Namespace, p.Name, p.Spec.SchedulerName, p.Annotations, limits, p.Spec.NodeName)
			}
			continue
		}
		packed = append(packed, *p)
		want := requests[key].After
		if q := limits[corev1.ResourceName(want.Resource)]; p.Spec.SchedulerName != admission.SchedulerName || q.Value() != int64(want.Count) {
			t.Errorf("pod %s/%s: scheduler %q, limits %v; the plan says %s: %d, scheduler %s", p.Namespace, p.Name, p.Spec.SchedulerName, limits, want.Resource, want.Count, admission.SchedulerName)
		}
		if want.Resource == string(kube.ResourceGPUShared) {
			if got, wantVRAM := p.Annotations[wellknown.AnnotationGPUMemory], cluster.FormatMemory(want.VRAMLimit); got != wantVRAM {
				t.Errorf("pod %s/%s: %s = %q, want the plan's %q", p.Namespace, p.Name, wellknown.AnnotationGPUMemory, got, wantVRAM)
			}
		}
		if p.Spec.NodeName == "" {
			pending[key] = append(pending[key], scheduledMessage(p))
			continue
		}
		if boundOn[key] == nil {
			boundOn[key] = map[string]int{}
		}
		boundOn[key][p.Spec.NodeName]++
	}
	checkNoOverAllocation(t, nodes.Items, packed)

	// MIG slices for the MIG workloads, time slices for the shared ones (as
	// many as VRAM allows: four 19661 MiB slices on an 81559 MiB GPU, though
	// it has eight replicas), whole GPUs for the one the plan keeps.
	wantBound := map[string]map[string]int{
		"shop/ranker":     {"h100-mig": 3},
		"search/embedder": {"h100-mig": 2},
		"ml/chat-dev":     {"h100-shared": 8},
		"ml/eval":         {"h100-whole": 1},
	}
	for key, want := range wantBound {
		if fmt.Sprint(boundOn[key]) != fmt.Sprint(want) {
			t.Errorf("%s bound on %v, want %v", key, boundOn[key], want)
		}
	}
	if reasons := pending["ml/chat-dev"]; len(reasons) != 1 || !strings.Contains(reasons[0], "Insufficient GPU memory") {
		t.Errorf("ml/chat-dev pending with %q, want one pod held back for GPU memory", reasons)
	}
	t.Logf("bound per workload and node: %v; pending: %v", boundOn, pending)
}
