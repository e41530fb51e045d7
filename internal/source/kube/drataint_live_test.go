package kube_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

// TestLiveDRADeviceTaints taints one GPU in its ResourceSlice
// (maintenance:NoSchedule on dra-1's gpu-0) and one with a DeviceTaintRule
// (gpu.nvidia.com/xid=79:NoSchedule on dra-2's gpu-0), on the real
// control plane. A pod whose claim accepts only a tainted GPU and does not
// tolerate its taint stays pending: gpupack's "0/N nodes are available"
// line is the kube-scheduler's FailedScheduling message, and the diagnosis
// names the claim, the request, the device and the taint (and the rule).
// A pod whose claim tolerates the taint is judged to fit that GPU by
// gpupack while it is gated, and the real scheduler then allocates it
// that very GPU. Load and the Watcher read the same taints.
func TestLiveDRADeviceTaints(t *testing.T) {
	c := startDRA(t)
	ctx := t.Context()
	client := c.Client()
	res := client.ResourceV1()
	inMaintenance := draH100(0)
	inMaintenance.Taints = []resourcev1.DeviceTaint{{Key: "maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	c.AddDRANode("dra-1", inMaintenance, draH100(1))
	c.AddDRANode("dra-2", draH100(0))
	const rule = "xid-dra-2-gpu-0"
	if _, err := res.DeviceTaintRules().Create(ctx, &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: rule}, Spec: resourcev1.DeviceTaintRuleSpec{
		DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(kube.DriverNVIDIAGPU), Pool: ptr.To("dra-2"), Device: ptr.To("gpu-0")},
		Taint:          resourcev1.DeviceTaint{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceTaintRule (served by default in v1.37): %v", err)
	}
	const ns = "ml"
	c.CreateNamespace(ns)

	// Each claim asks for one GPU of class gpu.nvidia.com, by its UUID.
	const gate = "gpupack.io/test"
	pod := func(name, uuid string, tolerations []resourcev1.DeviceToleration, gated bool) {
		t.Helper()
		r := &resourcev1.ExactDeviceRequest{DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1, Tolerations: tolerations}
		if uuid != "" {
			r.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].uuid == '" + uuid + "'"}}}
		}
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
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: gate}}
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A holder takes the one untainted GPU, dra-1's gpu-1.
	pod("holder", "", nil, false)
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		if p := ps["holder"]; p == nil || p.Spec.NodeName != "dra-1" {
			return "holder is not bound to dra-1"
		}
		return ""
	})
	maintenance := []resourcev1.DeviceToleration{{Key: "maintenance", Operator: resourcev1.DeviceTolerationOpExists}}
	xid := []resourcev1.DeviceToleration{{Key: "gpu.nvidia.com/xid", Operator: resourcev1.DeviceTolerationOpEqual, Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	pod("slice-tainted", "GPU-dra-1-0", nil, false)
	pod("rule-tainted", "GPU-dra-2-0", maintenance, false) // tolerates the other taint only
	pod("slice-tolerant", "GPU-dra-1-0", maintenance, true)
	pod("rule-tolerant", "GPU-dra-2-0", xid, true)
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		for _, name := range []string{"slice-tainted", "rule-tainted"} {
			if !unschedulable(ps[name]) {
				return name + " is not marked unschedulable"
			}
		}
		return ""
	})

	cat := gpu.Default()
	loaded, watched := readDRA(t, client, cat)
	wantTaints := map[string][]cluster.DeviceTaint{
		"dra-1/gpu-0": {{Device: "gpu-0", Key: "maintenance", Effect: cluster.TaintEffectNoSchedule}},
		"dra-1/gpu-1": nil,
		"dra-2/gpu-0": {{Device: "gpu-0", Key: "gpu.nvidia.com/xid", Value: "79", Effect: cluster.TaintEffectNoSchedule, Rule: rule}},
	}
	for source, st := range map[string]*kube.State{"Load": loaded, "Watcher": watched} {
		got := map[string][]cluster.DeviceTaint{}
		for _, n := range st.Snapshot.Nodes {
			for _, g := range n.GPUs {
				if g.DRA != nil {
					got[n.Name+"/"+g.DRA.Device] = g.DRA.Taints
				}
			}
		}
		if diff := cmp.Diff(wantTaints, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: taints (-want +got):\n%s\nwarnings %q", source, diff, st.Warnings)
		}
		for _, warning := range st.Warnings {
			if strings.Contains(warning, "taint") {
				t.Errorf("%s: a warning about taints: %q", source, warning)
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
	for name, words := range map[string][]string{
		"slice-tainted": {"claim slice-tainted, request gpu: on dra-1", "gpu.nvidia.com/dra-1/gpu-0 has maintenance:NoSchedule"},
		"rule-tainted":  {"claim rule-tainted, request gpu: on dra-2", "gpu.nvidia.com/dra-2/gpu-0 has gpu.nvidia.com/xid=79:NoSchedule from DeviceTaintRule " + rule, "kubectl delete devicetaintrule " + rule},
	} {
		t.Run(name, func(t *testing.T) {
			key := ns + "/" + name
			f, ok := findings[key]
			if !ok {
				t.Fatalf("no finding for %s; warnings %q", key, loaded.Warnings)
			}
			msg := loaded.SchedulingFailures[key].Message
			t.Logf("%s: %s; gpupack: %s", f.Cause, msg, strings.Join(f.Fix, " / "))
			if !strings.Contains(msg, "cannot allocate all claims") {
				t.Fatalf("the scheduler's message %q is not the DRA filter's", msg)
			}
			if f.Summary != msg {
				t.Errorf("lines differ:\n  kube-scheduler: %s\n  gpupack:        %s (%s)", msg, f.Summary, f.StockNote)
			}
			if f.Cause != diagnose.Placement || !slices.Contains(diagnose.SchedulerCauses(msg), f.Cause) {
				t.Errorf("cause %s, want %s, among what the message implies: %v", f.Cause, diagnose.Placement, diagnose.SchedulerCauses(msg))
			}
			js, _ := json.Marshal(f)
			for _, w := range append(words, `"kind":"claim-spec"`, "/spec/devices/requests/0/exactly/tolerations") {
				if !strings.Contains(string(js), w) {
					t.Errorf("the diagnosis does not say %q:\n%s", w, js)
				}
			}
		})
	}

	// gpupack: each tolerant pod fits its tainted GPU, and only there.
	states, _, err := placement.States(loaded.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	chosen := map[string]string{}
	for _, p := range loaded.Snapshot.Pods {
		if p.Name != "slice-tolerant" && p.Name != "rule-tolerant" {
			continue
		}
		d, err := placement.NewDemand(p, cat)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range states {
			if a, rs := placement.Fit(d, st); len(rs) == 0 {
				n := loaded.Snapshot.Nodes[i]
				chosen[p.Name] = cluster.DeviceID(n.GPUs[a.Devices[0].GPU].DRA.Driver, n.GPUs[a.Devices[0].GPU].DRA.Pool, n.GPUs[a.Devices[0].GPU].DRA.Device)
			}
		}
	}
	want := map[string]string{"slice-tolerant": "gpu.nvidia.com/dra-1/gpu-0", "rule-tolerant": "gpu.nvidia.com/dra-2/gpu-0"}
	if diff := cmp.Diff(want, chosen); diff != "" {
		t.Fatalf("where gpupack fits the tolerant pods (-want +got):\n%s", diff)
	}
	// The real scheduler: ungated, each is allocated the same GPU.
	for name := range want {
		if _, err := client.CoreV1().Pods(ns).Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		for name := range want {
			if p := ps[name]; p == nil || p.Spec.NodeName == "" {
				return name + " is not bound"
			}
		}
		return ""
	})
	for name, id := range want {
		claim, err := res.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if claim.Status.Allocation != nil {
			for _, r := range claim.Status.Allocation.Devices.Results {
				got = append(got, cluster.DeviceID(r.Driver, r.Pool, r.Device))
			}
		}
		if !slices.Equal(got, []string{id}) {
			t.Errorf("%s: the scheduler allocated %v; gpupack chose %s", name, got, id)
		}
	}
}
