package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// The steps of the DRA packing runs, which put one sequence of claim pods
// to the stock scheduler and to gpupack-scheduler in turn on shared nodes.

// startDRARuns starts a control plane (skipped with -short) with NVIDIA's
// DeviceClasses, for the runs' nodes and gpupack-scheduler, and returns it
// with its client.
func startDRARuns(t *testing.T) (*testcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane and gpupack-scheduler")
	}
	c := testcluster.Start(t, testcluster.Options{})
	c.CreateDeviceClasses(testcluster.NVIDIADeviceClasses()...)
	return c, client(t, c)
}

// bindInTurn creates the pods one at a time, each bound before the next,
// so that both schedulers see the same sequence.
func bindInTurn(t *testing.T, cs kubernetes.Interface, sched *testcluster.Process, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := sched.Exited(); err != nil {
				return false, err
			}
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && got.Spec.NodeName != "", err
		})
		if err != nil {
			t.Fatalf("%s: %s not bound: %v", p.Spec.SchedulerName, p.Name, err)
		}
	}
}

// settle waits until every pod of the namespace is bound or said
// unschedulable, and returns them.
func settle(t *testing.T, cs kubernetes.Interface, ns string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = list.Items
		for i := range pods {
			if p := &pods[i]; p.Spec.NodeName == "" && !unschedulable(p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: pods neither bound nor unschedulable: %v", ns, err)
	}
	return pods
}

// endRun deletes the namespace's pods and waits until their claims are
// gone, so that the next run starts on empty devices.
func endRun(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		claims, err := cs.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("%s: the run's claims were not deleted with its pods: %v", ns, err)
	}
}
