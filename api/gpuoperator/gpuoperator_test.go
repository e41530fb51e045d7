package gpuoperator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

func TestAppendMIGGroup(t *testing.T) {
	seven := gpu.Layout{}
	for i := range 7 {
		seven = append(seven, gpu.Slice{Profile: "1g.10gb", Start: i})
	}
	var groups []MIGDeviceConfig
	for j, l := range []gpu.Layout{seven, seven, nil, seven} {
		groups = AppendMIGGroup(groups, j, l)
	}
	want := []MIGDeviceConfig{
		{Devices: []int{0, 1}, MIGEnabled: true, MIGDevices: map[string]int{"1g.10gb": 7}},
		{Devices: []int{2}},
		{Devices: []int{3}, MIGEnabled: true, MIGDevices: map[string]int{"1g.10gb": 7}},
	}
	if diff := cmp.Diff(want, groups); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
}

func TestConfigName(t *testing.T) {
	cases := map[string]struct {
		parts []string
		want  string
	}{
		"joined and lowered":                            {[]string{"Pool", "H100-80GB", "mig"}, "pool-h100-80gb-mig"},
		"unsafe runs become one dash, none at the ends": {[]string{"_a.b", "3g.40gb_"}, "a-b-3g-40gb"},
		"63 characters at most, no dash at the end":     {[]string{strings.Repeat("a", 62), "b"}, strings.Repeat("a", 62)},
	}
	for name, tc := range cases {
		if got := ConfigName(tc.parts...); got != tc.want {
			t.Errorf("%s: ConfigName(%q) = %q, want %q", name, tc.parts, got, tc.want)
		}
	}
}
