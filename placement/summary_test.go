package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

func TestSummaryOfMatchesSummary(t *testing.T) {
	busy := Reason{Code: InsufficientGPU, Resource: "nvidia.com/gpu"}
	taint := Reason{Code: TaintNotTolerated, Detail: "gpu: reserved"}
	perNode := [][]Reason{{busy}, {busy}, {taint, busy}, nil}
	groups := []NodeReasons{{Nodes: 2, Reasons: []Reason{busy}}, {Nodes: 1, Reasons: []Reason{taint, busy}}, {Nodes: 1}}
	want := "1/4 nodes are available: 3 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {gpu: reserved}."
	if diff := cmp.Diff(want, Summary(4, perNode)); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, SummaryOf(4, groups)); diff != "" {
		t.Errorf("SummaryOf (-want +got):\n%s", diff)
	}
}

func TestNodeSelectorReasonIsDeterministic(t *testing.T) {
	c := gpu.Default()
	n := &cluster.Node{Name: "n", CPU: 1000, Memory: 1024, Labels: map[string]string{"a": "x"}}
	p := &cluster.Pod{Name: "p", NodeSelector: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}}
	d, err := NewDemand(p, c)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, rs := Fit(d, NewNodeState(n))
		if got, want := rs[0].Detail, "nodeSelector a=1 (node has a=x)"; got != want {
			t.Fatalf("Detail = %q, want %q", got, want)
		}
	}
}

func TestAppendKey(t *testing.T) {
	c := gpu.Default()
	h100 := c.MustLookup("H100-80GB")
	mk := func(name string, labels map[string]string) *cluster.Node {
		return &cluster.Node{Name: name, CPU: 8000, Memory: 65536, Labels: labels,
			GPUs: []cluster.GPU{{Model: h100, Memory: h100.Usable}, {Index: 1, Model: h100, Memory: h100.Usable}}}
	}
	a, b := NewNodeState(mk("a", map[string]string{"x": "1", "y": "2"})), NewNodeState(mk("b", map[string]string{"y": "2", "x": "1"}))
	if string(a.AppendKey(nil)) != string(b.AppendKey(nil)) {
		t.Error("identical nodes with different names have different keys")
	}
	d, _ := NewDemand(&cluster.Pod{Name: "p", GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}}, c)
	b.Assign(d, AssignmentOn(d, b, []int{0}))
	if string(a.AppendKey(nil)) == string(b.AppendKey(nil)) {
		t.Error("a node with a GPU held has the key of an empty one")
	}
	other := NewNodeState(mk("c", map[string]string{"x": "1", "y": "3"}))
	if string(a.AppendKey(nil)) == string(other.AppendKey(nil)) {
		t.Error("nodes with different labels have the same key")
	}
}
