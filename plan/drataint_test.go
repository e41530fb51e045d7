package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/internal/testkit/fixture"
	"github.com/gpupack/gpupack/usage"
)

// TestTaintUnhealthy: each DRA device of a GPU that reported a critical XID
// gets a DeviceTaintRule (the whole GPU's device, or every MIG device of a
// MIG GPU) selecting it by driver, pool and device, with its XID (package
// planout's TestDeviceTaintRuleManifests checks the objects rendered from
// them); a GPU of the device plugin gets neither a rule nor a warning (the
// plugin marks it unhealthy itself), and one that the snapshot lacks gets
// a warning, no rule.
func TestTaintUnhealthy(t *testing.T) {
	s := fixture.DRATaintSnapshot(t)
	u := &usage.Facts{Window: 24 * 3600e9, Pods: map[string]usage.PodFacts{}, Unhealthy: []usage.UnhealthyGPU{
		{Node: "dra-a", UUID: "GPU-dra-a-0", XID: 79}, {Node: "dra-a", UUID: "GPU-dra-a-2", XID: 48}, {Node: "plugin", UUID: "GPU-p-0", XID: 79}, {Node: "dra-a", UUID: "GPU-gone", XID: 94},
	}}
	pl, err := Make(context.Background(), s, u, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := []TaintedGPU{
		{Node: "dra-a", UUID: "GPU-dra-a-0", XID: 79, Devices: []string{"gpu.nvidia.com/dra-a/gpu-0"}, Rules: []string{"gpupack-unhealthy-dra-a-gpu-0"}},
		{Node: "dra-a", UUID: "GPU-dra-a-2", XID: 48, Devices: []string{"gpu.nvidia.com/dra-a/gpu-2-mig-3g40gb-9-0", "gpu.nvidia.com/dra-a/gpu-2-mig-3g40gb-9-4"},
			Rules: []string{"gpupack-unhealthy-dra-a-gpu-2-mig-3g40gb-9-0", "gpupack-unhealthy-dra-a-gpu-2-mig-3g40gb-9-4"}},
	}
	if diff := cmp.Diff(want, pl.Tainted); diff != "" {
		t.Errorf("tainted GPUs (-want +got):\n%s", diff)
	}
	wantRules := []DeviceTaintRule{
		{Name: "gpupack-unhealthy-dra-a-gpu-0", Driver: "gpu.nvidia.com", Pool: "dra-a", Device: "gpu-0", XID: 79},
		{Name: "gpupack-unhealthy-dra-a-gpu-2-mig-3g40gb-9-0", Driver: "gpu.nvidia.com", Pool: "dra-a", Device: "gpu-2-mig-3g40gb-9-0", XID: 48},
		{Name: "gpupack-unhealthy-dra-a-gpu-2-mig-3g40gb-9-4", Driver: "gpu.nvidia.com", Pool: "dra-a", Device: "gpu-2-mig-3g40gb-9-4", XID: 48},
	}
	if diff := cmp.Diff(wantRules, pl.TaintRules); diff != "" {
		t.Errorf("taint rules (-want +got):\n%s", diff)
	}
	for _, got := range pl.Warnings {
		if strings.Contains(got, "GPU-p-0") {
			t.Errorf("a warning about the device plugin's GPU GPU-p-0, which the plugin marks unhealthy itself: %q", got)
		}
	}
	for _, w := range []string{"GPU GPU-gone of node dra-a reported XID 94, but no GPU that DRA offers there has that UUID"} {
		found := false
		for _, got := range pl.Warnings {
			found = found || strings.Contains(got, w)
		}
		if !found {
			t.Errorf("no warning says %q: %q", w, pl.Warnings)
		}
	}
	if n := taintRuleName("Pool_A", "gpu/0"); n != "gpupack-unhealthy-pool-a-gpu-0" {
		t.Errorf("taintRuleName = %q", n)
	}
}
