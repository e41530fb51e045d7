package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

const taintedFile = `apiVersion: gpupack.io/v1alpha2
kind: ClusterSnapshot
nodes:
- name: dra-1
  cpu: "64"
  memory: 512Gi
  gpus:
  - {model: H100-80GB, count: 1, dra: {driver: gpu.nvidia.com, pool: dra-1, device: gpu-0, classes: [gpu.nvidia.com],
     taints: [{key: gpu.nvidia.com/xid, value: "79", effect: NoSchedule}, {key: note, effect: None, rule: audit}]}}
  - model: A100-40GB
    count: 1
    sharing: mig
    mig: [3g.20gb, 3g.20gb]
    dra: {driver: gpu.nvidia.com, pool: dra-1, sliceDevices: [gpu-1-mig-a, gpu-1-mig-b], classes: [mig.nvidia.com],
          taints: [{device: gpu-1-mig-b, key: unhealthy, effect: NoExecute, rule: gpupack-unhealthy-dra-1-gpu-1}]}
pods:
- namespace: ml
  name: waiting
  claims:
  - podClaim: gpu
    name: waiting-gpu
    requests:
    - {name: gpu, deviceClass: gpu.nvidia.com, count: 1, tolerations: [{key: gpu.nvidia.com/xid, operator: Exists, effect: NoSchedule}]}
    - name: alt
      firstAvailable:
      - {name: mig, deviceClass: mig.nvidia.com, count: 1, tolerations: [{key: unhealthy, value: "", effect: NoExecute}]}
`

// TestDeviceTaintsReadBack: device taints (with the device each is on and
// the rule that adds it) and requests' tolerations survive a write and a
// read; a whole GPU's taint without a device names the GPU's device.
func TestDeviceTaintsReadBack(t *testing.T) {
	s, err := ParseFile([]byte(taintedFile), "tainted.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := s.Node("dra-1")
	want := []DeviceTaint{{Device: "gpu-0", Key: "gpu.nvidia.com/xid", Value: "79", Effect: TaintEffectNoSchedule}, {Device: "gpu-0", Key: "note", Effect: TaintEffectNone, Rule: "audit"}}
	if diff := cmp.Diff(want, n.GPUs[0].DRA.Taints); diff != "" {
		t.Errorf("GPU 0 taints (-want +got):\n%s", diff)
	}
	if got := n.GPUs[1].DRA.Taints; len(got) != 1 || got[0].Device != "gpu-1-mig-b" || got[0].Rule != "gpupack-unhealthy-dra-1-gpu-1" {
		t.Errorf("GPU 1 taints = %+v, want one on gpu-1-mig-b from its rule", got)
	}
	wantTol := []DeviceToleration{{Key: "unhealthy", Effect: TaintEffectNoExecute}}
	if diff := cmp.Diff(wantTol, s.Pods[0].Claims[0].Requests[1].FirstAvailable[0].Tolerations); diff != "" {
		t.Errorf("subrequest tolerations (-want +got):\n%s", diff)
	}
	checkRoundTrip(t, s)
}

func TestDeviceTaintErrors(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"taint on another device":  {"device: gpu-1-mig-b, key: unhealthy", "device: gpu-9, key: unhealthy", `taints[0].device: "gpu-9" is not a device of this GPU`},
		"MIG taint without device": {"device: gpu-1-mig-b, key: unhealthy", "key: unhealthy", "taints[0].device: missing; a MIG GPU's taint names one of its sliceDevices"},
		"taint without key":        {"{key: note, effect: None, rule: audit}", "{effect: None}", "taints[1].key: missing"},
		"taint without effect":     {"{key: note, effect: None, rule: audit}", "{key: note}", "taints[1].effect: missing"},
		"bad operator":             {"operator: Exists, effect: NoSchedule", "operator: Matches", `tolerations[0].operator: "Matches" (want Equal or Exists)`},
		"value with Exists":        {"operator: Exists, effect: NoSchedule", "operator: Exists, value: x", "tolerations[0].value: must be empty with operator Exists"},
		"bad effect":               {"operator: Exists, effect: NoSchedule", "operator: Exists, effect: PreferNoSchedule", `tolerations[0].effect: "PreferNoSchedule"`},
		"tolerations on a parent":  {"- name: alt\n", "- name: alt\n      tolerations: [{operator: Exists}]\n", "a request with alternatives has no deviceClass, count, all, selectors, tolerations"},
	}
	docs := map[string]parseErrorCase{}
	for name, tc := range cases {
		doc := strings.Replace(taintedFile, tc.from, tc.to, 1)
		if doc == taintedFile {
			t.Fatalf("%s: %q is not in the file", name, tc.from)
		}
		docs[name] = parseErrorCase{doc, tc.want}
	}
	checkParseErrors(t, "d.yaml", docs)
}

// TestUntolerated: only NoSchedule and NoExecute taints block, on their
// own device, unless a toleration matches by key, value (Equal or
// Exists) and effect; internal/source/kube checks the same table against the
// upstream ToleratesTaint.
func TestUntolerated(t *testing.T) {
	xid := DeviceTaint{Device: "gpu-0", Key: "xid", Value: "79", Effect: TaintEffectNoSchedule}
	cases := map[string]struct {
		taints  []DeviceTaint
		device  string
		tols    []DeviceToleration
		blocked bool
	}{
		"untainted":             {nil, "gpu-0", nil, false},
		"no toleration":         {[]DeviceTaint{xid}, "gpu-0", nil, true},
		"other device":          {[]DeviceTaint{xid}, "gpu-1", nil, false},
		"effect None":           {[]DeviceTaint{{Device: "gpu-0", Key: "x", Effect: TaintEffectNone}}, "gpu-0", nil, false},
		"unknown effect":        {[]DeviceTaint{{Device: "gpu-0", Key: "x", Effect: "Later"}}, "gpu-0", nil, false},
		"NoExecute":             {[]DeviceTaint{{Device: "gpu-0", Key: "x", Effect: TaintEffectNoExecute}}, "gpu-0", nil, true},
		"Equal":                 {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Key: "xid", Operator: "Equal", Value: "79"}}, false},
		"empty operator":        {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Key: "xid", Value: "79"}}, false},
		"Equal other value":     {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Key: "xid", Value: "48"}}, true},
		"Exists":                {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Key: "xid", Operator: "Exists"}}, false},
		"Exists every key":      {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Operator: "Exists"}}, false},
		"other effect":          {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Key: "xid", Operator: "Exists", Effect: TaintEffectNoExecute}}, true},
		"other key":             {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Key: "ecc", Operator: "Exists"}}, true},
		"unknown operator":      {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Key: "xid", Operator: "Lt", Value: "79"}}, true},
		"second taint blocks":   {[]DeviceTaint{xid, {Device: "gpu-0", Key: "ecc", Effect: TaintEffectNoExecute}}, "gpu-0", []DeviceToleration{{Key: "xid", Operator: "Exists"}}, true},
		"empty key Equal value": {[]DeviceTaint{xid}, "gpu-0", []DeviceToleration{{Value: "79"}}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, blocked := Untolerated(tc.taints, tc.device, tc.tols)
			if blocked != tc.blocked {
				t.Errorf("blocked = %v, want %v", blocked, tc.blocked)
			}
		})
	}
}
