package gpupack

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestDRAPackingPartitions: on partitionable GPUs (NVIDIA's dynamic MIG)
// a node counts the partitions it can still make, so a GPU cut by a
// 3g.40gb counts few free and draws the next MIG claim, and a full one
// counts none.
func TestDRAPackingPartitions(t *testing.T) {
	m, _ := gpu.Default().Lookup("NVIDIA H100 80GB HBM3")
	h := testcluster.DRAGPU{Minor: 0, Product: m.Name, MemoryMiB: 81559, Partitions: m.MIG}
	p3, _ := m.MIG.Profile("3g.40gb")
	var slices []*resourceapi.ResourceSlice
	for _, node := range []string{"a", "b", "c"} {
		slices = append(slices, testcluster.NVIDIASlices(node, h)...)
	}
	f := &fakeDRA{slices: slices, claims: fakeClaims{byName: map[string]*resourceapi.ResourceClaim{
		"ml/cut":    claim("cut", 1, "a", h.PartitionName(p3, 0)),
		"ml/full-0": claim("full-0", 1, "c", h.PartitionName(p3, 0)),
		"ml/full-1": claim("full-1", 1, "c", h.PartitionName(p3, 4)),
	}}}
	nodes, err := draNodes(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The whole GPU and 18 partitions; beside the 3g.40gb@0, a makes the
	// 1g.10gb@4-6, 1g.20gb@4 and @6, 2g.20gb@4 and 3g.40gb@4; c nothing.
	want := map[string]draNode{"a": {19, 7}, "b": {19, 19}, "c": {19, 0}}
	for n, w := range want {
		if nodes[n] != w {
			t.Errorf("node %s: %+v, want %+v", n, nodes[n], w)
		}
	}
	one := &draDemand{need: 1, nodes: nodes}
	if a, b, c := one.score("a"), one.score("b"), one.score("c"); !(a > b && c == 0) {
		t.Errorf("scores a %v, b %v, c %v; want a above b, c 0", a, b, c)
	}
}
