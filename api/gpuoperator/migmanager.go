package gpuoperator

import (
	"fmt"
	"maps"
	"slices"

	"sigs.k8s.io/yaml"
)

// The labels NVIDIA's mig-manager (k8s-mig-manager, from NVIDIA/mig-parted:
// pkg/mig/reconfigure/reconfigure.go, formerly
// deployments/container/reconfigure-mig.sh) writes while it applies the
// configuration that MIGConfigLabel names.
const (
	// MIGConfigStateLabel reports the progress of the last change of
	// MIGConfigLabel: MIGStatePending while the change runs, MIGStateRebooting
	// while the node reboots to change a GPU's MIG mode, then MIGStateSuccess
	// or MIGStateFailed.
	MIGConfigStateLabel = "nvidia.com/mig.config.state"

	MIGStatePending   = "pending"
	MIGStateRebooting = "rebooting"
	MIGStateSuccess   = "success"
	MIGStateFailed    = "failed"
)

// The GPU operator deploys each of its node agents only on nodes whose
// nvidia.com/gpu.deploy.<agent> label is "true". mig-manager sets the labels
// of the agents that hold GPUs to DeployPausedForMIGChange while it changes
// the MIG configuration, so that their pods leave the node, and back to
// "true" when it is done, whether it succeeded or failed; a label that was
// "false" stays "false".
const (
	DeployDevicePluginLabel        = "nvidia.com/gpu.deploy.device-plugin"
	DeployGPUFeatureDiscoveryLabel = "nvidia.com/gpu.deploy.gpu-feature-discovery"
	DeployDCGMExporterLabel        = "nvidia.com/gpu.deploy.dcgm-exporter"
	DeployDCGMLabel                = "nvidia.com/gpu.deploy.dcgm"
	DeployNVSMLabel                = "nvidia.com/gpu.deploy.nvsm"
	// DeployClientLabel selects third-party GPU clients; mig-manager pauses
	// it only on a node that carries it.
	DeployClientLabel = "nvidia.com/gpu.deploy.client"

	DeployPausedForMIGChange = "paused-for-mig-change"
	DeployTrue               = "true"
	DeployFalse              = "false"
)

// MIGPausedDeployLabels are the deploy labels mig-manager always pauses
// (DeployClientLabel only where present), in the order it writes them.
var MIGPausedDeployLabels = []string{
	DeployDevicePluginLabel,
	DeployGPUFeatureDiscoveryLabel,
	DeployDCGMExporterLabel,
	DeployDCGMLabel,
	DeployNVSMLabel,
}

// The ConfigMap that the GPU operator mounts into mig-manager when its
// ClusterPolicy names none (migManager.config.name; controllers/
// object_controls.go and assets/state-mig-manager/0400_configmap.yaml of
// NVIDIA/gpu-operator): the mig-parted configuration file under one key,
// in the operator's namespace.
const (
	MIGPartedConfigMapName = "default-mig-parted-config"
	MIGPartedConfigMapKey  = "config.yaml"
	// OperatorNamespace is the namespace the GPU operator's Helm chart is
	// installed in by NVIDIA's instructions, and gpupack's configurations
	// with it.
	OperatorNamespace = "gpu-operator"
)

// migPartedVersion is the only version of the mig-parted configuration
// format.
const migPartedVersion = "v1"

// allDevices is the devices value that selects every GPU of a node.
const allDevices = "all"

// ParseMIGPartedConfig reads a mig-parted configuration file (version v1)
// into its named configurations, checking what mig-parted checks when it
// reads one (api/spec/v1/spec.go and pkg/types/mig_config.go of
// NVIDIA/mig-parted): the version, at least one configuration of at least
// one group, devices "all" or a list of GPU indices, mig-devices present
// when mig-enabled is true (not all zero) and empty when it is false. Each group's Devices is
// "all" or a []int, as AppendMIGGroup makes them. Unknown fields are
// errors; device-filter, which selects GPUs by PCI device ID, is one of
// them.
func ParseMIGPartedConfig(data []byte) (map[string][]MIGDeviceConfig, error) {
	var f struct {
		Version    string                     `json:"version"`
		MIGConfigs map[string][]migDeviceFile `json:"mig-configs"`
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("mig-parted configuration: %w", err)
	}
	if f.Version != migPartedVersion {
		return nil, fmt.Errorf("mig-parted configuration: version %q, want %q", f.Version, migPartedVersion)
	}
	if len(f.MIGConfigs) == 0 {
		return nil, fmt.Errorf("mig-parted configuration: mig-configs is empty; name at least one configuration")
	}
	out := make(map[string][]MIGDeviceConfig, len(f.MIGConfigs))
	for _, name := range slices.Sorted(maps.Keys(f.MIGConfigs)) {
		groups := f.MIGConfigs[name]
		if len(groups) == 0 {
			return nil, fmt.Errorf("mig-parted configuration %q: no device group; give at least one", name)
		}
		for i, g := range groups {
			parsed, err := g.config()
			if err != nil {
				return nil, fmt.Errorf("mig-parted configuration %q, group %d: %w", name, i, err)
			}
			out[name] = append(out[name], parsed)
		}
	}
	return out, nil
}

