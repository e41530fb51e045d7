package usage

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestAppUsage: an application metric's total is priced per million from
// the GPU cost and divided by the active GPU-hours of the same pod; each
// derived figure is unknown where what it divides by is unknown or 0.
func TestAppUsage(t *testing.T) {
	// 100 tokens/s for 3600 s: 360,000 tokens.
	tokens := map[string]*appAgg{"tokens": {sum: 200, total: 360_000, n: 2}}
	cases := map[string]struct {
		aggs map[string]*appAgg
		gpus Totals
		want []AppUsage
	}{
		"cost and activity known": {tokens, Totals{Cost: Known(7.2), ActiveGPUSeconds: Known(1800)},
			[]AppUsage{{Name: "tokens", Mean: Known(100), Total: Known(360_000), CostPerMillion: Known(20), PerActiveGPUHour: Known(720_000)}}},
		"activity not measured": {tokens, Totals{Cost: Known(7.2), ActiveGPUSeconds: Unknown},
			[]AppUsage{{Name: "tokens", Mean: Known(100), Total: Known(360_000), CostPerMillion: Known(20)}}},
		"no active second": {tokens, Totals{Cost: Unknown, ActiveGPUSeconds: Known(0)},
			[]AppUsage{{Name: "tokens", Mean: Known(100), Total: Known(360_000)}}},
		"no token": {map[string]*appAgg{"tokens": {n: 3}}, Totals{Cost: Known(7.2), ActiveGPUSeconds: Known(1800)},
			[]AppUsage{{Name: "tokens", Mean: Known(0), Total: Known(0), PerActiveGPUHour: Known(0)}}},
		"no sample": {map[string]*appAgg{"tokens": {}}, Totals{Cost: Known(7.2), ActiveGPUSeconds: Known(1800)},
			[]AppUsage{{Name: "tokens"}}},
		"no metric": {nil, Totals{Cost: Known(7.2)}, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := gocmp.Diff(tc.want, appUsage(tc.aggs, tc.gpus), gocmp.Comparer(Amount.Equal)); d != "" {
				t.Errorf("appUsage (-want +got):\n%s", d)
			}
		})
	}
}
