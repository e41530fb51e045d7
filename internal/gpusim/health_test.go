package gpusim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// TestXIDsReachTheFacts: a scenario's XIDs are served as dcgm-exporter's
// DCGM_FI_DEV_XID_ERRORS gauge on every series of the GPU (its MIG
// instances' too), and usage reads them per GPU: a critical XID (79, fallen
// off the bus) makes the GPU unhealthy in the facts, an application XID
// (13) does not, and a GPU that reported none is not listed.
func TestXIDsReachTheFacts(t *testing.T) {
	doc := strings.Replace(small, `mig: {"2": [3g.40gb, 4g.40gb]}}`, `mig: {"2": [3g.40gb, 4g.40gb]}, xids: {"1": 13, "2": 79}}`, 1)
	s, err := Parse([]byte(doc), "xids.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteMetrics(&b, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := `DCGM_FI_DEV_XID_ERRORS{gpu="2",UUID="GPU-00000001-0000-4000-8000-000000000003",pci_bus_id="00000000:28:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2",Hostname="n1",DCGM_FI_DRIVER_VERSION="550.90.07"} 79`; !strings.Contains(b.String(), want) {
		t.Errorf("exposition lacks %s:\n%s", want, b.String())
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(s.Duration.D()), Step: time.Second}
	r, err := usage.Account(usage.Input{Window: w, Series: s.Series(start, w), Pricing: usage.Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		t.Fatal(err)
	}
	want := []usage.DeviceHealth{
		{Node: "n1", UUID: "GPU-00000001-0000-4000-8000-000000000002", GPU: "1", XIDs: []int{13}},
		{Node: "n1", UUID: "GPU-00000001-0000-4000-8000-000000000003", GPU: "2", XIDs: []int{79}},
	}
	if diff := cmp.Diff(want, r.Health); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]usage.UnhealthyGPU{{Node: "n1", UUID: "GPU-00000001-0000-4000-8000-000000000003", XID: 79}}, r.Facts().Unhealthy); diff != "" {
		t.Errorf("unhealthy GPUs in the facts (-want +got):\n%s", diff)
	}
	if _, err := Parse([]byte(strings.Replace(doc, `"2": 79`, `"7": 79`, 1)), "bad.yaml", gpu.Default()); err == nil || !strings.Contains(err.Error(), `nodes[0].xids.7: "7" is not a GPU index of this node (0..2)`) {
		t.Errorf("an XID of GPU 7: err = %v", err)
	}
}
