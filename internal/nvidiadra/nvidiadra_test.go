package nvidiadra

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes an opaque config as the driver's StrictDecoder
// does (api/nvidia.com/resource/v1beta1/api.go: unknown fields fail) into
// the mirror of its types, and checks what its Validate checks
// (validate.go) for the fields gpupack writes.
func decodeStrict(t *testing.T, raw []byte) GpuConfig {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c GpuConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("the driver's strict decoding refuses %s: %v", raw, err)
	}
	if c.APIVersion != ConfigAPI || c.Kind != KindGpuConfig {
		t.Errorf("%s: apiVersion %q kind %q, want %s %s", raw, c.APIVersion, c.Kind, ConfigAPI, KindGpuConfig)
	}
	s := c.Sharing
	switch {
	case s == nil:
		t.Errorf("%s: no sharing", raw)
	case s.Strategy == TimeSlicingStrategy:
		if s.MpsConfig != nil || s.TimeSlicingConfig == nil {
			t.Errorf("%s: TimeSlicing wants timeSlicingConfig only", raw)
		} else if i := s.TimeSlicingConfig.Interval; i != "Default" && i != "Short" && i != "Medium" && i != "Long" {
			t.Errorf("%s: interval %q is none of the driver's", raw, i)
		}
	case s.Strategy == MPSStrategy:
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
// decode strictly into the driver's types, and that the driver's own
// published examples decode strictly into gpupack's mirror of them (so the
// mirror's field names are the driver's).
func TestOpaqueConfigDecodesAsTheDriver(t *testing.T) {
	four := 25
	cases := map[string]struct {
		config GpuConfig
		want   GpuSharing
	}{
		"time-slicing": {TimeSlicing(), GpuSharing{Strategy: "TimeSlicing", TimeSlicingConfig: &TimeSlicingConfig{Interval: "Default"}}},
		"mps 4 clients": {MPS(25, 20000), GpuSharing{Strategy: "MPS", MpsConfig: &MpsConfig{DefaultActiveThreadPercentage: &four,
			DefaultPinnedDeviceMemoryLimit: MPS(25, 20000).Sharing.MpsConfig.DefaultPinnedDeviceMemoryLimit}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			claim, err := SharedClaim("ml", "c", tc.config)
			if err != nil {
				t.Fatal(err)
			}
			cfg := claim.Spec.Devices.Config
			if len(cfg) != 1 || cfg[0].Opaque == nil || cfg[0].Opaque.Driver != Driver || !cmp.Equal(cfg[0].Requests, []string{claim.Spec.Devices.Requests[0].Name}) {
				t.Fatalf("claim config %+v: want one opaque config for driver %s and the claim's request", cfg, Driver)
			}
			got := decodeStrict(t, cfg[0].Opaque.Parameters.Raw)
			if diff := cmp.Diff(tc.want, *got.Sharing); diff != "" {
				t.Errorf("sharing (-want +got):\n%s", diff)
			}
		})
	}
	if q := MPS(25, 20000).Sharing.MpsConfig.DefaultPinnedDeviceMemoryLimit; q.Value() != 20000<<20 {
		t.Errorf("pinned memory limit %s, want 20000Mi", q)
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
	if err := dec.Decode(&GpuConfig{}); err == nil {
		t.Error("a config with sharing.replicas decoded; the driver has no such field")
	}
}

func TestDeviceClasses(t *testing.T) {
	cs := DeviceClasses([]string{"1g.10gb"})
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
