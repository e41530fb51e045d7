package planout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/nvidiadra"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/fixture"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// decodeStrict decodes an opaque config as the driver's StrictDecoder
// does (api/nvidia.com/resource/v1beta1/api.go: unknown fields fail) into
// the mirror of its types, and checks what its Validate checks
// (validate.go) for the fields gpupack writes.
func decodeStrict(t *testing.T, raw []byte) planout.GpuConfig {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c planout.GpuConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("the driver's strict decoding refuses %s: %v", raw, err)
	}
	if c.APIVersion != nvidiadra.ConfigAPI || c.Kind != nvidiadra.KindGpuConfig {
		t.Errorf("%s: apiVersion %q kind %q, want %s %s", raw, c.APIVersion, c.Kind, nvidiadra.ConfigAPI, nvidiadra.KindGpuConfig)
	}
	s := c.Sharing
	switch {
	case s == nil:
		t.Errorf("%s: no sharing", raw)
	case s.Strategy == nvidiadra.TimeSlicingStrategy:
		if s.MpsConfig != nil || s.TimeSlicingConfig == nil {
			t.Errorf("%s: TimeSlicing wants timeSlicingConfig only", raw)
		} else if i := s.TimeSlicingConfig.Interval; i != "Default" && i != "Short" && i != "Medium" && i != "Long" {
			t.Errorf("%s: interval %q is none of the driver's", raw, i)
		}
	case s.Strategy == nvidiadra.MPSStrategy:
		if s.TimeSlicingConfig != nil || s.MpsConfig == nil {
			t.Errorf("%s: MPS wants mpsConfig only", raw)
		} else if p := s.MpsConfig.DefaultActiveThreadPercentage; p != nil && (*p < 0 || *p > 100) {
			t.Errorf("%s: active thread percentage %d outside 0..100", raw, *p)
		}
	default:
		t.Errorf("%s: unknown strategy %q", raw, s.Strategy)
	}
	return c
}

// TestOpaqueConfigDecodesAsTheDriver checks that the configs gpupack writes
// in a shared claim decode strictly into the driver's types, and that the
// driver's own published examples decode strictly into gpupack's mirror of
// them (so the mirror's field names are the driver's).
func TestOpaqueConfigDecodesAsTheDriver(t *testing.T) {
	cases := map[string]struct {
		claim plan.SharedClaim
		want  planout.GpuSharing
	}{
		"time-slicing": {plan.SharedClaim{Namespace: "ml", Name: "c", Method: plan.TimeSlicing},
			planout.GpuSharing{Strategy: "TimeSlicing", TimeSlicingConfig: &planout.TimeSlicingConfig{Interval: "Default"}}},
		"mps 4 clients": {plan.SharedClaim{Namespace: "ml", Name: "c", Method: plan.MPS, MPS: &plan.MPSLimits{ThreadPercent: 25, PinnedMemory: 20000}},
			planout.GpuSharing{Strategy: "MPS", MpsConfig: &planout.MpsConfig{DefaultActiveThreadPercentage: new(25)}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := planout.DRAObjectsOf(&plan.DRAPlan{Claims: []plan.SharedClaim{tc.claim}})
			if err != nil {
				t.Fatal(err)
			}
			claim := objs.Claims[0]
			cfg := claim.Spec.Devices.Config
			if len(cfg) != 1 || cfg[0].Opaque == nil || cfg[0].Opaque.Driver != nvidiadra.Driver || !cmp.Equal(cfg[0].Requests, []string{claim.Spec.Devices.Requests[0].Name}) {
				t.Fatalf("claim config %+v: want one opaque config for driver %s and the claim's request", cfg, nvidiadra.Driver)
			}
			got := decodeStrict(t, cfg[0].Opaque.Parameters.Raw)
			if m := got.Sharing.MpsConfig; m != nil {
				if q := m.DefaultPinnedDeviceMemoryLimit; q == nil || q.Value() != 20000<<20 {
					t.Errorf("pinned memory limit %v, want 20000Mi", q)
				}
				m.DefaultPinnedDeviceMemoryLimit = nil
			}
			if diff := cmp.Diff(tc.want, *got.Sharing); diff != "" {
				t.Errorf("sharing (-want +got):\n%s", diff)
			}
		})
	}
	// Verbatim from the driver at 22407113: demo/specs/quickstart/v1/gpu-test-mps.yaml
	// and gpu-test6.yaml.
	for _, doc := range []string{`
apiVersion: resource.nvidia.com/v1beta1
kind: GpuConfig
sharing:
  strategy: MPS
  mpsConfig:
    defaultActiveThreadPercentage: 50
    defaultPinnedDeviceMemoryLimit: 10Gi
`, `
apiVersion: resource.nvidia.com/v1beta1
kind: GpuConfig
sharing:
  strategy: TimeSlicing
  timeSlicingConfig:
    interval: Long
`} {
		raw, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		decodeStrict(t, raw)
	}
	// And a field the driver lacks is refused, as its strict decoder does.
	dec := json.NewDecoder(strings.NewReader(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","replicas":4}}`))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&planout.GpuConfig{}); err == nil {
		t.Error("a config with sharing.replicas decoded; the driver has no such field")
	}
}

func TestDeviceClasses(t *testing.T) {
	cs := planout.DeviceClasses([]string{"1g.10gb"})
	var names, extended []string
	for _, c := range cs {
		names = append(names, c.Name)
		if c.Spec.ExtendedResourceName != nil {
			extended = append(extended, *c.Spec.ExtendedResourceName)
		}
	}
	if diff := cmp.Diff([]string{"gpu.nvidia.com", "mig.nvidia.com", "mig-1g-10gb.gpu.nvidia.com"}, names); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"}, extended); diff != "" {
		t.Errorf("extended resources (-want +got):\n%s", diff)
	}
}

// TestDeviceTaintRuleManifests: dra-device-taint-rules.yaml holds one
// DeviceTaintRule per rule of the plan, each selecting its device by
// driver, pool and device, with a NoSchedule taint gpupack.io/xid=<XID>,
// and no status.
func TestDeviceTaintRuleManifests(t *testing.T) {
	s := fixture.DRATaintSnapshot(t)
	u := &usage.Facts{Window: 24 * time.Hour, Pods: map[string]usage.PodFacts{}, Unhealthy: []usage.UnhealthyGPU{
		{Node: "dra-a", UUID: "GPU-dra-a-0", XID: 79}, {Node: "dra-a", UUID: "GPU-dra-a-2", XID: 48}}}
	p, err := plan.Make(context.Background(), s, u, plan.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	files, err := planout.Files(p, s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, f := range files {
		if f.Name == planout.FileDRATaintRules {
			out = string(f.Data)
		}
	}
	first := `apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata:
  name: gpupack-unhealthy-dra-a-gpu-0
spec:
  deviceSelector:
    device: gpu-0
    driver: gpu.nvidia.com
    pool: dra-a
  taint:
    effect: NoSchedule
    key: gpupack.io/xid
    value: "79"
`
	if docs := strings.Split(out, "---\n"); len(docs) != 3 || docs[0] != first {
		t.Errorf("%s: %d documents, the first:\n%s\nwant 3, the first:\n%s", planout.FileDRATaintRules, len(docs), docs[0], first)
	}
}
