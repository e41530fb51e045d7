package e2e

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestDRAPartitionsPackTighterThanStock runs one sequence of MIG claims on
// four kwok nodes of one partitionable H100 each (NVIDIA's dynamic MIG:
// shared counters, the whole GPU and every profile's placements), once
// with the stock kube-scheduler and once with gpupack-scheduler: eight
// 1g.10gb pods one at a time, then a storm of four 4g.40gb pods at once.
// The stock profile spreads the small pods two to a GPU, on memory slices
// 0 and 1, where every 4g.40gb must start; gpupack-scheduler scores nodes
// by the partitions they can still make, fills one GPU and leaves two
// whole. The upstream allocator allocates in both runs: from the claims'
// status, no counter of any GPU is ever consumed beyond its value and no
// device is in two claims.
func TestDRAPartitionsPackTighterThanStock(t *testing.T) {
	c, cs := startDRARuns(t)
	ctx := t.Context()
	m, _ := gpu.Default().Lookup("NVIDIA H100 80GB HBM3")
	for n := range 4 {
		c.AddDRANode(fmt.Sprintf("part-%d", n), testcluster.DRAGPU{Minor: 0, Product: m.Name, MemoryMiB: 81559, Partitions: m.MIG})
	}
	sched := startGpupackScheduler(t, c, "")

	bigBound := map[string]int{}
	for _, scheduler := range []string{corev1.DefaultSchedulerName, schedulerName} {
		ns := "run-" + scheduler
		c.CreateNamespace(ns)
		for _, profile := range []string{"1g.10gb", "4g.40gb"} {
			tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: profile},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name: "mig", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: testcluster.DeviceClassMIG, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
						Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].profile == '" + profile + "'"}}}}}}}}}}
			if _, err := cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pod := func(name, template string) *corev1.Pod {
			cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
				SchedulerName:  scheduler,
				ResourceClaims: []corev1.PodResourceClaim{{Name: "mig", ResourceClaimTemplateName: ptr.To(template)}},
				Containers: []corev1.Container{{Name: "main", Image: "example.invalid/app",
					Resources: corev1.ResourceRequirements{Requests: cpu, Limits: cpu, Claims: []corev1.ResourceClaim{{Name: "mig"}}}}},
				Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			}}
		}
		var smalls []*corev1.Pod
		for i := range 8 {
			smalls = append(smalls, pod(fmt.Sprintf("small-%d", i), "1g.10gb"))
		}
		bindInTurn(t, cs, sched, smalls...)
		checkCountersHeld(t, cs, ns)
		for i := range 4 {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("big-%d", i), "4g.40gb"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pods := settle(t, cs, ns)
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
		t.Logf("%s: 1g.10gb pods per node %v; %d of 4 4g.40gb pods bound", scheduler, perNode, bigBound[scheduler])
		checkCountersHeld(t, cs, ns)
		checkClaimsDisjoint(t, cs, ns)
		endRun(t, cs, ns)
	}
	if bigBound[schedulerName] <= bigBound[corev1.DefaultSchedulerName] {
		t.Errorf("4g.40gb pods bound: gpupack-scheduler %d, stock %d; want more with gpupack", bigBound[schedulerName], bigBound[corev1.DefaultSchedulerName])
	}
}

// checkCountersHeld checks, from the claims' status and the published
// slices, that the devices allocated in the namespace consume no counter of
// any pool beyond its value.
func checkCountersHeld(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	slices, err := cs.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := cs.ResourceV1().ResourceClaims(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := map[string]bool{}
	for _, c := range claims.Items {
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				allocated[r.Driver+"/"+r.Pool+"/"+r.Device] = true
			}
		}
	}
	consumed := map[string]int64{} // pool/set/counter
	value := map[string]int64{}
	for _, s := range slices.Items {
		for _, set := range s.Spec.SharedCounters {
			for name, v := range kube.CounterSet(set).Counters {
				value[s.Spec.Pool.Name+"/"+set.Name+"/"+name] = v
			}
		}
		for _, d := range s.Spec.Devices {
			if !allocated[s.Spec.Driver+"/"+s.Spec.Pool.Name+"/"+d.Name] {
				continue
			}
			for _, u := range kube.CounterUses(d.ConsumesCounters) {
				for name, v := range u.Counters {
					consumed[s.Spec.Pool.Name+"/"+u.Set+"/"+name] += v
				}
			}
		}
	}
	if len(allocated) == 0 {
		t.Errorf("no claim of %s is allocated", ns)
	}
	for key, v := range consumed {
		if v > value[key] {
			t.Errorf("counter %s: the allocated devices consume %d of %d", key, v, value[key])
		}
	}
}
