package listing

import (
	"fmt"
	"testing"
)

func TestSome(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint(i)
		}
		return out
	}
	cases := map[string]struct {
		names []string
		want  string
	}{
		"none":     {nil, ""},
		"one":      {names(1), "0"},
		"ten":      {names(10), "0, 1, 2, 3, 4, 5, 6, 7, 8, 9"},
		"eleven":   {names(11), "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 1 more"},
		"thousand": {names(1000), "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 990 more"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Some(c.names); got != c.want {
				t.Errorf("Some = %q, want %q", got, c.want)
			}
		})
	}
}
