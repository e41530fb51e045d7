package placement

import (
	"testing"

	"github.com/gpupack/gpupack/cluster"
)

func TestAssignmentAt(t *testing.T) {
	exclusive := makeNode("x").gpus("H100-80GB", 2, cluster.Exclusive, 0).obj()
	mig := makeNode("m").gpus("H100-80GB", 1, cluster.MIG, 0, "3g.40gb", "1g.10gb", "1g.10gb").obj()
	shared := makeNode("s").gpus("L4", 1, cluster.TimeSliced, 2).obj()
	whole := makePod("w").whole(1).obj()
	slice := makePod("m").mig("1g.10gb").obj()
	cases := map[string]struct {
		node    *cluster.Node
		held    []*cluster.Pod
		pod     *cluster.Pod
		devices []cluster.Device
		want    bool
	}{
		"free whole GPU":              {node: exclusive, pod: whole, devices: []cluster.Device{{GPU: 1, Slice: -1}}, want: true},
		"GPU out of range":            {node: exclusive, pod: whole, devices: []cluster.Device{{GPU: 2, Slice: -1}}},
		"too few devices":             {node: exclusive, pod: makePod("two").whole(2).obj(), devices: []cluster.Device{{GPU: 0, Slice: -1}}},
		"same GPU twice":              {node: exclusive, pod: makePod("two").whole(2).obj(), devices: []cluster.Device{{GPU: 0, Slice: -1}, {GPU: 0, Slice: -1}}},
		"GPU already held":            {node: exclusive, held: []*cluster.Pod{whole}, pod: makePod("w2").whole(1).obj(), devices: []cluster.Device{{GPU: 0, Slice: -1}}},
		"named MIG slice of profile":  {node: mig, pod: slice, devices: []cluster.Device{{GPU: 0, Slice: 2}}, want: true},
		"MIG slice of other profile":  {node: mig, pod: slice, devices: []cluster.Device{{GPU: 0, Slice: 0}}},
		"MIG slice taken":             {node: mig, held: []*cluster.Pod{slice}, pod: makePod("m2").mig("1g.10gb").obj(), devices: []cluster.Device{{GPU: 0, Slice: firstSlice(t, mig, "1g.10gb")}}},
		"replica free":                {node: shared, held: []*cluster.Pod{whole}, pod: makePod("w2").whole(1).obj(), devices: []cluster.Device{{GPU: 0, Slice: -1}}, want: true},
		"replicas exhausted":          {node: shared, held: []*cluster.Pod{whole, makePod("w2").whole(1).obj()}, pod: makePod("w3").whole(1).obj(), devices: []cluster.Device{{GPU: 0, Slice: -1}}},
		"MIG slice index beyond plan": {node: mig, pod: slice, devices: []cluster.Device{{GPU: 0, Slice: 9}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := place(t, c.node, c.held...)
			a, ok := AssignmentAt(demand(t, c.pod), s, c.devices)
			if ok != c.want {
				t.Fatalf("AssignmentAt = %v, want %v", ok, c.want)
			}
			if ok {
				for i, d := range a.Devices {
					if d.GPU != c.devices[i].GPU || (c.devices[i].Slice >= 0 && d.Slice != c.devices[i].Slice) {
						t.Errorf("device %d = %+v, want GPU %d slice %d", i, d, c.devices[i].GPU, c.devices[i].Slice)
					}
				}
			}
		})
	}
}

// firstSlice is the index of the first slice of profile in the node's first
// GPU's layout, the one Fit's default choice takes.
func firstSlice(t *testing.T, n *cluster.Node, profile string) int {
	for i, s := range n.GPUs[0].Layout {
		if s.Profile == profile {
			return i
		}
	}
	t.Fatalf("no %s slice", profile)
	return -1
}
