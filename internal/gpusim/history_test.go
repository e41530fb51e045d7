package gpusim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
)

// TestOpenMetricsMatchesExposition requires the history to hold, at every
// scrape, exactly what the live exposition serves at that moment, to end in
// "# EOF", and to apply its faults.
func TestOpenMetricsMatchesExposition(t *testing.T) {
	s, err := Parse([]byte(small), "small.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	history := func(f Faults) (map[string]string, string) {
		var b strings.Builder
		if err := s.WriteOpenMetrics(&b, start, 0, s.Duration.D(), time.Second, f); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			series, rest, _ := strings.Cut(line, "} ")
			value, ts, _ := strings.Cut(rest, " ")
			got[series+"}@"+ts] = value
		}
		return got, b.String()
	}
	got, text := history(Faults{})
	if !strings.HasSuffix(text, "# EOF\n") {
		t.Errorf("history does not end in # EOF")
	}
	want := 0
	for sec := range int(s.Duration.D() / time.Second) {
		var b strings.Builder
		if err := s.WriteMetrics(&b, time.Duration(sec)*time.Second); err != nil {
			t.Fatal(err)
		}
		ts := strconv.FormatInt(start.Unix()+int64(sec), 10)
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			want++
			series, value, _ := strings.Cut(line, "} ")
			if g, ok := got[series+"}@"+ts]; !ok || g != value {
				t.Fatalf("history at %ds: %s} = %q (present %v); the exposition serves %s", sec, series, g, ok, value)
			}
		}
	}
	if len(got) != want {
		t.Errorf("history has %d samples; the exposition served %d over the scenario", len(got), want)
	}

	dev := s.devices()[0].Key()
	faulty, _ := history(Faults{NaNEvery: 2, NaNDevices: []string{dev}, Gaps: []Gap{{Device: dev, From: 4 * time.Second, To: 8 * time.Second}}})
	nan, missing := 0, 0
	for k, v := range got {
		fv, ok := faulty[k]
		switch {
		case !ok:
			missing++
		case fv == "NaN" && v != "NaN":
			nan++
		}
	}
	// Every family's 4 s of the first GPU (held by nobody before 2 s, by
	// busy after) are missing; half the 3 activity families' other 16
	// samples NaN.
	if missing != len(families)*4 || nan != 3*16/2 {
		t.Errorf("faults: %d samples missing, %d NaN; want %d and %d", missing, nan, len(families)*4, 3*16/2)
	}
}
