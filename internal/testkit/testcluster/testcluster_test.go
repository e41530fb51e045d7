package testcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// podTimeout bounds each wait for the scheduler and kwok; it is a guard
// against a hang, not an expectation of speed.
const podTimeout = 2 * time.Minute

// TestSmoke checks that the real kube-scheduler places GPU pods on kwok's
// fake GPU nodes, that kwok completes a pod annotated
// AnnotationCompletesAfter and no other, and that the scheduler reports an
// unschedulable pod as the field sees it.
func TestSmoke(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("h100-0", testcluster.GPUNode{
		Product:   "NVIDIA-H100-80GB-HBM3",
		MemoryMiB: 81559,
		GPUs:      8,
	})
	l4 := c.AddGPUNode("l4-0", testcluster.GPUNode{
		Product:   "NVIDIA-L4-SHARED",
		MemoryMiB: 23034,
		GPUs:      1,
		Sharing:   testcluster.SharingTimeSlicing,
		Replicas:  4,
	})
	if got, want := l4.Status.Allocatable[testcluster.ResourceGPU], resource.MustParse("4"); got.Cmp(want) != 0 {
		t.Fatalf("l4-0 allocatable %s = %s, want %s (1 GPU x 4 time-slicing replicas)", testcluster.ResourceGPU, got.String(), want.String())
	}
	const ns = "smoke"
	c.CreateNamespace(ns)
	pods := c.Client().CoreV1().Pods(ns)

	if _, err := pods.Create(t.Context(), gpuPod("one-gpu", 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod one-gpu: %v", err)
	}
	running := waitForPod(t, c, ns, "one-gpu", func(pod *corev1.Pod) bool {
		return pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning
	})
	if node := running.Spec.NodeName; node != "h100-0" && node != "l4-0" {
		t.Errorf("pod one-gpu bound to %q, want h100-0 or l4-0", node)
	}

	// A pod annotated to complete after a second runs, then succeeds; the
	// pod without the annotation runs on.
	completes := gpuPod("completes", 1)
	completes.Annotations = map[string]string{testcluster.AnnotationCompletesAfter: "1s"}
	if _, err := pods.Create(t.Context(), completes, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod completes: %v", err)
	}
	waitForPod(t, c, ns, "completes", func(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodSucceeded })
	if pod := waitForPod(t, c, ns, "one-gpu", func(*corev1.Pod) bool { return true }); pod.Status.Phase != corev1.PodRunning {
		t.Errorf("pod one-gpu, without %s, is %s after the annotated pod completed; want it Running", testcluster.AnnotationCompletesAfter, pod.Status.Phase)
	}

	if _, err := pods.Create(t.Context(), gpuPod("nine-gpus", 9), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod nine-gpus: %v", err)
	}
	pending := waitForPod(t, c, ns, "nine-gpus", func(pod *corev1.Pod) bool {
		cond := podScheduledCondition(pod)
		return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
	})
	const wantMessage = "Insufficient nvidia.com/gpu"
	if msg := podScheduledCondition(pending).Message; !strings.Contains(msg, wantMessage) {
		t.Errorf("pod nine-gpus unschedulable with message %q, want one with %q", msg, wantMessage)
	}
	if pending.Spec.NodeName != "" {
		t.Errorf("pod nine-gpus bound to %q, want unbound", pending.Spec.NodeName)
	}
}

// gpuPod returns a pod that requests gpus whole nvidia.com/gpu.
func gpuPod(name string, gpus int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "cuda",
				Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{testcluster.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)},
				},
			}},
		},
	}
}

// waitForPod polls the pod until done says so, and returns it.
func waitForPod(t *testing.T, c *testcluster.Cluster, ns, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, podTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = c.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return done(pod), nil
	})
	if err != nil {
		if pod == nil {
			t.Fatalf("pod %s/%s: %v", ns, name, err)
		}
		t.Fatalf("pod %s/%s: %v; last seen: node %q, phase %q, conditions %+v", ns, name, err, pod.Spec.NodeName, pod.Status.Phase, pod.Status.Conditions)
	}
	return pod
}

// podScheduledCondition returns the pod's PodScheduled condition, or nil.
func podScheduledCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
