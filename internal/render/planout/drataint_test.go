package planout_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/fixture"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// TestDeviceTaintRulesAccepted plans a node whose GPU gpu-0 reported XID 79
// (the usage facts' unhealthy GPUs), creates the DeviceTaintRules of
// dra-device-taint-rules.yaml on a real kube-apiserver (v1.37.2, no feature
// flags), whose validation must accept them (and refuse an effect it does
// not know, so that it is live), and checks the real kube-scheduler honours
// them: of two pods asking one GPU each on that node's ResourceSlice, one
// gets the healthy gpu-1 and the other stays pending.
func TestDeviceTaintRulesAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	s := fixture.DRATaintSnapshot(t)
	u := &usage.Facts{Window: 24 * time.Hour, Pods: map[string]usage.PodFacts{}, Unhealthy: []usage.UnhealthyGPU{{Node: "dra-a", UUID: "GPU-dra-a-0", XID: 79}}}
	p, err := plan.Make(context.Background(), s, u, plan.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	files, err := planout.Files(p, s)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if f.Name == planout.FileDRATaintRules {
			objs = documents(t, f.Data)
		}
	}
	if len(objs) != 1 {
		t.Fatalf("%s holds %d objects, want the one rule of gpu-0", planout.FileDRATaintRules, len(objs))
	}
	var table strings.Builder
	planout.WriteTable(&table, p, s)
	if want := "dra: GPU GPU-dra-a-0 of dra-a reported XID 79: DeviceTaintRule gpupack-unhealthy-dra-a-gpu-0 in dra-device-taint-rules.yaml taints gpu.nvidia.com/dra-a/gpu-0 with gpupack.io/xid=79:NoSchedule"; !strings.Contains(table.String(), want) {
		t.Errorf("the plan's table does not say %q:\n%s", want, table.String())
	}

	c := testcluster.Start(t, testcluster.Options{})
	ctx := t.Context()
	rules := c.Dynamic().Resource(schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"})
	if _, err := rules.Create(ctx, objs[0], metav1.CreateOptions{}); err != nil {
		t.Fatalf("DeviceTaintRule %s refused: %v", objs[0].GetName(), err)
	}
	bad := objs[0].DeepCopy()
	bad.SetName("gpupack-broken")
	if err := unstructured.SetNestedField(bad.Object, "PreferNoSchedule", "spec", "taint", "effect"); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a rule with effect PreferNoSchedule: got %v, want it refused as invalid", err)
	}

	c.CreateDeviceClasses(testcluster.NVIDIADeviceClasses()...)
	c.AddDRANode("dra-a", testcluster.DRAGPU{Minor: 0, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559}, testcluster.DRAGPU{Minor: 1, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559})
	const ns = "ml"
	c.CreateNamespace(ns)
	client := c.Client()
	for _, name := range []string{"a", "b"} {
		if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pd := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}},
			Containers:     []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		}}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got = got[:0]
		pending := 0
		for _, name := range []string{"a", "b"} {
			claim, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if claim.Status.Allocation != nil {
				for _, r := range claim.Status.Allocation.Devices.Results {
					got = append(got, r.Device)
				}
			}
			pd, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range pd.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
					pending++
				}
			}
		}
		return len(got) == 1 && pending == 1, nil
	})
	if err != nil || !slices.Equal(got, []string{"gpu-1"}) {
		t.Errorf("allocated %v (%v); want gpu-1 only, the other pod pending while the rule taints gpu-0", got, err)
	}
}
