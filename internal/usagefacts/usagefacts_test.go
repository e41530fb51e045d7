package usagefacts

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/usage"
)

// TestFileKeepsMeasuredZero checks that a measured 0 (no activity, no VRAM)
// is written as 0 in the usage file and only unknown figures are left out.
func TestFileKeepsMeasuredZero(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	zero := func() *float64 { v := 0.0; return &v }
	one := func() *float64 { v := 1.0; return &v }
	r := &usage.Report{Start: start, End: start.Add(time.Hour), Pods: []usage.PodUsage{
		{Namespace: "a", Pod: "idle", VRAMUsedMiB: usage.Percentiles{P50: usage.Known(0), P95: usage.Known(0), Max: usage.Known(0)},
			Pattern: usage.Pattern{Name: usage.IdleHeld, MeanActivity: usage.Known(0), IdleRatio: usage.Known(1)}},
		{Namespace: "a", Pod: "vram-only", VRAMUsedMiB: usage.Percentiles{P95: usage.Known(0.4)}, Pattern: usage.Pattern{Name: usage.UnknownPattern}},
		{Namespace: "a", Pod: "unknown", Pattern: usage.Pattern{Name: usage.UnknownPattern}},
	}}
	want := []diagnose.UsageFilePod{
		{Pod: "a/idle", Activity: zero(), Pattern: "idle-held", VRAMUsedP95: "0Mi", IdleHeldRatio: one()},
		{Pod: "a/vram-only", VRAMUsedP95: "0Mi"},
	}
	if diff := cmp.Diff(want, File(r).Pods); diff != "" {
		t.Errorf("usage file pods (-want +got):\n%s", diff)
	}
}
