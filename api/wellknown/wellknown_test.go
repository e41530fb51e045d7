package wellknown

import "testing"

func TestDevicesRoundTrip(t *testing.T) {
	for _, text := range []string{"3", "0,1", "2:4", "0:1,1:0"} {
		d, err := ParseDevices(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatDevices(d); got != text {
			t.Errorf("FormatDevices(ParseDevices(%q)) = %q", text, got)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1:", "1:y"} {
		if _, err := ParseDevices(bad); err == nil {
			t.Errorf("ParseDevices(%q) succeeded", bad)
		}
	}
}
