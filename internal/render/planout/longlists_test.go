package planout

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/plan"
)

// TestLongListsShortened: a plan of thousands of pending pods, freed nodes
// and workloads per NodePool prints each list's first names and how many
// more, in the table and in plan.md, not lines of hundreds of thousands of
// characters.
func TestLongListsShortened(t *testing.T) {
	s, err := cluster.NewSnapshot(gpu.Default(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%05d", prefix, i)
		}
		return out
	}
	p := &plan.Plan{
		Proof: plan.Proof{
			NodesFreed:   names("node", 2000),
			StillPending: names("team/pending-pod", 20000),
			Unplaceable:  names("team/huge-pod", 3000),
		},
		Autoscaling: &plan.Autoscaling{NodePools: []plan.NodePool{{Name: "gpupack-a100", Model: "NVIDIA-A100-SXM4-80GB", Workloads: names("team/workload", 8000)}}},
	}
	const most = 2000
	for name, write := range map[string]func(*strings.Builder){
		"table":   func(b *strings.Builder) { WriteTable(b, p, s) },
		"plan.md": func(b *strings.Builder) { writeMarkdown(b, p, s) },
	} {
		var b strings.Builder
		write(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if len(line) > most {
				t.Errorf("%s: a line of %d characters, want at most %d: %.200s...", name, len(line), most, line)
			}
		}
		for _, want := range []string{
			"freed: node-00000, node-00001, node-00002, node-00003, node-00004, node-00005, node-00006, node-00007, node-00008, node-00009 and 1990 more (0 GPUs)",
			"still pending: team/pending-pod-00000, team/pending-pod-00001, team/pending-pod-00002, team/pending-pod-00003, team/pending-pod-00004, team/pending-pod-00005, team/pending-pod-00006, team/pending-pod-00007, team/pending-pod-00008, team/pending-pod-00009 and 19990 more;",
			"team/huge-pod-00009 and 2990 more",
			"team/workload-00009 and 7990 more",
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s: want %q in\n%.3000s", name, want, b.String())
			}
		}
	}
}
