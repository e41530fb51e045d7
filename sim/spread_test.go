package sim

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// TestPlaceHonoursSpread: firstfit would stack every pod on the first
// node; a zone spread constraint of maxSkew 1, which Place prefilters
// before each pod, alternates them between the zones, and the simulator's
// own placements count for the next pod.
func TestPlaceHonoursSpread(t *testing.T) {
	c := gpu.Default()
	l4 := c.MustLookup("L4")
	node := func(name, zone string) *cluster.Node {
		n := &cluster.Node{Name: name, CPU: 32000, Memory: 131072, Labels: map[string]string{"topology.kubernetes.io/zone": zone}}
		for i := 0; i < 4; i++ {
			n.GPUs = append(n.GPUs, cluster.GPU{Index: i, Model: l4, Memory: l4.Usable})
		}
		return n
	}
	states, _, _ := newStates([]*cluster.Node{node("a1", "a"), node("a2", "a"), node("b1", "b")})
	policy, err := placement.New("firstfit", placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 7; i++ {
		p := &cluster.Pod{Namespace: "ml", Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"},
			GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1},
			SpreadConstraints: []cluster.SpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: cluster.DoNotSchedule,
				LabelSelector: &cluster.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
		d, err := placement.NewDemand(p, c)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := Place(d, states, policy, Ties{})
		if i < 0 {
			got = append(got, "none")
			continue
		}
		got = append(got, states[i].Node.Name)
	}
	// Within zone a, firstfit keeps to a1.
	want := []string{"a1", "b1", "a1", "b1", "a1", "b1", "a1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
}
