package planout

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// TestHealthOf: each GPU with XIDs gets its kind and fix: the plan's
// DeviceTaintRules for a DRA GPU, cordoning its node for another, nothing
// for application XIDs only.
func TestHealthOf(t *testing.T) {
	p := &plan.Plan{Tainted: []plan.TaintedGPU{{Node: "dra-a", UUID: "GPU-a0", XID: 79, Rules: []string{"gpupack-unhealthy-dra-a-gpu-0"}}}}
	got := HealthOf([]usage.DeviceHealth{
		{Node: "dra-a", UUID: "GPU-a0", GPU: "0", XIDs: []int{79}},
		{Node: "plugin-b", UUID: "GPU-b1", GPU: "1", XIDs: []int{13, 48}},
		{Node: "plugin-b", UUID: "GPU-b2", GPU: "2", XIDs: []int{31}},
	}, p)
	type row struct {
		uuid     string
		critical int
		rules    []string
		fix      string
	}
	var rows []row
	for _, g := range got {
		rows = append(rows, row{g.UUID, g.Critical, g.TaintRules, g.Fix[:strings.IndexAny(g.Fix, "(:")]})
	}
	want := []row{
		{"GPU-a0", 79, []string{"gpupack-unhealthy-dra-a-gpu-0"}, "kubectl apply -f dra-device-taint-rules.yaml "},
		{"GPU-b1", 48, nil, "kubectl cordon plugin-b, drain its GPU pods, and reset or replace the GPU "},
		{"GPU-b2", 0, nil, "none needed"},
	}
	if d := cmp.Diff(want, rows, cmp.AllowUnexported(row{})); d != "" {
		t.Errorf("health (-want +got):\n%s", d)
	}
	if got := HealthOf(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("HealthOf(nil) = %#v, want empty and not nil (read, none reported)", got)
	}
}

// TestReportHealth: without a plan, a DRA GPU of the report is pointed at
// the DeviceTaintRule that gpupack plan writes, a device plugin GPU at
// cordoning its node, and application XIDs at nothing.
func TestReportHealth(t *testing.T) {
	r := &usage.Report{
		Devices: []usage.DeviceUsage{
			{Device: usage.Device{Node: "dra-a", UUID: "GPU-a0", GPU: "0"}, DRADevice: "gpu.nvidia.com/dra-a/gpu-0"},
			{Device: usage.Device{Node: "plugin-b", UUID: "GPU-b1", GPU: "1"}},
		},
		Health: []usage.DeviceHealth{
			{Node: "dra-a", UUID: "GPU-a0", GPU: "0", XIDs: []int{79}},
			{Node: "plugin-b", UUID: "GPU-b1", GPU: "1", XIDs: []int{48}},
			{Node: "plugin-b", UUID: "GPU-b2", GPU: "2", XIDs: []int{31}},
		},
	}
	var fixes []string
	for _, g := range ReportHealth(r) {
		fixes = append(fixes, g.Fix[:strings.IndexAny(g.Fix, "(:")])
	}
	want := []string{"gpupack plan writes a DeviceTaintRule for DRA device gpu.nvidia.com/dra-a/gpu-0 ", "kubectl cordon plugin-b, drain its GPU pods, and reset or replace the GPU ", "none needed"}
	if d := cmp.Diff(want, fixes); d != "" {
		t.Errorf("fixes (-want +got):\n%s", d)
	}
}
