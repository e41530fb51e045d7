package kube_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestLiveDRACapacity shares one H100 by memory (DRAConsumableCapacity: the
// device allows multiple allocations; its memory capacity's request policy
// takes 10Gi steps from 10Gi up to 80Gi). Two claims take 50Gi and 20Gi
// (asking 45Gi and 15Gi); gpupack predicts that a claim asking 1Gi fits
// and takes 10Gi, and the real kube-scheduler allocates exactly that; then
// claims asking 5Gi (the device is full) and 90Gi (above the policy's
// maximum) stay pending, and gpupack's line is the scheduler's
// FailedScheduling message while its diagnosis names the capacity. No
// claim's status ever holds more than the device's 80Gi.
func TestLiveDRACapacity(t *testing.T) {
	c := startDRA(t)
	ctx := t.Context()
	client := c.Client()
	res := client.ResourceV1()
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	c.AddDRANode("cap-1", testcluster.DRAGPU{Minor: 0, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 80 << 10, Shared: true,
		MemoryPolicy: &resourcev1.CapacityRequestPolicy{Default: q("10Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: q("10Gi"), Max: q("80Gi"), Step: q("10Gi")}}})
	const ns = "ml"
	c.CreateNamespace(ns)

	create := func(name, memory string, gated bool) {
		t.Helper()
		r := &resourcev1.ExactDeviceRequest{DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
			Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}}
		if _, err := res.ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: r}}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}},
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
			},
		}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "gpupack.io/test"}}
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound := func(names ...string) func(map[string]*corev1.Pod) string {
		return func(ps map[string]*corev1.Pod) string {
			for _, name := range names {
				if p := ps[name]; p == nil || p.Spec.NodeName == "" {
					return name + " is not bound"
				}
			}
			return ""
		}
	}
	consumed := func(name string) string {
		t.Helper()
		claim, err := res.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("claim %s: allocation %+v, want one device", name, claim.Status.Allocation)
		}
		m := claim.Status.Allocation.Devices.Results[0].ConsumedCapacity["memory"]
		return m.String()
	}

	create("fill-0", "45Gi", false)
	create("fill-1", "15Gi", false)
	waitPods(t, client.CoreV1().Pods(ns), bound("fill-0", "fill-1"))
	if got0, got1 := consumed("fill-0"), consumed("fill-1"); got0 != "50Gi" || got1 != "20Gi" {
		t.Fatalf("the scheduler's allocations consume %s and %s; the request policy makes them 50Gi and 20Gi", got0, got1)
	}

	// gpupack's prediction for a gated pod, then the scheduler's answer.
	create("fit", "1Gi", true)
	loaded, err := kube.Load(ctx, client, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	a, reasons := fitFirstNode(t, loaded.Snapshot, "fit")
	if len(reasons) > 0 || len(a.Devices) != 1 || len(a.Devices[0].Consumed) != 1 {
		t.Fatalf("gpupack: fit takes %+v, reasons %v; want 10Gi of the device's memory", a.Devices, reasons)
	}
	predicted := a.Devices[0].Consumed[0].String()
	p, err := client.CoreV1().Pods(ns).Get(ctx, "fit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.SchedulingGates = nil
	if _, err := client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, client.CoreV1().Pods(ns), bound("fit"))
	if got := consumed("fit"); got != predicted || got != "10Gi" {
		t.Errorf("the scheduler's allocation consumes %s; gpupack predicted %s (want 10Gi: 1Gi rounded up to the policy's min)", got, predicted)
	}

	// The device is full now.
	want := map[string]struct {
		cause diagnose.Cause
		words []string
	}{
		"wait": {diagnose.Allocation, []string{"capacity memory: the request asks 5Gi, 10Gi after the device's request policy; 0 free of 80Gi", "ml/fill-0 (50Gi)"}},
		"huge": {diagnose.Placement, []string{"capacity memory: the request asks 90Gi; the request policy allows at most 80Gi", "ask for 80Gi of memory"}},
	}
	create("wait", "5Gi", false)
	create("huge", "90Gi", false)
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		for name := range want {
			if !unschedulable(ps[name]) {
				return name + " is not marked unschedulable"
			}
		}
		return ""
	})
	loaded, watched := readDRA(t, client, gpu.Default())
	for source, st := range map[string]*kube.State{"Load": loaded, "Watcher": watched} {
		for _, w := range st.Warnings {
			if strings.Contains(w, "consumable capacity") {
				t.Errorf("%s: warning %q: consumable capacity is modelled", source, w)
			}
		}
	}
	rep, err := diagnose.Diagnose(loaded.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	findings := map[string]diagnose.Finding{}
	for _, f := range rep.Findings {
		findings[f.Pod] = f
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			key := ns + "/" + name
			f := findings[key]
			msg := loaded.SchedulingFailures[key].Message
			if !strings.Contains(msg, "cannot allocate all claims") {
				t.Fatalf("the scheduler's message %q is not the DRA filter's", msg)
			}
			if f.Summary != msg {
				t.Errorf("lines differ:\n  kube-scheduler: %s\n  gpupack:        %s (%s)", msg, f.Summary, f.StockNote)
			}
			if f.Cause != w.cause {
				t.Errorf("cause %s, want %s", f.Cause, w.cause)
			}
			js, _ := json.Marshal(f)
			for _, words := range append(w.words, "claim "+name+", request gpu") {
				if !strings.Contains(string(js), words) {
					t.Errorf("the diagnosis does not name %q:\n%s", words, js)
				}
			}
			t.Logf("%s: %s; gpupack: %s", f.Cause, msg, strings.Join(f.Fix, " / "))
		})
	}

	// Never over-allocated, by the claims' status.
	claims, err := res.ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var total resource.Quantity
	for _, cl := range claims.Items {
		if cl.Status.Allocation != nil {
			for _, r := range cl.Status.Allocation.Devices.Results {
				total.Add(r.ConsumedCapacity["memory"])
			}
		}
	}
	if total.Cmp(resource.MustParse("80Gi")) != 0 {
		t.Errorf("the claims consume %s of the device's 80Gi; want exactly 80Gi (50 + 20 + 10), never more", total.String())
	}
}
