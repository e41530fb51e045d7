package plan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/gpuoperator"
)

// DevicePluginConfig is one named configuration of the NVIDIA device
// plugin (config file version v1).
type DevicePluginConfig struct {
	Version string               `json:"version"`
	Flags   *DevicePluginFlags   `json:"flags,omitempty"`
	Sharing *DevicePluginSharing `json:"sharing,omitempty"`
}

// DevicePluginFlags are the plugin flags the plan sets.
type DevicePluginFlags struct {
	MIGStrategy string `json:"migStrategy"`
}

// DevicePluginSharing is the plugin's sharing section: time-slicing or MPS.
type DevicePluginSharing struct {
	TimeSlicing *ReplicatedResources `json:"timeSlicing,omitempty"`
	MPS         *ReplicatedResources `json:"mps,omitempty"`
}

// ReplicatedResources replicates GPUs as time slices or MPS clients.
// renameByDefault advertises them as nvidia.com/gpu.shared, so that whole
// GPU requests never land on a share by accident.
type ReplicatedResources struct {
	RenameByDefault            bool                 `json:"renameByDefault"`
	FailRequestsGreaterThanOne bool                 `json:"failRequestsGreaterThanOne,omitempty"`
	Resources                  []ReplicatedResource `json:"resources"`
}

// ReplicatedResource is one replicated resource. Devices is always "all":
// the device plugin reads "all", a count or a list of GPUs there, but
// replaces anything but "all" with "all" (it warns that customizing
// devices is not yet supported), so a sharing config shares every GPU of
// the node it labels, and the plan says so.
type ReplicatedResource struct {
	Name     string `json:"name"`
	Devices  string `json:"devices"`
	Replicas int    `json:"replicas"`
}

// allDevices is the only device selection the device plugin honours.
const allDevices = "all"

// MIGDeviceConfig is one device group of a mig-parted configuration: the
// gpuoperator package's, which diagnose writes too.
type MIGDeviceConfig = gpuoperator.MIGDeviceConfig

func devicePluginConfig(m Method, pp PoolPlan) DevicePluginConfig {
	c := DevicePluginConfig{Version: "v1", Flags: &DevicePluginFlags{MIGStrategy: "none"}}
	switch m {
	case MIG:
		c.Flags.MIGStrategy = "mixed"
	case TimeSlicing:
		c.Sharing = &DevicePluginSharing{TimeSlicing: &ReplicatedResources{RenameByDefault: true, FailRequestsGreaterThanOne: true,
			Resources: []ReplicatedResource{{Name: "nvidia.com/gpu", Devices: allDevices, Replicas: pp.TimeSlicingReplicas}}}}
	case MPS:
		c.Sharing = &DevicePluginSharing{MPS: &ReplicatedResources{RenameByDefault: true,
			Resources: []ReplicatedResource{{Name: "nvidia.com/gpu", Devices: allDevices, Replicas: pp.MPSClients}}}}
	}
	return c
}

// addMIGConfig names a node's MIG configuration, reusing the name of an
// identical one of the same pool.
func (pl *Plan) addMIGConfig(pool string, groups []MIGDeviceConfig) string {
	prefix := gpuoperator.ConfigName(pool, "mig")
	n := 0
	for _, name := range slices.Sorted(maps.Keys(pl.MIGParted)) {
		if !strings.HasPrefix(name, prefix+"-") {
			continue
		}
		n++
		if reflect.DeepEqual(pl.MIGParted[name], groups) {
			return name
		}
	}
	name := fmt.Sprintf("%s-%d", prefix, n+1)
	pl.MIGParted[name] = groups
	return name
}

// The ConfigMap the GPU operator's device plugin reads its named configs
// from (devicePlugin.config.name).
const (
	ConfigMapName      = "gpupack-device-plugin-configs"
	ConfigMapNamespace = gpuoperator.OperatorNamespace
)

// DevicePluginConfigMap renders the device plugin's configs as one
// ConfigMap, a key per named config.
func (pl *Plan) DevicePluginConfigMap() ([]byte, error) {
	data := map[string]string{}
	for name, c := range pl.DevicePlugin {
		b, err := yaml.Marshal(c)
		if err != nil {
			return nil, err
		}
		data[name] = string(b)
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]string{"name": ConfigMapName, "namespace": ConfigMapNamespace},
		"data":       data,
	})
}

// MIGPartedConfig renders the mig-parted configuration file.
func (pl *Plan) MIGPartedConfig() ([]byte, error) {
	return gpuoperator.MIGPartedConfig(pl.MIGParted)
}

// NodeLabels renders the labels each changed node gets.
func (pl *Plan) NodeLabels() ([]byte, error) {
	type node struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	}
	nodes := []node{}
	for _, nc := range pl.Nodes {
		if len(nc.Labels) > 0 { // a DRA node whose labels stay
			nodes = append(nodes, node{nc.Node, nc.Labels})
		}
	}
	return yaml.Marshal(map[string]any{"nodes": nodes})
}

// WorkloadRequest is what one workload should request after the plan: an
// entry of workload-requests.yaml, which the admission webhook reads.
type WorkloadRequest struct {
	Workload string `json:"workload"` // namespace/owner, as WorkloadKey names it
	Action   Action `json:"action"`
	Before   string `json:"before"`
	After    After  `json:"after"`
}

// WorkloadRequests renders what each workload should request after the
// change, for the admission webhook that rewrites requests.
func (pl *Plan) WorkloadRequests() ([]byte, error) {
	var out []WorkloadRequest
	for _, d := range pl.Decisions {
		if d.Action == Unplaceable || d.viaClaim() {
			continue
		}
		out = append(out, WorkloadRequest{d.Workload, d.Action, d.Before, d.After})
	}
	return yaml.Marshal(map[string]any{"workloads": out})
}

// ParseWorkloadRequests reads workload-requests.yaml (WorkloadRequests'
// output, or one written by hand in the same form), by workload. Unknown
// fields, a workload listed twice, and an entry without a resource or with
// a count below 1 are errors naming the entry.
func ParseWorkloadRequests(data []byte) (map[string]WorkloadRequest, error) {
	var f struct {
		Workloads []WorkloadRequest `json:"workloads"`
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	out := make(map[string]WorkloadRequest, len(f.Workloads))
	for i, w := range f.Workloads {
		switch {
		case !strings.Contains(w.Workload, "/"):
			return nil, fmt.Errorf("workloads[%d]: workload %q: want namespace/owner", i, w.Workload)
		case w.After.Resource == "":
			return nil, fmt.Errorf("workloads[%d] (%s): after.resource is empty", i, w.Workload)
		case w.After.Count < 1:
			return nil, fmt.Errorf("workloads[%d] (%s): after.count: %d (want at least 1)", i, w.Workload, w.After.Count)
		}
		if _, dup := out[w.Workload]; dup {
			return nil, fmt.Errorf("workloads[%d]: workload %s is listed twice", i, w.Workload)
		}
		out[w.Workload] = w
	}
	return out, nil
}
