package kube_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

// taintRule is a DeviceTaintRule adding key:effect to the devices that
// driver, pool and device (nil: any) select.
func taintRule(name, key string, effect resourcev1.DeviceTaintEffect, sel *resourcev1.DeviceTaintSelector) *resourcev1.DeviceTaintRule {
	return &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: resourcev1.DeviceTaint{Key: key, Effect: effect}}}
}

// TestBuildDRADeviceTaints: a device's taints are its slice's and those
// of the DeviceTaintRules that select it by driver, pool and device (a rule
// without a selector selects none), on whole GPUs and MIG slices; requests
// and subrequests keep their tolerations; placement then keeps an
// untolerated device from a pending claim and names the rule; a bound pod
// on a device with an untolerated NoExecute taint is warned about.
func TestBuildDRADeviceTaints(t *testing.T) {
	slice0 := draH100(0)
	slice0.Taints = []resourcev1.DeviceTaint{{Key: "maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	published := []*resourcev1.ResourceSlice{
		testcluster.NVIDIASlice("dra-1", slice0, draH100(1), draA100MIG(2)),
		testcluster.NVIDIASlice("dra-2", draH100(0)),
	}
	smallMIG := testcluster.DRAMIG{Profile: "1g.5gb", ProfileID: 19, Start: 0}.DeviceName(2)
	rules := []*resourcev1.DeviceTaintRule{
		taintRule("bad-gpu-1", "gpu.nvidia.com/xid", resourcev1.DeviceTaintEffectNoExecute, &resourcev1.DeviceTaintSelector{Driver: ptr.To(kube.DriverNVIDIAGPU), Pool: ptr.To("dra-1"), Device: ptr.To("gpu-1")}),
		taintRule("bad-slice", "ecc", resourcev1.DeviceTaintEffectNoSchedule, &resourcev1.DeviceTaintSelector{Device: ptr.To(smallMIG)}),
		taintRule("audit-dra-2", "audit", resourcev1.DeviceTaintEffectNone, &resourcev1.DeviceTaintSelector{Pool: ptr.To("dra-2")}),
		taintRule("no-selector", "everything", resourcev1.DeviceTaintEffectNoSchedule, nil),
		taintRule("other-driver", "nic", resourcev1.DeviceTaintEffectNoSchedule, &resourcev1.DeviceTaintSelector{Driver: ptr.To("nic.example.com")}),
	}
	evicted := draClaim("evicted-gpu", testcluster.DeviceClassGPU, 1, "dra-1", "gpu-1")
	waiting := draClaim("waiting-gpu", testcluster.DeviceClassGPU, 2, "")
	waiting.Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{Key: "maintenance", Operator: resourcev1.DeviceTolerationOpExists}}
	fallback := draClaim("fallback", testcluster.DeviceClassGPU, 1, "")
	fallback.Spec.Devices.Requests[0] = resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{{
		Name: "any", DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
		Tolerations: []resourcev1.DeviceToleration{{Key: "gpu.nvidia.com/xid", Operator: resourcev1.DeviceTolerationOpEqual, Effect: resourcev1.DeviceTaintEffectNoExecute}},
	}}}
	pods := []*corev1.Pod{draPod("evicted", "dra-1", *evicted), draPod("waiting", "", *waiting), draPod("fallback", "", *fallback)}
	nodes := []*corev1.Node{draNode("dra-1"), draNode("dra-2")}
	objs := &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: published, Claims: []*resourcev1.ResourceClaim{evicted, waiting, fallback}, TaintRules: rules}
	st, err := kube.BuildDRA(gpu.Default(), nodes, pods, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := st.Snapshot.Node("dra-1")
	n2, _ := st.Snapshot.Node("dra-2")
	want := map[string][]cluster.DeviceTaint{
		"dra-1 gpu-0": {{Device: "gpu-0", Key: "maintenance", Effect: cluster.TaintEffectNoSchedule}},
		"dra-1 gpu-1": {{Device: "gpu-1", Key: "gpu.nvidia.com/xid", Effect: cluster.TaintEffectNoExecute, Rule: "bad-gpu-1"}},
		"dra-1 MIG":   {{Device: smallMIG, Key: "ecc", Effect: cluster.TaintEffectNoSchedule, Rule: "bad-slice"}},
		"dra-2 gpu-0": {{Device: "gpu-0", Key: "audit", Effect: cluster.TaintEffectNone, Rule: "audit-dra-2"}},
	}
	got := map[string][]cluster.DeviceTaint{"dra-1 gpu-0": n1.GPUs[0].DRA.Taints, "dra-1 gpu-1": n1.GPUs[1].DRA.Taints, "dra-1 MIG": n1.GPUs[2].DRA.Taints, "dra-2 gpu-0": n2.GPUs[0].DRA.Taints}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	byName := map[string]*cluster.Pod{}
	for _, p := range st.Snapshot.Pods {
		byName[p.Name] = p
	}
	if got := byName["waiting"].Claims[0].Requests[0].Tolerations; !cmp.Equal(got, []cluster.DeviceToleration{{Key: "maintenance", Operator: "Exists"}}) {
		t.Errorf("waiting's tolerations = %+v", got)
	}
	if got := byName["fallback"].Claims[0].Requests[0].FirstAvailable[0].Tolerations; !cmp.Equal(got, []cluster.DeviceToleration{{Key: "gpu.nvidia.com/xid", Operator: "Equal", Effect: "NoExecute"}}) {
		t.Errorf("fallback's subrequest tolerations = %+v", got)
	}
	wantWarning := "pod ml/evicted: its claim evicted-gpu holds device gpu.nvidia.com/dra-1/gpu-1, whose NoExecute taint gpu.nvidia.com/xid:NoExecute (DeviceTaintRule bad-gpu-1) the claim does not tolerate: the device taint eviction controller evicts the pod"
	var taintWarnings []string
	for _, w := range st.Warnings {
		if strings.Contains(w, "taint") {
			taintWarnings = append(taintWarnings, w)
		}
	}
	if len(taintWarnings) != 1 || !strings.HasPrefix(taintWarnings[0], wantWarning) {
		t.Errorf("warnings about taints: %q, want only one that says %q", taintWarnings, wantWarning)
	}

	// waiting tolerates gpu-0's taint, but gpu-1 is held (and tainted):
	// on dra-1 one device short, which is not the taint's doing.
	states, _, err := placement.States(st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	d, err := placement.NewDemand(byName["waiting"], gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if _, rs := placement.Fit(d, states[0]); len(rs) != 1 || rs[0].Code != placement.ClaimUnallocatable {
		t.Errorf("waiting on dra-1: %v, want %s", rs, placement.ClaimUnallocatable)
	}
	// fallback tolerates gpu-1's NoExecute taint, not gpu-0's NoSchedule.
	d, err = placement.NewDemand(byName["fallback"], gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if _, rs := placement.Fit(d, states[0]); len(rs) != 1 || rs[0].Code != placement.ClaimTaintNotTolerated || !strings.Contains(rs[0].Detail, "device gpu.nvidia.com/dra-1/gpu-0 has taint maintenance:NoSchedule, which the request does not tolerate") {
		t.Errorf("fallback on dra-1: %v, want gpu-0's taint named", rs)
	}
	if _, rs := placement.Fit(d, states[1]); len(rs) > 0 {
		t.Errorf("fallback on dra-2 (effect None): %v, want it to fit", rs)
	}

	objs.TaintRules, objs.TaintRulesUnserved = nil, true
	if st, err = kube.BuildDRA(gpu.Default(), nodes, pods, nil, objs); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.HasPrefix(w, "the cluster does not serve DeviceTaintRules") }) {
		t.Errorf("no warning that DeviceTaintRules are not served; warnings: %q", st.Warnings)
	}
}

// TestTolerationsMatchUpstream: cluster.DeviceToleration.Tolerates agrees
// with the allocator's resourceclaim.ToleratesTaint on every combination of
// keys, operators, values and effects.
func TestTolerationsMatchUpstream(t *testing.T) {
	keys := []string{"", "xid", "ecc"}
	values := []string{"", "79", "48"}
	effects := []resourcev1.DeviceTaintEffect{"", resourcev1.DeviceTaintEffectNone, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute, "Later"}
	operators := []resourcev1.DeviceTolerationOperator{"", resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists, "Lt"}
	n := 0
	for _, tk := range keys[1:] {
		for _, tv := range values {
			for _, te := range effects[1:] {
				taint := resourcev1.DeviceTaint{Key: tk, Value: tv, Effect: te}
				for _, k := range keys {
					for _, op := range operators {
						for _, v := range values {
							for _, e := range effects {
								tol := resourcev1.DeviceToleration{Key: k, Operator: op, Value: v, Effect: e}
								want := resourceclaim.ToleratesTaint(tol, taint)
								got := cluster.DeviceToleration{Key: k, Operator: string(op), Value: v, Effect: string(e)}.Tolerates(cluster.DeviceTaint{Key: tk, Value: tv, Effect: string(te)})
								if got != want {
									t.Errorf("toleration %+v, taint %+v: gpupack says %v, the allocator %v", tol, taint, got, want)
								}
								n++
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations", n)
}
