package gpupack

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// TestGPUsByModelFollowsNodes: the GPUs by model that the policy weighs
// scarce models by count each node seen once, follow a node's change, and
// drop a deleted node; each change marks the policy for a rebuild.
func TestGPUsByModelFollowsNodes(t *testing.T) {
	c := gpu.Default()
	t4, a100 := c.MustLookup("T4"), c.MustLookup("A100-80GB")
	node := func(name string, m *gpu.Model, n int) *cluster.Node {
		out := &cluster.Node{Name: name, CPU: 64000}
		for i := range n {
			out.GPUs = append(out.GPUs, cluster.GPU{Index: i, Model: m, Sharing: cluster.Exclusive})
		}
		return out
	}
	p := &Plugin{}
	p.noteNode(node("a", a100, 8))
	p.noteNode(node("b", t4, 4))
	p.noteNode(node("b", t4, 4))
	p.workload.stale = false
	p.noteNode(node("c", t4, 2))
	if !p.workload.stale {
		t.Error("a new node did not mark the policy stale")
	}
	if d := cmp.Diff(map[int]int{a100.Index: 8, t4.Index: 6}, p.workload.gpusByModel()); d != "" {
		t.Errorf("GPUs by model (-want +got):\n%s", d)
	}
	p.forgetNodeGPUs([]string{"c"})
	if d := cmp.Diff(map[int]int{a100.Index: 8, t4.Index: 4}, p.workload.gpusByModel()); d != "" {
		t.Errorf("GPUs by model after deleting node c (-want +got):\n%s", d)
	}
}
