package diagnose

import (
	"slices"
	"testing"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/placement"
)

// TestClaimLinesCounter: a request that shared counters stop has a line
// naming the counter, its set, the node and GPU, and the figures.
func TestClaimLinesCounter(t *testing.T) {
	lines := claimLines([]diagnose.ClaimFacts{{Claim: "c", Request: "gpu", Class: "mig.nvidia.com", Needed: 1, Offered: 18, Accepted: 7,
		Counter: &placement.CounterShortfall{GPU: 0, Set: "gpu-0-counter-set", Counter: "multiprocessors", Needed: 16, Left: 0, Blocked: 7}, CounterNode: "n"}})
	want := "counter:  multiprocessors of counter set gpu-0-counter-set on n GPU 0: 0 left, a device needs 16; it excludes 7 accepted device(s) no claim holds"
	if !slices.Contains(lines, want) {
		t.Errorf("lines %q lack %q", lines, want)
	}
}
