package gpupack

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// AnnotationDevices records on a pod the GPUs it holds on its node: GPU
// indices in the node's GPU order, comma-separated, each followed by
// ":<slice>" for a MIG slice (its index in the GPU's MIG layout), e.g. "3",
// "0,1" or "2:4". Shares of time-sliced and MPS GPUs are counted per GPU,
// so a replica is recorded as its GPU.
const AnnotationDevices = "gpupack.io/gpu-devices"

// FormatDevices writes devices in AnnotationDevices' format.
func FormatDevices(devices []cluster.Device) string {
	parts := make([]string, len(devices))
	for i, d := range devices {
		parts[i] = strconv.Itoa(d.GPU)
		if d.Slice >= 0 {
			parts[i] += ":" + strconv.Itoa(d.Slice)
		}
	}
	return strings.Join(parts, ",")
}

// ParseDevices reads AnnotationDevices' format; Milli and Memory are left
// zero, for placement.AssignmentAt to fill in.
func ParseDevices(s string) ([]cluster.Device, error) {
	var out []cluster.Device
	for part := range strings.SplitSeq(s, ",") {
		gpuText, sliceText, hasSlice := strings.Cut(strings.TrimSpace(part), ":")
		g, err := strconv.Atoi(gpuText)
		if err != nil || g < 0 {
			return nil, fmt.Errorf("%s=%q: GPU %q is not an index (want e.g. \"3\", \"0,1\" or \"2:4\")", AnnotationDevices, s, gpuText)
		}
		d := cluster.Device{GPU: g, Slice: -1}
		if hasSlice {
			if d.Slice, err = strconv.Atoi(sliceText); err != nil || d.Slice < 0 {
				return nil, fmt.Errorf("%s=%q: MIG slice %q is not an index", AnnotationDevices, s, sliceText)
			}
		}
		out = append(out, d)
	}
	return out, nil
}
