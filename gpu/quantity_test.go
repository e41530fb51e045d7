package gpu

import (
	"strings"
	"testing"
)

// TestMiBString: GPU memory prints in one format, GiB to one decimal with
// a whole number bare, so that the T4's 15,360 MiB and the A16's 15,356
// print alike beside each other ("15GiB"), not "15GiB" and "15.0GiB".
func TestMiBString(t *testing.T) {
	c := Default()
	cases := map[string]struct {
		m    MiB
		want string
	}{
		"zero":              {0, "0MiB"},
		"under a GiB":       {512, "512MiB"},
		"just under a GiB":  {1023, "1023MiB"},
		"one GiB":           {1024, "1GiB"},
		"a tenth over":      {1126, "1.1GiB"},
		"rounds to a whole": {2040, "2GiB"},
		"T4 usable":         {c.MustLookup("T4").Usable, "15GiB"},
		"A16 usable":        {c.MustLookup("A16").Usable, "15GiB"},
		"L4 usable":         {c.MustLookup("L4").Usable, "22.5GiB"},
		"H100 usable":       {c.MustLookup("H100-80GB").Usable, "79.6GiB"},
		"A100-80GB usable":  {c.MustLookup("A100-80GB").Usable, "80GiB"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.m.String(); got != tc.want {
				t.Errorf("MiB(%d) = %q, want %q", int64(tc.m), got, tc.want)
			}
		})
	}
	for m := MiB(1024); m < 200*1024; m++ {
		if s := m.String(); strings.HasSuffix(s, ".0GiB") {
			t.Fatalf("MiB(%d) = %q: a whole number of GiB prints bare", int64(m), s)
		}
	}
}
