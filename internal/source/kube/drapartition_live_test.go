package kube_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

// TestLiveDRAPartitions publishes NVIDIA's dynamic MIG for a kwok node (a
// counter-set slice and a device slice: v1.37.2's apiserver refuses a
// slice with both), lets the real kube-scheduler allocate 3g.40gb
// partitions one by one until the GPU's counters are spent, and checks
// that the next claims (a 1g.10gb, the whole GPU) stay pending with the
// scheduler's "cannot allocate all claims" while gpupack names the
// counter; and that the partitions gpupack counts held are those the
// claims' status names.
func TestLiveDRAPartitions(t *testing.T) {
	c := startDRA(t)
	ctx := t.Context()
	client := c.Client()
	res := client.ResourceV1()
	h := draH100Partitionable(0)
	c.AddDRANode("part-1", h)
	const ns = "ml"
	c.CreateNamespace(ns)

	t.Run("combined slice refused", func(t *testing.T) {
		s := testcluster.NVIDIASlices("other", h)
		s[1].Name = "combined"
		s[1].Spec.Pool.Name = "combined"
		s[1].Spec.SharedCounters = s[0].Spec.SharedCounters
		_, err := res.ResourceSlices().Create(ctx, s[1], metav1.CreateOptions{})
		if err == nil {
			t.Fatal("the apiserver accepted a ResourceSlice with both devices and shared counters")
		}
		t.Logf("apiserver: %v", err)
	})

	claimPod := func(name, class, selector string) {
		t.Helper()
		r := resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}
		if selector != "" {
			r.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
		}
		createClaim(t, client, ns, name, resourcev1.DeviceRequest{Name: "gpu", Exactly: &r})
		createClaimPod(t, client, ns, name, name)
	}
	profile := func(name string) string { return "device.attributes['gpu.nvidia.com'].profile == '" + name + "'" }
	// Two 3g.40gb take every memory slice and 6 of the 7 compute slices,
	// one after the other.
	held := []string{"mid-0", "mid-1"}
	for _, name := range held {
		claimPod(name, testcluster.DeviceClassMIG, profile("3g.40gb"))
		waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
			if p := ps[name]; p == nil || p.Spec.NodeName == "" {
				return name + " is not bound"
			}
			return ""
		})
	}
	// Each pending pod with how many holders must go: one 3g.40gb
	// leaves room for a 1g.10gb, the whole GPU needs both gone.
	pending := map[string]int{"small": 1, "whole": 2}
	claimPod("small", testcluster.DeviceClassMIG, profile("1g.10gb"))
	claimPod("whole", testcluster.DeviceClassGPU, "")
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		for name := range pending {
			if !unschedulable(ps[name]) {
				return name + " is not marked unschedulable"
			}
		}
		return ""
	})

	// The partitions the claims' status names.
	allocated := map[string]string{}
	for _, name := range held {
		claim, err := res.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 1 {
			t.Fatalf("claim %s: allocation %+v, want one device", name, claim.Status.Allocation)
		}
		r := claim.Status.Allocation.Devices.Results[0]
		allocated[ns+"/"+name] = cluster.DeviceID(r.Driver, r.Pool, r.Device)
	}

	// The Watcher's informers read the same partitions held.
	loaded, watched := readDRA(t, client, gpu.Default())
	holds := func(st *kube.State) map[string][]cluster.Device {
		out := map[string][]cluster.Device{}
		for _, p := range st.Snapshot.Pods {
			if p.Bound() {
				out[p.Key()] = p.Devices
			}
		}
		return out
	}
	if diff := cmp.Diff(holds(loaded), holds(watched)); diff != "" {
		t.Errorf("the Watcher's holds differ from Load's (-Load +Watcher):\n%s", diff)
	}
	for _, w := range loaded.Warnings {
		if strings.Contains(w, "counter") {
			t.Errorf("warning about counters, which are modelled: %s", w)
		}
	}
	node, ok := loaded.Snapshot.Node("part-1")
	if !ok || len(node.GPUs) != 1 || node.GPUs[0].DRA == nil || !node.GPUs[0].DRA.Partitionable() {
		t.Fatalf("part-1 = %+v, want one partitionable GPU; warnings %q", node, loaded.Warnings)
	}
	g := node.GPUs[0]
	states, misfits, err := placement.States(loaded.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(misfits) > 0 {
		t.Errorf("bound pods said not to fit: %q", misfits)
	}
	var heldBits uint64
	for _, p := range loaded.Snapshot.Pods {
		want, ok := allocated[p.Key()]
		if !ok {
			continue
		}
		if len(p.Devices) != 1 || p.Devices[0].Slice < 0 {
			t.Errorf("%s holds %+v, want the partition %s", p.Key(), p.Devices, want)
			continue
		}
		if got := cluster.DeviceID(g.DRA.Driver, g.DRA.Pool, g.DRA.Partitions[p.Devices[0].Slice].Device); got != want {
			t.Errorf("%s: gpupack counts partition %s held, the claim's status says %s", p.Key(), got, want)
		}
		heldBits |= 1 << p.Devices[0].Slice
	}
	var si int
	for i, s := range states {
		if s.Node.Name == "part-1" {
			si = i
		}
	}
	if got := states[si].GPUs[0].UsedSlices; got != heldBits || heldBits == 0 {
		t.Errorf("part-1's state holds partitions %b, the claims %b", got, heldBits)
	}
	if left := placement.MakeablePartitions(states[si], 0); len(left) != 0 {
		t.Errorf("partitions %v can still be made, want none: the two 3g.40gb take every memory slice", left)
	}

	rep, err := diagnose.Diagnose(loaded.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, reclaim := range pending {
		t.Run(name, func(t *testing.T) {
			key := ns + "/" + name
			var f *diagnose.Finding
			for i := range rep.Findings {
				if rep.Findings[i].Pod == key {
					f = &rep.Findings[i]
				}
			}
			if f == nil {
				t.Fatalf("no finding for %s", key)
			}
			msg := loaded.SchedulingFailures[key].Message
			if !strings.Contains(msg, "cannot allocate all claims") || f.Summary != msg {
				t.Errorf("lines differ:\n  kube-scheduler: %s\n  gpupack:        %s", msg, f.Summary)
			}
			var cf *diagnose.ClaimFacts
			for i := range f.Evidence.Claims {
				if f.Evidence.Claims[i].Claim == name {
					cf = &f.Evidence.Claims[i]
				}
			}
			if f.Cause != diagnose.Allocation || cf == nil || cf.Counter == nil || cf.Counter.Set != h.CounterSetName() || cf.Counter.Left >= cf.Counter.Needed {
				t.Fatalf("cause %s, claims %+v; want allocation with a spent counter of %s", f.Cause, f.Evidence.Claims, h.CounterSetName())
			}
			words := fmt.Sprintf("claim %s, request gpu: on part-1 GPU 0 the shared counter %s of counter set %s", name, cf.Counter.Counter, h.CounterSetName())
			if len(f.Fix) == 0 || !strings.HasPrefix(f.Fix[0], words) || !strings.Contains(f.Fix[0], fmt.Sprintf("reclaim %d of them", reclaim)) {
				t.Errorf("fix %q, want it to start %q and reclaim %d holder(s)", f.Fix, words, reclaim)
			}
			t.Logf("kube-scheduler: %s\ngpupack: %s", msg, f.Fix[0])
		})
	}
}

// createClaim creates the ResourceClaim name in ns with the one request.
func createClaim(t *testing.T, client kubernetes.Interface, ns, name string, r resourcev1.DeviceRequest) {
	t.Helper()
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(t.Context(), &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{r}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createClaimPod creates the pod name in ns, asking one CPU, whose claim
// gpu is the ResourceClaim claimName.
func createClaimPod(t *testing.T, client kubernetes.Interface, ns, name, claimName string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claimName)}},
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
