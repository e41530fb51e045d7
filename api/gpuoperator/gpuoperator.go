// Package gpuoperator holds the NVIDIA GPU operator's words that gpupack
// writes and reads: the node labels that select a device plugin or
// mig-parted configuration, the mig-parted configuration format (written
// and parsed), how gpupack names the configurations it writes, and the
// labels and ConfigMap through which mig-manager is driven and reports its
// progress. plan (a pool's sharing plan) and diagnose (one pending pod's
// MIG re-layout) both write them with this package, so they write them
// alike; the act of applying a plan and the GPU operator's stand-in in
// tests read them here.
//
// gpuoperator is pure: it imports only package gpu and sigs.k8s.io/yaml,
// never client-go, net/http or a CLI library.
package gpuoperator

import (
	"encoding/json"
	"maps"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/gpu"
)

// The labels the NVIDIA GPU operator reads to configure a node, and the
// mig-parted configuration that disables MIG on every GPU.
const (
	DevicePluginConfigLabel = "nvidia.com/device-plugin.config"
	MIGConfigLabel          = "nvidia.com/mig.config"
	MIGDisabled             = "all-disabled"
)

// DeployLabelPrefix begins the nvidia.com/gpu.deploy.<agent> labels;
// MIGManagerDeployLabel is "true" on the nodes the GPU operator runs
// mig-manager on.
const (
	DeployLabelPrefix     = "nvidia.com/gpu.deploy."
	MIGManagerDeployLabel = DeployLabelPrefix + "mig-manager"
)

// MIGDeviceConfig is one device group of a mig-parted configuration.
type MIGDeviceConfig struct {
	// Devices is "all" or the GPU indices of the group.
	Devices    any            `json:"devices"`
	MIGEnabled bool           `json:"mig-enabled"`
	MIGDevices map[string]int `json:"mig-devices,omitempty"`
}

// MarshalJSON writes mig-devices whenever MIG is enabled, as {} when the
// group has no devices: mig-parted refuses a MIG-enabled group without it.
func (c MIGDeviceConfig) MarshalJSON() ([]byte, error) {
	if !c.MIGEnabled {
		type omitted MIGDeviceConfig // the same fields, without this method
		return json.Marshal(omitted(c))
	}
	devices := c.MIGDevices
	if devices == nil {
		devices = map[string]int{}
	}
	return json.Marshal(struct {
		Devices    any            `json:"devices"`
		MIGEnabled bool           `json:"mig-enabled"`
		MIGDevices map[string]int `json:"mig-devices"`
	}{c.Devices, c.MIGEnabled, devices})
}

// AppendMIGGroup adds GPU j with its layout (nil: MIG disabled) to a
// node's device groups, joining the last group when it is the same.
func AppendMIGGroup(groups []MIGDeviceConfig, j int, l gpu.Layout) []MIGDeviceConfig {
	g := MIGDeviceConfig{Devices: []int{j}, MIGEnabled: len(l) > 0}
	if len(l) > 0 {
		g.MIGDevices = l.Counts()
	}
	if k := len(groups) - 1; k >= 0 && groups[k].MIGEnabled == g.MIGEnabled && maps.Equal(groups[k].MIGDevices, g.MIGDevices) {
		groups[k].Devices = append(groups[k].Devices.([]int), j)
		return groups
	}
	return append(groups, g)
}

// MIGPartedConfig renders a mig-parted configuration file of the named
// configurations.
func MIGPartedConfig(configs map[string][]MIGDeviceConfig) ([]byte, error) {
	return yaml.Marshal(map[string]any{"version": "v1", "mig-configs": configs})
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// ConfigName makes a lowercase DNS-label-like name of the parts, at most
// 63 characters, fit for a label value and a configuration's key.
func ConfigName(parts ...string) string {
	s := strings.ToLower(strings.Join(parts, "-"))
	s = strings.Trim(unsafeName.ReplaceAllString(s, "-"), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}
