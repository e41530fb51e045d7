package diagnose

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/usage"
)

func TestPendingWaits(t *testing.T) {
	now := time.Date(2026, 1, 12, 0, 0, 0, 0, time.UTC)
	rep := &Report{Findings: []Finding{
		{Pod: "ml/a", Request: "1 GPU", Cause: Memory},
		{Pod: "ml/b", Request: "MIG 1g.10gb", Cause: Memory},
		{Pod: "web/cpu", Request: "no GPU", Note: "asks for no GPU"},
	}}
	created := map[string]time.Time{"ml/a": now.Add(-90 * time.Second)}
	got := PendingWaits(rep, created, now)
	want := []usage.PodWait{
		{Namespace: "ml", Shape: "1 GPU", Cause: string(Memory), Seconds: usage.Known(90)},
		{Namespace: "ml", Shape: "MIG 1g.10gb", Cause: string(Memory)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("PendingWaits (-want +got):\n%s", d)
	}
}
