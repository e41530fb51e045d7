package gpuoperator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMIGPartedConfig(t *testing.T) {
	// An excerpt of the GPU operator's default-mig-parted-config, and a
	// per-GPU configuration as plan writes them.
	const file = `version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
  pool-mig-1:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
    - devices: [2]
      mig-enabled: false
`
	got, err := ParseMIGPartedConfig([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]MIGDeviceConfig{
		"all-disabled": {{Devices: "all"}},
		"all-enabled":  {{Devices: "all", MIGEnabled: true, MIGDevices: map[string]int{}}},
		"all-balanced": {{Devices: "all", MIGEnabled: true, MIGDevices: map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}},
		"pool-mig-1": {
			{Devices: []int{0, 1}, MIGEnabled: true, MIGDevices: map[string]int{"3g.40gb": 2}},
			{Devices: []int{2}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("configurations (-want +got):\n%s", diff)
	}

	// What MIGPartedConfig writes reads back the same.
	rendered, err := MIGPartedConfig(want)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseMIGPartedConfig(rendered)
	if err != nil {
		t.Fatalf("reading back:\n%s\n%v", rendered, err)
	}
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}

func TestParseMIGPartedConfigRefuses(t *testing.T) {
	const head = "version: v1\nmig-configs:\n  c:\n"
	cases := map[string]struct{ file, want string }{
		"another version":        {"version: v2\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: false\n", `version "v2", want "v1"`},
		"no configuration":       {"version: v1\n", "mig-configs is empty"},
		"a configuration empty":  {"version: v1\nmig-configs:\n  c: []\n", `"c": no device group`},
		"mig-enabled missing":    {head + "    - devices: all\n", "mig-enabled is missing"},
		"devices neither":        {head + "    - devices: some\n      mig-enabled: false\n", `devices = some: want "all"`},
		"a device not an index":  {head + "    - devices: [0, 1.5]\n      mig-enabled: false\n", "devices[1] = 1.5"},
		"enabled without device": {head + "    - devices: all\n      mig-enabled: true\n", "mig-devices is missing"},
		"disabled with devices":  {head + "    - devices: all\n      mig-enabled: false\n      mig-devices: {1g.10gb: 7}\n", "mig-enabled is false"},
		"a negative count":       {head + "    - devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb: -1}\n", "is negative"},
		"every count zero":       {head + "    - devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb: 0}\n", "every count is 0"},
		"device-filter":          {head + "    - device-filter: \"0x233010DE\"\n      devices: all\n      mig-enabled: false\n", "device-filter"},
	}
	for name, tc := range cases {
		_, err := ParseMIGPartedConfig([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

func TestMIGDeviceConfigGPUs(t *testing.T) {
	all, err := MIGDeviceConfig{Devices: "all"}.GPUs(3)
	if err != nil || !cmp.Equal(all, []int{0, 1, 2}) {
		t.Errorf(`"all" of 3 GPUs: %v, %v; want [0 1 2]`, all, err)
	}
	some, err := MIGDeviceConfig{Devices: []int{2, 0}}.GPUs(3)
	if err != nil || !cmp.Equal(some, []int{2, 0}) {
		t.Errorf("[2 0] of 3 GPUs: %v, %v; want [2 0]", some, err)
	}
	if _, err := (MIGDeviceConfig{Devices: []int{3}}).GPUs(3); err == nil || !strings.Contains(err.Error(), "GPU 3 does not exist on a node of 3 GPUs") {
		t.Errorf("[3] of 3 GPUs: error %v, want GPU 3 named", err)
	}
}

func TestDeployLabels(t *testing.T) {
	labels := map[string]string{
		DeployDevicePluginLabel:   DeployTrue,
		DeployDCGMExporterLabel:   DeployFalse,
		DeployClientLabel:         DeployTrue,
		"nvidia.com/gpu.deploy.x": DeployTrue, // not one mig-manager pauses
	}
	paused := DeployLabelsPaused(labels)
	want := map[string]string{
		DeployDevicePluginLabel:        DeployPausedForMIGChange,
		DeployGPUFeatureDiscoveryLabel: DeployPausedForMIGChange, // absent: paused all the same
		DeployDCGMExporterLabel:        DeployFalse,
		DeployDCGMLabel:                DeployPausedForMIGChange,
		DeployNVSMLabel:                DeployPausedForMIGChange,
		DeployClientLabel:              DeployPausedForMIGChange,
	}
	if diff := cmp.Diff(want, paused); diff != "" {
		t.Errorf("paused (-want +got):\n%s", diff)
	}
	restored := DeployLabelsRestored(paused)
	for k, v := range want {
		if v == DeployPausedForMIGChange {
			want[k] = DeployTrue
		}
	}
	if diff := cmp.Diff(want, restored); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
	if _, ok := DeployLabelsPaused(map[string]string{})[DeployClientLabel]; ok {
		t.Errorf("a node without %s gets it paused; mig-manager pauses it only where present", DeployClientLabel)
	}
}
