package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestDRAPacksTighterThanStock runs one sequence of pods with GPU claims
// (ResourceClaimTemplates of NVIDIA's DeviceClass, no extended resources)
// on four kwok nodes of four DRA GPUs each, once with the stock
// kube-scheduler and once with gpupack-scheduler: eight pods of one GPU,
// one at a time, then two pods of four GPUs. The stock profile spreads the
// small pods (least allocated), two to a node, so that no node has four
// GPUs left and neither big pod runs; gpupack-scheduler scores claim pods
// by how well their devices fill a node's free DRA GPUs, fills two nodes
// and runs both. The upstream DynamicResources plugin allocates in both
// runs: no device may be in two claims' allocations, as the claims'
// status says.
func TestDRAPacksTighterThanStock(t *testing.T) {
	c, cs := startDRARuns(t)
	ctx := t.Context()
	for n := range 4 {
		var gpus []testcluster.DRAGPU
		for minor := range 4 {
			gpus = append(gpus, testcluster.DRAGPU{Minor: minor, Product: "NVIDIA H100 80GB HBM3", Architecture: "Hopper", MemoryMiB: 81559})
		}
		c.AddDRANode(fmt.Sprintf("dra-%d", n), gpus...)
	}
	sched := startGpupackScheduler(t, c, "")

	bigBound := map[string]int{}
	for _, scheduler := range []string{corev1.DefaultSchedulerName, schedulerName} {
		ns := "run-" + scheduler
		c.CreateNamespace(ns)
		for name, count := range map[string]int64{"one-gpu": 1, "four-gpus": 4} {
			tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}}}}}}
			if _, err := cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// The small pods one at a time, each bound before the next, so that
		// both schedulers see the same sequence.
		var small, big []*corev1.Pod
		for i := range 8 {
			small = append(small, claimPod(ns, scheduler, fmt.Sprintf("small-%d", i), "one-gpu"))
		}
		for i := range 2 {
			big = append(big, claimPod(ns, scheduler, fmt.Sprintf("big-%d", i), "four-gpus"))
		}
		pods := runStorm(t, cs, sched, small, big)
		perNode := map[string]int{}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				continue
			}
			if p.Name[:3] == "big" {
				bigBound[scheduler]++
			} else {
				perNode[p.Spec.NodeName]++
			}
		}
		t.Logf("%s: small pods per node %v; %d of 2 big pods bound", scheduler, perNode, bigBound[scheduler])
		checkClaimsDisjoint(t, cs, ns)
		// Both runs share the nodes: the next starts on empty GPUs.
		endRun(t, cs, ns)
	}
	if bigBound[schedulerName] != 2 || bigBound[corev1.DefaultSchedulerName] >= bigBound[schedulerName] {
		t.Errorf("four-GPU pods bound: gpupack-scheduler %d, stock %d; want 2 and fewer", bigBound[schedulerName], bigBound[corev1.DefaultSchedulerName])
	}

	// An unchanged manifest (nvidia.com/gpu: 1) addressed to gpupack: the
	// nodes offer no device-plugin GPU, but NVIDIA's DeviceClass serves the
	// resource through DRA (extendedResourceName), so GPUPack leaves the
	// node to DRA and the pod runs on a DRA GPU.
	ns := "unchanged"
	c.CreateNamespace(ns)
	legacy := gpuPod(ns, "legacy", map[string]int64{string(kube.ResourceGPU): 1})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "legacy", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "" && p.Status.ExtendedResourceClaimStatus != nil, err
	})
	if err != nil {
		p, _ := cs.CoreV1().Pods(ns).Get(ctx, "legacy", metav1.GetOptions{})
		t.Fatalf("a pod asking nvidia.com/gpu: 1 of gpupack-scheduler was not bound to a DRA GPU: %v; status %+v", err, p.Status)
	}
}

// claimPod is a pod of 8 CPUs and 64Gi for scheduler whose claim gpus is
// made from the template.
func claimPod(ns, scheduler, name, template string) *corev1.Pod {
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
		SchedulerName:  scheduler,
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}},
		Containers: []corev1.Container{{Name: "main", Image: "example.invalid/app",
			Resources: corev1.ResourceRequirements{Requests: cpu, Limits: cpu, Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}},
		Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
	}}
}

// runStorm binds the small pods in turn (bindInTurn), so that every
// scheduler sees the same sequence, then creates the big pods at once and
// waits until each pod is bound or said unschedulable (settle); it returns
// the namespace's pods.
func runStorm(t *testing.T, cs kubernetes.Interface, sched *testcluster.Process, small, big []*corev1.Pod) []corev1.Pod {
	t.Helper()
	bindInTurn(t, cs, sched, small...)
	ns := small[0].Namespace
	for _, p := range big {
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return settle(t, cs, ns)
}

// checkClaimsDisjoint checks that no device is in two allocated claims of
// the namespace (the scheduler never over-allocates a DRA GPU) and that
// each allocated claim got the devices it asked for.
func checkClaimsDisjoint(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	claims, err := cs.ResourceV1().ResourceClaims(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := map[string]string{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		results := c.Status.Allocation.Devices.Results
		if want := c.Spec.Devices.Requests[0].Exactly.Count; int64(len(results)) != want {
			t.Errorf("claim %s: %d devices allocated, want %d", c.Name, len(results), want)
		}
		for _, r := range results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, ok := holder[id]; ok {
				t.Errorf("device %s is allocated to claims %s and %s", id, other, c.Name)
			}
			holder[id] = c.Name
		}
	}
}