// migDeviceFile is one device group as the file holds it: the fields that
// mig-parted requires are pointers, so that a missing one is told apart.
type migDeviceFile struct {
	Devices    any             `json:"devices"`
	MIGEnabled *bool           `json:"mig-enabled"`
	MIGDevices *map[string]int `json:"mig-devices"`
}

func (g migDeviceFile) config() (MIGDeviceConfig, error) {
	if g.MIGEnabled == nil {
		return MIGDeviceConfig{}, fmt.Errorf("mig-enabled is missing")
	}
	devices, err := parseDevices(g.Devices)
	if err != nil {
		return MIGDeviceConfig{}, err
	}
	c := MIGDeviceConfig{Devices: devices, MIGEnabled: *g.MIGEnabled}
	switch {
	case c.MIGEnabled && g.MIGDevices == nil:
		return MIGDeviceConfig{}, fmt.Errorf("mig-enabled is true but mig-devices is missing (write {} for MIG mode without devices)")
	case !c.MIGEnabled && g.MIGDevices != nil && len(*g.MIGDevices) > 0:
		return MIGDeviceConfig{}, fmt.Errorf("mig-devices %v on GPUs whose mig-enabled is false", *g.MIGDevices)
	case c.MIGEnabled:
		c.MIGDevices = *g.MIGDevices
	}
	total := 0
	for profile, n := range c.MIGDevices {
		if n < 0 {
			return MIGDeviceConfig{}, fmt.Errorf("mig-devices %q: count %d is negative", profile, n)
		}
		total += n
	}
	if len(c.MIGDevices) > 0 && total == 0 {
		return MIGDeviceConfig{}, fmt.Errorf("mig-devices %v: every count is 0 (write {} for MIG mode without devices)", c.MIGDevices)
	}
	return c, nil
}

// parseDevices reads a devices value: "all" or a list of GPU indices.
func parseDevices(v any) (any, error) {
	switch d := v.(type) {
	case string:
		if d == allDevices {
			return d, nil
		}
	case []any:
		out := make([]int, len(d))
		for i, x := range d {
			f, ok := x.(float64)
			if !ok || f != float64(int(f)) || f < 0 {
				return nil, fmt.Errorf("devices[%d] = %v: want a GPU index (0, 1, ...)", i, x)
			}
			out[i] = int(f)
		}
		return out, nil
	}
	return nil, fmt.Errorf("devices = %v: want \"all\" or a list of GPU indices", v)
}

// GPUs returns the indices of the GPUs that the group selects on a node
// of n GPUs, or says which index the node does not have.
func (g MIGDeviceConfig) GPUs(n int) ([]int, error) {
	switch d := g.Devices.(type) {
	case string:
		if d == allDevices {
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			return all, nil
		}
	case []int:
		for _, i := range d {
			if i < 0 || i >= n {
				return nil, fmt.Errorf("GPU %d does not exist on a node of %d GPUs (indices 0 to %d)", i, n, n-1)
			}
		}
		return d, nil
	}
	return nil, fmt.Errorf("devices = %v: want \"all\" or a list of GPU indices", g.Devices)
}

// DeployLabelsPaused returns the deploy labels that mig-manager writes
// before it changes the MIG configuration of a node labelled labels: each
// of MIGPausedDeployLabels, and DeployClientLabel where present, becomes
// DeployPausedForMIGChange unless it is "false".
func DeployLabelsPaused(labels map[string]string) map[string]string {
	return deployLabels(labels, DeployPausedForMIGChange)
}

// DeployLabelsRestored returns the deploy labels that mig-manager writes
// when it is done, whether it succeeded or failed: each becomes "true"
// unless it is "false".
func DeployLabelsRestored(labels map[string]string) map[string]string {
	return deployLabels(labels, DeployTrue)
}

func deployLabels(labels map[string]string, value string) map[string]string {
	keys := MIGPausedDeployLabels
	if _, ok := labels[DeployClientLabel]; ok {
		keys = append(slices.Clone(keys), DeployClientLabel)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = value
		if labels[k] == DeployFalse {
			out[k] = DeployFalse
		}
	}
	return out
}
