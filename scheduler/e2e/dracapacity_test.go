package e2e

import (
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestDRACapacityPacksTighterThanStock runs one sequence of pods whose
// claims ask for GPU memory of shared H100s (DRAConsumableCapacity: each
// GPU allows multiple allocations, its 80Gi of memory taken in 10Gi steps)
// on four kwok nodes of one GPU each, once with the stock kube-scheduler
// and once with gpupack-scheduler: eight pods of 20Gi, one at a time, then
// two pods of 80Gi. The stock profile spreads the small pods (least
// allocated CPU), two to a GPU, so no GPU has 80Gi left; gpupack-scheduler
// scores claim pods by the memory their best device would have left,
// fills two GPUs and runs both big pods. The upstream DynamicResources
// plugin allocates in both runs: no device's memory is ever over-allocated,
// as the claims' status says.
func TestDRACapacityPacksTighterThanStock(t *testing.T) {
	c, cs := startDRARuns(t)
	ctx := t.Context()
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for n := range 4 {
		c.AddDRANode(fmt.Sprintf("cap-%d", n), testcluster.DRAGPU{Minor: 0, Product: "NVIDIA H100 80GB HBM3", Architecture: "Hopper", MemoryMiB: 80 << 10, Shared: true,
			MemoryPolicy: &resourcev1.CapacityRequestPolicy{Default: q("10Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: q("10Gi"), Step: q("10Gi")}}})
	}
	sched := startGpupackScheduler(t, c, "")

	bigBound := map[string]int{}
	for _, scheduler := range []string{corev1.DefaultSchedulerName, schedulerName} {
		ns := "cap-" + scheduler
		c.CreateNamespace(ns)
		for name, memory := range map[string]string{"small": "20Gi", "big": "80Gi"} {
			tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
						Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}}}}}}}}
			if _, err := cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var small, big []*corev1.Pod
		for i := range 8 {
			small = append(small, claimPod(ns, scheduler, fmt.Sprintf("small-%d", i), "small"))
		}
		for i := range 2 {
			big = append(big, claimPod(ns, scheduler, fmt.Sprintf("big-%d", i), "big"))
		}
		pods := runStorm(t, cs, sched, small, big)
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.Name[:3] == "big" {
				bigBound[scheduler]++
			}
		}
		used := checkCapacityNotOverAllocated(t, cs, ns, resource.MustParse("80Gi"))
		t.Logf("%s: memory taken per GPU %v; %d of 2 big pods bound", scheduler, used, bigBound[scheduler])
		endRun(t, cs, ns)
	}
	if bigBound[schedulerName] != 2 || bigBound[corev1.DefaultSchedulerName] >= bigBound[schedulerName] {
		t.Errorf("80Gi pods bound: gpupack-scheduler %d, stock %d; want 2 and fewer", bigBound[schedulerName], bigBound[corev1.DefaultSchedulerName])
	}
}

// checkCapacityNotOverAllocated sums, per device, the memory that the
// namespace's allocated claims consume (their status), checks that no
// device holds more than its capacity and that each share consumed what
// its claim asked, and returns the sums, device by device.
func checkCapacityNotOverAllocated(t *testing.T, cs kubernetes.Interface, ns string, capacity resource.Quantity) []string {
	t.Helper()
	claims, err := cs.ResourceV1().ResourceClaims(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]*resource.Quantity{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		asked := c.Spec.Devices.Requests[0].Exactly.Capacity.Requests["memory"]
		for _, r := range c.Status.Allocation.Devices.Results {
			got := r.ConsumedCapacity["memory"]
			if got.Cmp(asked) != 0 || r.ShareID == nil {
				t.Errorf("claim %s: share %v consumes %s of memory, want %s (a multiple of the 10Gi step)", c.Name, r.ShareID, got.String(), asked.String())
			}
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if used[id] == nil {
				used[id] = &resource.Quantity{}
			}
			used[id].Add(got)
		}
	}
	var out []string
	for id, q := range used {
		if q.Cmp(capacity) > 0 {
			t.Errorf("device %s: the claims consume %s of its %s of memory", id, q.String(), capacity.String())
		}
		out = append(out, id+"="+q.String())
	}
	sort.Strings(out)
	return out
}
