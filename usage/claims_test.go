package usage

import (
	"strings"
	"testing"
	"time"
)

func TestWarnUnattributedClaims(t *testing.T) {
	end := t0.Add(time.Hour)
	r := &Report{End: end, StepSecond: 30,
		Devices: []DeviceUsage{
			{Device: Device{Node: "n1", GPU: "0", UUID: "GPU-a"}},
			{Device: Device{Node: "n1", GPU: "1", UUID: "GPU-b"}},
		},
		Pods: []PodUsage{{Namespace: "ml", Pod: "labelled", Devices: []string{"n1/0/GPU-a"}}},
	}
	holds := []ClaimHold{
		{Pod: "ml/labelled", Claim: "ml/c1", DeviceID: "gpu.nvidia.com/n1/gpu-0", UUID: "GPU-a", Since: t0},
		// The exporter names no pod on GPU-b: warned.
		{Pod: "ml/unlabelled", Claim: "ml/c2", DeviceID: "gpu.nvidia.com/n1/gpu-1", UUID: "GPU-b", Since: t0},
		// Scheduled in the window's last step: too recent to tell.
		{Pod: "ml/new", Claim: "ml/c3", DeviceID: "gpu.nvidia.com/n1/gpu-1", UUID: "GPU-b", Since: end.Add(-30 * time.Second)},
		// A GPU the report has no series of (another Prometheus, say).
		{Pod: "ml/elsewhere", Claim: "ml/c4", DeviceID: "gpu.nvidia.com/n2/gpu-0", UUID: "GPU-z"},
	}
	r.WarnUnattributedClaims(holds)
	if len(r.Quality.Warnings) != 1 {
		t.Fatalf("warnings %q; want one", r.Quality.Warnings)
	}
	w := r.Quality.Warnings[0]
	if !strings.Contains(w, "ml/unlabelled (claim ml/c2, DRA device gpu.nvidia.com/n1/gpu-1, GPU GPU-b)") || strings.Contains(w, "ml/new") || strings.Contains(w, "ml/labelled") || strings.Contains(w, "elsewhere") {
		t.Errorf("warning %q; want ml/unlabelled only", w)
	}
	r.Quality.Warnings = nil
	r.WarnUnattributedClaims(holds[:1])
	if len(r.Quality.Warnings) != 0 {
		t.Errorf("warnings %q for an attributed claim; want none", r.Quality.Warnings)
	}
}
