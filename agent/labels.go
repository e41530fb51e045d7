package agent

import "strconv"

// GPULabels are the label names of a whole GPU in the agent's series,
// dcgm-exporter's, so that gpupack reads them as it reads DCGM's;
// MIGLabels those of a MIG instance.
var (
	GPULabels = []string{"Hostname", "gpu", "UUID", "modelName"}
	MIGLabels = append(append([]string(nil), GPULabels...), "GPU_I_PROFILE", "GPU_I_ID")
)

// OwnerLabels are the label names of the container a series is of.
var OwnerLabels = []string{"namespace", "pod", "container"}

// DeviceLabelValues are the values of GPULabels, or of MIGLabels for a MIG
// instance, for d on node.
func DeviceLabelValues(node string, d Device) []string {
	v := []string{node, strconv.Itoa(d.Index), d.UUID, d.Model}
	if d.MIGUUID != "" {
		v = append(v, d.MIGProfile, strconv.Itoa(d.MIGInstance))
	}
	return v
}
