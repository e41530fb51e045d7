package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// holdFinalizer keeps an evicted pod Terminating, and so its GPU taken,
// until the test removes it: the replacement stays Pending for as long as
// the test needs, instead of as long as kwok takes to delete a pod.
const holdFinalizer = "gpupack.io/test-hold"

// testEvictionOneAtATime drains a Deployment of two GPU pods under a
// PodDisruptionBudget of maxUnavailable 1 through the Eviction API, as
// `gpupack apply` drains a node: the first eviction is allowed, the second
// is refused with 429 while the first pod's replacement is not Ready, and
// allowed once it is.
func testEvictionOneAtATime(t *testing.T, c *testcluster.Cluster, ns string) {
	const node, name = "h100-pair", "drained"
	c.AddGPUNode(node, testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 2})
	d := deployment(name, 2)
	d.Spec.Template.Finalizers = []string{holdFinalizer}
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	one := resource.MustParse("1")
	d.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{testcluster.ResourceGPU: one},
		Limits:   corev1.ResourceList{testcluster.ResourceGPU: one},
	}
	if _, err := c.Client().AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitDeploymentAvailable(ns, name)
	createPDB(t, c, ns, name, func(spec *policyv1.PodDisruptionBudgetSpec) { spec.MaxUnavailable = new(intstr.FromInt32(1)) })
	waitBudget(t, c, ns, name, 2, 1)

	pods := runningPods(t, c, ns, name)
	if len(pods) != 2 {
		t.Fatalf("Deployment %s runs %d pods, want 2", name, len(pods))
	}
	first, second := pods[0], pods[1]
	if err := evict(t, c, first); err != nil {
		t.Fatalf("evicting %s, the first of two under maxUnavailable 1: %v", first.Name, err)
	}
	wantRefused(t, evict(t, c, second), second.Name+", right after the first eviction")

	// The replacement cannot be scheduled while the evicted pod holds its
	// GPU; the controller then counts one healthy pod of the two.
	poll(t, "the replacement of "+first.Name+" to wait for a GPU", func(ctx context.Context) (bool, string, error) {
		var states []string
		for _, p := range listPods(t, c, ns, name) {
			if p.Name == first.Name || p.Name == second.Name {
				continue
			}
			states = append(states, fmt.Sprintf("%s: node %q, phase %s, conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions))
			if p.Spec.NodeName == "" && unschedulable(p) {
				return true, "", nil
			}
		}
		return false, strings.Join(states, "; "), nil
	})
	waitBudget(t, c, ns, name, 1, 0)
	wantRefused(t, evict(t, c, second), second.Name+", while the replacement is Pending")

	release(t, c, first)
	waitBudget(t, c, ns, name, 2, 1)
	if err := evict(t, c, second); err != nil {
		t.Fatalf("evicting %s once the replacement is Ready: %v", second.Name, err)
	}
	release(t, c, second)
}

// testEvictionMinAvailableAll checks that a PodDisruptionBudget asking for
// every pod refuses each eviction.
func testEvictionMinAvailableAll(t *testing.T, c *testcluster.Cluster, ns string) {
	const name = "guarded"
	if _, err := c.Client().AppsV1().Deployments(ns).Create(t.Context(), deployment(name, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitDeploymentAvailable(ns, name)
	createPDB(t, c, ns, name, func(spec *policyv1.PodDisruptionBudgetSpec) { spec.MinAvailable = new(intstr.FromString("100%")) })
	waitBudget(t, c, ns, name, 2, 0)
	pods := runningPods(t, c, ns, name)
	if len(pods) != 2 {
		t.Fatalf("Deployment %s runs %d pods, want 2", name, len(pods))
	}
	for _, p := range pods {
		wantRefused(t, evict(t, c, p), p.Name+" under minAvailable 100%")
	}
	for _, p := range listPods(t, c, ns, name) {
		if p.DeletionTimestamp != nil {
			t.Errorf("pod %s is being deleted although every eviction was refused", p.Name)
		}
	}
}

// createPDB creates the PodDisruptionBudget name over the pods labelled
// app=name, with set filling in its budget.
func createPDB(t *testing.T, c *testcluster.Cluster, ns, name string, set func(*policyv1.PodDisruptionBudgetSpec)) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
	set(&pdb.Spec)
	if _, err := c.Client().PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBudget waits until the disruption controller has observed the
// budget's latest spec and counts healthy pods of which allowed may be
// disrupted.
func waitBudget(t *testing.T, c *testcluster.Cluster, ns, name string, healthy, allowed int32) {
	t.Helper()
	poll(t, fmt.Sprintf("PodDisruptionBudget %s to count %d healthy pods, %d disruptions allowed", name, healthy, allowed), func(ctx context.Context) (bool, string, error) {
		pdb, err := c.Client().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := pdb.Status
		done := st.ObservedGeneration >= pdb.Generation && st.CurrentHealthy == healthy && st.DisruptionsAllowed == allowed
		return done, fmt.Sprintf("generation %d observed %d, healthy %d of %d expected (desired %d), disruptions allowed %d, disrupted %v",
			pdb.Generation, st.ObservedGeneration, st.CurrentHealthy, st.ExpectedPods, st.DesiredHealthy, st.DisruptionsAllowed, st.DisruptedPods), nil
	})
}

// evict asks the Eviction API (policy/v1) to evict pod.
func evict(t *testing.T, c *testcluster.Cluster, pod corev1.Pod) error {
	t.Helper()
	return c.Client().PolicyV1().Evictions(pod.Namespace).Evict(t.Context(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
	})
}

// wantRefused fails t unless err is the Eviction API's refusal by a
// disruption budget that the controller has observed: 429 TooManyRequests
// with a DisruptionBudget cause, not "still being processed".
func wantRefused(t *testing.T, err error, what string) {
	t.Helper()
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s: error %v, want 429 TooManyRequests", what, err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("evicting %s: %v carries no details", what, err)
	}
	causes := status.Status().Details.Causes
	i := slices.IndexFunc(causes, func(c metav1.StatusCause) bool { return c.Type == policyv1.DisruptionBudgetCause })
	if i < 0 || strings.Contains(causes[i].Message, "still being processed") {
		t.Fatalf("evicting %s: causes %+v, want a DisruptionBudget cause from an observed budget", what, causes)
	}
}

// listPods lists the pods labelled app=name.
func listPods(t *testing.T, c *testcluster.Cluster, ns, name string) []corev1.Pod {
	t.Helper()
	list, err := c.Client().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: labels.Set{"app": name}.String()})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// runningPods lists the Running pods labelled app=name that are not being
// deleted, by name.
func runningPods(t *testing.T, c *testcluster.Cluster, ns, name string) []corev1.Pod {
	t.Helper()
	pods := slices.DeleteFunc(listPods(t, c, ns, name), func(p corev1.Pod) bool {
		return p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// unschedulable reports whether the scheduler has found no node for p.
func unschedulable(p corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
	})
}

// release removes the finalizers of pod, so that its deletion completes.
func release(t *testing.T, c *testcluster.Cluster, pod corev1.Pod) {
	t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, err := c.Client().CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("remove the finalizers of pod %s: %v", pod.Name, err)
	}
}
