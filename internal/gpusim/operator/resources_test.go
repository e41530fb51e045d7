package operator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/plan"
)

func TestMIGDevices(t *testing.T) {
	h100 := gpu.Default().MustLookup("H100-80GB")
	l4 := gpu.Default().MustLookup("L4")
	mig := func(devices any, counts map[string]int) gpuoperator.MIGDeviceConfig {
		return gpuoperator.MIGDeviceConfig{Devices: devices, MIGEnabled: true, MIGDevices: counts}
	}
	whole := func(devices any) gpuoperator.MIGDeviceConfig { return gpuoperator.MIGDeviceConfig{Devices: devices} }
	cases := map[string]struct {
		model   *gpu.Model
		gpus    int
		groups  []gpuoperator.MIGDeviceConfig
		want    Devices
		wantErr string
	}{
		"all disabled": {h100, 8, []gpuoperator.MIGDeviceConfig{whole("all")}, Devices{Whole: 8, MIG: map[string]int64{}}, ""},
		"all 1g.10gb": {h100, 8, []gpuoperator.MIGDeviceConfig{mig("all", map[string]int{"1g.10gb": 7})},
			Devices{MIG: map[string]int64{"1g.10gb": 56}}, ""},
		"mixed per GPU, as plan writes it": {h100, 4, []gpuoperator.MIGDeviceConfig{
			mig([]int{0, 1}, map[string]int{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
			whole([]int{2}),
			mig([]int{3}, map[string]int{"7g.80gb": 1}),
		}, Devices{Whole: 1, MIG: map[string]int64{"3g.40gb": 2, "2g.20gb": 2, "1g.10gb": 4, "7g.80gb": 1}}, ""},
		"MIG mode without devices": {h100, 2, []gpuoperator.MIGDeviceConfig{mig("all", map[string]int{})}, Devices{MIG: map[string]int64{}}, ""},
		"a profile the model lacks": {h100, 1, []gpuoperator.MIGDeviceConfig{mig("all", map[string]int{"1g.5gb": 7})},
			Devices{}, `group 0: mig-devices map[1g.5gb:7] on one H100-80GB: MIG profile "1g.5gb" does not exist`},
		"more than one GPU holds": {h100, 1, []gpuoperator.MIGDeviceConfig{mig("all", map[string]int{"1g.10gb": 8})},
			Devices{}, "need 8 compute slices, the GPU has 7"},
		"MIG on a model without it": {l4, 1, []gpuoperator.MIGDeviceConfig{mig("all", map[string]int{"1g.6gb": 4})},
			Devices{}, "MIG is enabled on L4, which has no MIG"},
		"MIG on a model not listed": {nil, 1, []gpuoperator.MIGDeviceConfig{mig("all", map[string]int{"1g.10gb": 1})},
			Devices{}, "catalogue does not list"},
		"whole GPUs of a model not listed": {nil, 2, []gpuoperator.MIGDeviceConfig{whole("all")}, Devices{Whole: 2, MIG: map[string]int64{}}, ""},
		"a GPU the node lacks": {h100, 2, []gpuoperator.MIGDeviceConfig{whole([]int{0, 1, 2})},
			Devices{}, "group 0: GPU 2 does not exist on a node of 2 GPUs"},
		"a GPU no group selects": {h100, 3, []gpuoperator.MIGDeviceConfig{whole([]int{0, 2})},
			Devices{}, "GPU 1 of 3 is selected by no group"},
		"a GPU two groups select": {h100, 2, []gpuoperator.MIGDeviceConfig{whole("all"), mig([]int{1}, map[string]int{"7g.80gb": 1})},
			Devices{}, "GPU 1 is selected by groups 0 and 1"},
	}
	for name, tc := range cases {
		got, err := MIGDevices(tc.model, tc.gpus, tc.groups)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: devices (-want +got):\n%s", name, diff)
		}
	}
}

func TestSharingOf(t *testing.T) {
	replicated := func(renamed bool, name string, replicas int) *plan.ReplicatedResources {
		return &plan.ReplicatedResources{RenameByDefault: renamed, Resources: []plan.ReplicatedResource{{Name: name, Devices: "all", Replicas: replicas}}}
	}
	cases := map[string]struct {
		config  plan.DevicePluginConfig
		want    Sharing
		wantErr string
	}{
		"no sharing": {plan.DevicePluginConfig{Version: "v1", Flags: &plan.DevicePluginFlags{MIGStrategy: "mixed"}}, noSharing, ""},
		"time-slicing renamed": {plan.DevicePluginConfig{Version: "v1", Sharing: &plan.DevicePluginSharing{TimeSlicing: replicated(true, "nvidia.com/gpu", 4)}},
			Sharing{Strategy: StrategyTimeSlicing, Replicas: 4, Renamed: true}, ""},
		"MPS before time-slicing": {plan.DevicePluginConfig{Version: "v1", Sharing: &plan.DevicePluginSharing{
			TimeSlicing: replicated(true, "nvidia.com/gpu", 4), MPS: replicated(false, "nvidia.com/gpu", 3)}},
			Sharing{Strategy: StrategyMPS, Replicas: 3}, ""},
		"another version": {plan.DevicePluginConfig{Version: "v2"}, Sharing{}, `version "v2"`},
		"one replica": {plan.DevicePluginConfig{Version: "v1", Sharing: &plan.DevicePluginSharing{TimeSlicing: replicated(true, "nvidia.com/gpu", 1)}},
			Sharing{}, "at least 2"},
		"MIG devices replicated": {plan.DevicePluginConfig{Version: "v1", Sharing: &plan.DevicePluginSharing{TimeSlicing: replicated(false, "nvidia.com/mig-1g.10gb", 2)}},
			Sharing{}, "replicates only nvidia.com/gpu"},
	}
	for name, tc := range cases {
		got, err := SharingOf(tc.config)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if got != tc.want {
			t.Errorf("%s: sharing %+v, want %+v", name, got, tc.want)
		}
	}
}

func TestResources(t *testing.T) {
	mixed := Devices{Whole: 2, MIG: map[string]int64{"1g.10gb": 14, "3g.40gb": 2}}
	cases := map[string]struct {
		devices Devices
		sharing Sharing
		want    map[corev1.ResourceName]int64
	}{
		"whole GPUs and MIG devices": {mixed, noSharing, map[corev1.ResourceName]int64{
			"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 14, "nvidia.com/mig-3g.40gb": 2}},
		"time slices renamed": {Devices{Whole: 8}, Sharing{Strategy: StrategyTimeSlicing, Replicas: 4, Renamed: true},
			map[corev1.ResourceName]int64{"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 32}},
		"time slices under the GPU's name": {Devices{Whole: 8}, Sharing{Strategy: StrategyTimeSlicing, Replicas: 4},
			map[corev1.ResourceName]int64{"nvidia.com/gpu": 32}},
		"every GPU in MIG mode": {Devices{MIG: map[string]int64{"7g.80gb": 8}}, noSharing,
			map[corev1.ResourceName]int64{"nvidia.com/gpu": 0, "nvidia.com/mig-7g.80gb": 8}},
	}
	for name, tc := range cases {
		if diff := cmp.Diff(tc.want, Resources(tc.devices, tc.sharing)); diff != "" {
			t.Errorf("%s: resources (-want +got):\n%s", name, diff)
		}
	}
}

func TestFeatureLabels(t *testing.T) {
	const product = "NVIDIA-H100-80GB-HBM3"
	cases := map[string]struct {
		sharing Sharing
		product string
		want    map[string]string
	}{
		"none": {noSharing, product, map[string]string{"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.product": product}},
		"renamed time slices keep the product": {Sharing{StrategyTimeSlicing, 4, true}, product,
			map[string]string{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": product}},
		"shared under the GPU's name is -SHARED": {Sharing{StrategyMPS, 2, false}, product,
			map[string]string{"nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.product": product + "-SHARED"}},
		"unshared again loses -SHARED": {noSharing, product + "-SHARED",
			map[string]string{"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.product": product}},
	}
	for name, tc := range cases {
		if diff := cmp.Diff(tc.want, featureLabels(tc.sharing, tc.product)); diff != "" {
			t.Errorf("%s: labels (-want +got):\n%s", name, diff)
		}
	}
}
