package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// TestNodeFitsAgreesWithReasons: the allocation-free check holds exactly
// when nodeReasons finds nothing, over random labels, taints, selectors,
// affinity and tolerations.
func TestNodeFitsAgreesWithReasons(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vals := []string{"a", "b", "1", "9"}
	keys := []string{"k1", "k2", "k3"}
	effects := []cluster.TaintEffect{cluster.NoSchedule, cluster.PreferNoSchedule, cluster.NoExecute}
	ops := []string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}
	for i := range 5000 {
		n := &cluster.Node{Name: fmt.Sprint("n", i), CPU: gpu.CPUMilli(rng.IntN(3) * 1000), Memory: gpu.MiB(rng.IntN(3)), Labels: map[string]string{}, Unschedulable: rng.IntN(8) == 0}
		p := &cluster.Pod{Name: "p", CPU: gpu.CPUMilli(rng.IntN(3) * 1000), Memory: gpu.MiB(rng.IntN(3)), NodeSelector: map[string]string{}}
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				n.Labels[k] = vals[rng.IntN(len(vals))]
			}
			if rng.IntN(4) == 0 {
				p.NodeSelector[k] = vals[rng.IntN(len(vals))]
			}
			if rng.IntN(4) == 0 {
				n.Taints = append(n.Taints, cluster.Taint{Key: k, Value: vals[rng.IntN(len(vals))], Effect: effects[rng.IntN(3)]})
			}
			if rng.IntN(4) == 0 {
				p.Tolerations = append(p.Tolerations, cluster.Toleration{Key: k, Operator: []string{"Equal", "Exists"}[rng.IntN(2)], Value: vals[rng.IntN(len(vals))]})
			}
		}
		for range rng.IntN(3) {
			var term cluster.Term
			for range 1 + rng.IntN(2) {
				term.MatchExpressions = append(term.MatchExpressions, cluster.Requirement{Key: keys[rng.IntN(len(keys))], Operator: ops[rng.IntN(len(ops))], Values: []string{vals[rng.IntN(len(vals))]}})
			}
			p.RequiredAffinity = append(p.RequiredAffinity, term)
		}
		d, err := NewDemand(p, gpu.Default())
		if err != nil {
			t.Fatal(err)
		}
		s := NewNodeState(n)
		if got, want := nodeFits(d, s), len(nodeReasons(d, s)) == 0; got != want {
			t.Fatalf("case %d: nodeFits = %v, nodeReasons = %v\nnode %+v\npod %+v", i, got, nodeReasons(d, s), n, p)
		}
	}
}
