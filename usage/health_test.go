package usage

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUnhealthyGPUsFile: the usage file carries the unhealthy GPUs and
// reads them back; an application XID or a GPU listed twice is refused.
func TestUnhealthyGPUsFile(t *testing.T) {
	doc := `apiVersion: gpupack.io/v1alpha1
kind: PodUsage
window: 24h
pods: []
unhealthyGPUs: [{node: dra-1, uuid: GPU-1, xid: 79}]
`
	f, err := ParseFacts([]byte(doc), "u.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []UnhealthyGPU{{Node: "dra-1", UUID: "GPU-1", XID: 79}}
	if diff := cmp.Diff(want, f.Unhealthy); diff != "" {
		t.Errorf("unhealthy (-want +got):\n%s", diff)
	}
	file := f.File()
	if diff := cmp.Diff(want, file.UnhealthyGPUs); diff != "" {
		t.Errorf("written back (-want +got):\n%s", diff)
	}
	for name, tc := range map[string]struct{ from, to, want string }{
		"application XID": {"xid: 79", "xid: 13", "unhealthyGPUs[0].xid: 13 is not an XID that marks a GPU unhealthy"},
		"twice":           {"xid: 79}]", "xid: 79}, {node: dra-1, uuid: GPU-1, xid: 48}]", "unhealthyGPUs[1]: GPU dra-1/GPU-1 is already listed at unhealthyGPUs[0]"},
		"no uuid":         {"uuid: GPU-1, ", "", "unhealthyGPUs[0]: node and uuid are both needed"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseFacts([]byte(strings.Replace(doc, tc.from, tc.to, 1)), "u.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
