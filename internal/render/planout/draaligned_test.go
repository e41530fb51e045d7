package planout_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/golden"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/plan"
)

// TestAlignedClaimTemplates: the ResourceClaimTemplate of a MIG share
// whose workload aligns its GPU with another driver's devices asks the
// MIG device, those devices as the workload's claim asked them (exactly or
// firstAvailable, with selectors, tolerations and capacity), and a
// matchAttribute constraint over the MIG request and theirs; without
// alignment, only the MIG device. Golden files in testdata/aligned,
// refreshed with -update.
func TestAlignedClaimTemplates(t *testing.T) {
	nic := cluster.ClaimRequest{Name: "nic", DeviceClass: "nic.dra.net", Count: 1, Selectors: []string{"device.attributes['dra.net'].rdma == true"},
		Tolerations: []cluster.DeviceToleration{{Key: "dra.net/maintenance", Operator: "Exists", Effect: "NoSchedule"}}}
	for name, tmpl := range map[string]plan.MIGClaimTemplate{
		"numa-nic": {Namespace: "ml", Name: "gpupack-rank-1g-10gb", Profile: "1g.10gb", MatchAttribute: "resource.kubernetes.io/numaNode", Aligned: []cluster.ClaimRequest{nic}},
		"pcieroot-alternatives": {Namespace: "ml", Name: "gpupack-rank-2g-20gb", Profile: "2g.20gb", MatchAttribute: "resource.kubernetes.io/pcieRoot",
			Aligned: []cluster.ClaimRequest{{Name: "net", FirstAvailable: []cluster.ClaimRequest{
				{Name: "rdma", DeviceClass: "rdma.dra.net", Count: 2, Capacity: map[string]cluster.Quantity{"bandwidth": 10 << 30}},
				{Name: "any", DeviceClass: "nic.dra.net", All: true}}}}},
		"unaligned": {Namespace: "ml", Name: "gpupack-rank-1g-10gb", Profile: "1g.10gb"},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := planout.DRAObjectsOf(&plan.DRAPlan{MIGProfiles: []string{tmpl.Profile}, ClaimTemplates: []plan.MIGClaimTemplate{tmpl}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := yaml.Marshal(objs.ClaimTemplates[0])
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "aligned", name+".yaml"), b)
		})
	}
}

// TestAlignedClaimTemplateAllocated: the real kube-scheduler allocates a
// pod's claim from the template the plan writes for an aligned MIG share
// (NIC request and matchAttribute resource.kubernetes.io/numaNode) a MIG
// device and a NIC of one NUMA node: GPU 0's MIG devices (NUMA node 1)
// come first, but the only NIC there is on NUMA node 0 with GPU 1, the
// other NIC on node 2.
func TestAlignedClaimTemplateAllocated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver and kube-scheduler")
	}
	c := testcluster.Start(t, testcluster.Options{})
	ctx := t.Context()
	client := c.Client()
	var gpus []testcluster.DRAGPU
	for minor, numa := range []int64{1, 0} {
		gpus = append(gpus, testcluster.DRAGPU{Minor: minor, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, NUMANode: ptr.To(numa),
			MIG: []testcluster.DRAMIG{{Profile: "1g.10gb", ProfileID: 19, Start: 0, MemoryMiB: 9856}, {Profile: "1g.10gb", ProfileID: 19, Start: 1, MemoryMiB: 9856}}})
	}
	c.AddDRANode("dra-1", gpus...)
	var nics []resourcev1.Device
	for i, numa := range []int64{2, 0} {
		nics = append(nics, resourcev1.Device{Name: fmt.Sprintf("nic-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"resource.kubernetes.io/numaNode": {IntValue: ptr.To(numa)}, "rdma": {BoolValue: ptr.To(true)}}})
	}
	nicSlice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-1-dra.net"}, Spec: resourcev1.ResourceSliceSpec{Driver: "dra.net",
		Pool: resourcev1.ResourcePool{Name: "dra-1", Generation: 1, ResourceSliceCount: 1}, NodeName: ptr.To("dra-1"), Devices: nics}}
	nicClass := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.dra.net"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "dra.net"`}}}}}
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, nicSlice, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}
	tmpl := plan.MIGClaimTemplate{Namespace: "ml", Name: "gpupack-rank-1g-10gb", Profile: "1g.10gb", MatchAttribute: "resource.kubernetes.io/numaNode",
		Aligned: []cluster.ClaimRequest{{Name: "nic", DeviceClass: "nic.dra.net", Count: 1, Selectors: []string{"device.attributes['dra.net'].rdma == true"}}}}
	objs, err := planout.DRAObjectsOf(&plan.DRAPlan{MIGProfiles: []string{"1g.10gb"}, ClaimTemplates: []plan.MIGClaimTemplate{tmpl}})
	if err != nil {
		t.Fatal(err)
	}
	for _, dc := range append(objs.DeviceClasses, *nicClass) {
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatal(err)
		}
	}
	c.CreateNamespace("ml")
	if _, err := client.ResourceV1().ResourceClaimTemplates("ml").Create(ctx, &objs.ClaimTemplates[0], metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("the written template is refused: %v", err)
	}
	pd := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "rank-0"}, Spec: corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}},
		Containers:     []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}}}
	if _, err := client.CoreV1().Pods("ml").Create(ctx, pd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allocated := map[string]string{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("ml").Get(ctx, "rank-0", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName == "" || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, nil
		}
		claim, err := client.ResourceV1().ResourceClaims("ml").Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil || claim.Status.Allocation == nil {
			return false, nil
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			allocated[r.Request] = r.Device
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod rank-0 was not bound with an allocated claim: %v", err)
	}
	if want := map[string]string{"gpu": "gpu-1-mig-1g10gb-19-0", "nic": "nic-1"}; !cmp.Equal(allocated, want) {
		t.Errorf("the scheduler allocated %v; want GPU 1's first MIG device and the NIC on its NUMA node, %v", allocated, want)
	}
}
