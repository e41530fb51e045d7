package gpupack

import (
	"context"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
)

// TestNormalizeScoreFixedTieOrder: among nodes tied at the best score,
// only the first in the fixed node order keeps MaxScore, whatever order
// the framework lists them in; the rest keep their linear scores.
func TestNormalizeScoreFixedTieOrder(t *testing.T) {
	p := &Plugin{}
	names := []string{"node-a", "node-b", "node-c", "node-d"}
	first := names[0]
	for _, n := range names[1:3] {
		if nodeRank(n) < nodeRank(first) {
			first = n
		}
	}
	for _, order := range [][]int{{0, 1, 2, 3}, {2, 1, 0, 3}, {1, 3, 2, 0}} {
		var scores fwk.NodeScoreList
		for _, i := range order {
			score := int64(50) // node-a, node-b and node-c tie at the best
			if names[i] == "node-d" {
				score = 10
			}
			scores = append(scores, fwk.NodeScore{Name: names[i], Score: score})
		}
		if st := p.NormalizeScore(context.Background(), nil, nil, scores); !st.IsSuccess() {
			t.Fatal(st)
		}
		for _, s := range scores {
			want := fwk.MaxScore - 1
			switch s.Name {
			case first:
				want = fwk.MaxScore
			case "node-d":
				want = fwk.MinScore
			}
			if s.Score != want {
				t.Errorf("order %v: %s scores %d, want %d", order, s.Name, s.Score, want)
			}
		}
	}
}

// TestEventsToRegister: a pod the plugin rejected is retried when a bound
// pod leaves and when a node joins or changes.
func TestEventsToRegister(t *testing.T) {
	events, err := (&Plugin{}).EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var podDelete, nodeAdd bool
	for _, e := range events {
		podDelete = podDelete || (e.Event.Resource == fwk.AssignedPod && e.Event.ActionType&fwk.Delete != 0)
		nodeAdd = nodeAdd || (e.Event.Resource == fwk.Node && e.Event.ActionType&fwk.Add != 0)
	}
	if !podDelete || !nodeAdd {
		t.Errorf("events %+v: want a bound pod's deletion and a node's addition", events)
	}
}
