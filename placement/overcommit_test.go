package placement

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

func TestCheckBound(t *testing.T) {
	bind := func(p *cluster.Pod, node string) *cluster.Pod { p.NodeName = node; return p }
	fivePods := func(node string) []*cluster.Pod {
		var out []*cluster.Pod
		for i := range 5 {
			out = append(out, bind(makePod(fmt.Sprintf("p%d", i)).whole(4).obj(), node))
		}
		return out
	}
	cases := map[string]struct {
		nodes []*cluster.Node
		pods  []*cluster.Pod
		want  []string // substrings of the error; nil: no error
	}{
		"five 4-GPU pods on 8 GPUs": {
			nodes: []*cluster.Node{makeNode("n1").gpus("H100-80GB", 8, cluster.Exclusive, 0).obj()},
			pods:  fivePods("n1"),
			want:  []string{"node n1 is over-committed", "20 GPU in all", "ml/p0 (4 GPU)", "ml/p4 (4 GPU)", "8 x H100-80GB (exclusive)", "ml/p2 is bound to n1 but does not fit there"},
		},
		"two 4-GPU pods on 8 GPUs": {
			nodes: []*cluster.Node{makeNode("n1").gpus("H100-80GB", 8, cluster.Exclusive, 0).obj()},
			pods:  fivePods("n1")[:2],
		},
		"more slices than the layout has": {
			nodes: []*cluster.Node{makeNode("m").gpus("A100-80GB", 1, cluster.MIG, 0, "3g.40gb", "3g.40gb").obj()},
			pods: []*cluster.Pod{bind(makePod("a").mig("3g.40gb").obj(), "m"), bind(makePod("b").mig("3g.40gb").obj(), "m"),
				bind(makePod("c").mig("3g.40gb").obj(), "m")},
			want: []string{"node m is over-committed", "3 MIG 3g.40gb in all", "1 x A100-80GB (mig 3g.40gb@0,3g.40gb@4)"},
		},
		"more pods than replicas": {
			nodes: []*cluster.Node{makeNode("s").gpus("L4", 1, cluster.TimeSliced, 2).renamed().obj()},
			pods: []*cluster.Pod{bind(makePod("a").shared(1).obj(), "s"), bind(makePod("b").shared(1).obj(), "s"),
				bind(makePod("c").shared(1).obj(), "s")},
			want: []string{"3 shared GPU in all", "1 x L4 (time-slicing, 2 replicas)"},
		},
		// What happened after the binding is no over-commitment: a taint,
		// too little CPU, a VRAM annotation beyond what is free.
		"taint, CPU and VRAM need are not capacity": {
			nodes: []*cluster.Node{makeNode("t").gpus("L4", 1, cluster.TimeSliced, 4).renamed().taint("gpu", "x").cpu(1000).obj()},
			pods: []*cluster.Pod{bind(makePod("a").shared(1).vram(20*1024).cpu(4000).obj(), "t"),
				bind(makePod("b").shared(1).vram(20*1024).obj(), "t")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := cluster.NewSnapshot(gpu.Default(), tc.nodes, tc.pods)
			if err != nil {
				t.Fatal(err)
			}
			err = CheckBound(s)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckBound = %v, want nil", err)
				}
				return
			}
			var oe *OvercommitError
			if !errors.As(err, &oe) {
				t.Fatalf("CheckBound = %v, want an *OvercommitError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
