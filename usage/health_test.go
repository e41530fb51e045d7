package usage

import (
	"strings"
	"testing"
	"time"

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

// TestHealthReadsPositiveXIDs: the XIDs of a GPU are the distinct positive
// integers its gauge held in the window; 0, negative and fractional values
// and samples outside the window name none, and a GPU with none is left
// out.
func TestHealthReadsPositiveXIDs(t *testing.T) {
	w := Window{Start: time.Unix(0, 0), End: time.Unix(600, 0), Step: time.Minute}
	gauge := func(uuid string, values ...float64) Series {
		s := Series{Metric: XIDErrors, Device: Device{Node: "n1", UUID: uuid, GPU: uuid[len(uuid)-1:]}}
		for i, v := range values {
			s.Samples = append(s.Samples, Sample{TimeMs: int64(i) * 60_000, Value: v})
		}
		return s
	}
	late := gauge("GPU-2", 0)
	late.Samples = append(late.Samples, Sample{TimeMs: 600_000, Value: 79})
	got := health([]Series{
		gauge("GPU-1", 0, 79, 79, 13, 0, 79),
		late,
		gauge("GPU-3", 0, -1, -79, 0.5, 0),
	}, w)
	want := []DeviceHealth{{Node: "n1", UUID: "GPU-1", GPU: "1", XIDs: []int{13, 79}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}
}
