package usage

import (
	"strings"
	"testing"

	"github.com/gpupack/gpupack/cluster"
)

// TestWarnPodsNotInCluster: a pod that held a GPU in the last hour and
// that the cluster does not hold is named; one the cluster holds, and
// none without a cluster, are not.
func TestWarnPodsNotInCluster(t *testing.T) {
	series := []Series{
		makeSeries(GREngineActive).pod("ml", "train").at(0, repeat(0.5, 10)...).obj(),
		makeSeries(GREngineActive).pod("forged", "phantom").at(0, repeat(0.5, 10)...).obj(),
	}
	cases := map[string]struct {
		snap *cluster.Snapshot
		want string
	}{
		"the phantom is no pod of the cluster": {snap: &cluster.Snapshot{Pods: []*cluster.Pod{{Namespace: "ml", Name: "train"}}},
			want: "1 pod(s) held a GPU in the last hour by dcgm-exporter's series but are not pods of the cluster: forged/phantom (on n1/0/GPU-1);"},
		"both are pods of the cluster": {snap: &cluster.Snapshot{Pods: []*cluster.Pod{{Namespace: "ml", Name: "train"}, {Namespace: "forged", Name: "phantom"}}}},
		"no cluster":                   {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := account(t, series...)
			r.WarnPodsNotInCluster(tc.snap)
			var got string
			for _, w := range r.Quality.Warnings {
				if strings.Contains(w, "not pods of the cluster") {
					got = w
				}
			}
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("warning %q; want one starting %q", got, tc.want)
			}
		})
	}
}
