package change

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// Verify checks that a node's allocatable shows exactly the device-plugin
// resources the change promised: each promised resource at its count, and
// no other GPU resource (nvidia.com/gpu, nvidia.com/gpu.shared,
// nvidia.com/mig-*) above zero.
func Verify(want, got map[string]int64) error {
	var diffs []string
	for _, r := range slices.Sorted(maps.Keys(want)) {
		if got[r] != want[r] {
			diffs = append(diffs, fmt.Sprintf("%s %d, want %d", r, got[r], want[r]))
		}
	}
	for _, r := range slices.Sorted(maps.Keys(got)) {
		if _, promised := want[r]; !promised && cluster.GPUResource(r) && got[r] != 0 {
			diffs = append(diffs, fmt.Sprintf("%s %d, want none", r, got[r]))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("allocatable shows %s", strings.Join(diffs, ", "))
	}
	return nil
}
