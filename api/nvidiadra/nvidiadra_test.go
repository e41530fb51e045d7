package nvidiadra

import "testing"

// TestMIGNames: a MIG profile's DeviceClass is named as the driver's
// extended-resources demo names it, and serves the device plugin's
// resource name of the profile.
func TestMIGNames(t *testing.T) {
	cases := map[string]struct{ profile, class, resource string }{
		"1g.10gb": {"1g.10gb", "mig-1g-10gb.gpu.nvidia.com", "nvidia.com/mig-1g.10gb"},
		"1g.12gb": {"1g.12gb", "mig-1g-12gb.gpu.nvidia.com", "nvidia.com/mig-1g.12gb"},
		"3g.40gb": {"3g.40gb", "mig-3g-40gb.gpu.nvidia.com", "nvidia.com/mig-3g.40gb"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := MIGClassName(tc.profile); got != tc.class {
				t.Errorf("MIGClassName(%q) = %q, want %q", tc.profile, got, tc.class)
			}
			if got := MIGResource(tc.profile); got != tc.resource {
				t.Errorf("MIGResource(%q) = %q, want %q", tc.profile, got, tc.resource)
			}
		})
	}
}
