package diagnose

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// TestRelayoutKeepsRunningSlices: the re-layout keeps every running slice
// in place (same profile, same start) when some layout does, and only
// otherwise moves slices, naming the pods to evict.
func TestRelayoutKeepsRunningSlices(t *testing.T) {
	h100 := gpu.Default().MustLookup("H100-80GB")
	seven := gpu.Layout{}
	for i := range 7 {
		seven = append(seven, gpu.Slice{Profile: "1g.10gb", Start: i})
	}
	cases := map[string]struct {
		used []int
		want Relayout
		ok   bool
	}{
		"running slices at 0 and 1: 3g.40gb at slot 4 keeps them": {
			used: []int{0, 1},
			want: Relayout{From: seven.String(), To: "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4", Keeps: []string{"1g.10gb@0 (ml/s0)", "1g.10gb@1 (ml/s1)"}},
			ok:   true,
		},
		"running slices at 0 and 4 block both starts: one moves": {
			used: []int{0, 4},
			want: Relayout{From: seven.String(), To: "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4", Keeps: []string{"1g.10gb@0 (ml/s0)"}, Moves: []string{"ml/s4"}},
			ok:   true,
		},
		"every slice running: no layout holds them and a 3g.40gb": {
			used: []int{0, 1, 2, 3, 4, 5, 6},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := cluster.GPU{Model: h100, Memory: h100.Usable, Sharing: cluster.MIG, Layout: seven}
			st := placement.GPUState{}
			holders := map[int]string{}
			for _, j := range tc.used {
				st.UsedSlices |= 1 << j
				holders[j] = "ml/s" + string(rune('0'+j))
			}
			got, _, ok := relayout(&g, st, "3g.40gb", holders)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("relayout (-want +got):\n%s", diff)
			}
		})
	}
}
