package planout

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/plan"
)

// TestNotices: the table and plan.md both say each of the plan's warnings,
// then each unknown GPU model, one line each, in the same order.
func TestNotices(t *testing.T) {
	s, err := cluster.NewSnapshot(gpu.Default(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{
		Warnings: []string{"pool a: first", "pool b: second"},
		UnknownModels: []cluster.UnknownModel{
			{Model: "NVIDIA-B300", GPUs: 16, Unknown: []string{"price", "MIG geometry"}},
			{Model: "NVIDIA-X1", GPUs: 1, Unknown: []string{"price"}},
		},
	}
	// Each writer's notices, after its first line (the table) or its
	// Cluster line (plan.md).
	for name, tc := range map[string]struct {
		write func(w io.Writer, p *plan.Plan, s *cluster.Snapshot)
		first int
		want  []string
	}{
		"table": {WriteTable, 1, []string{
			"warning: pool a: first",
			"warning: pool b: second",
			"unknown GPU model: NVIDIA-B300 (16 GPUs): price and MIG geometry unknown; add it to a --catalogue file",
			"unknown GPU model: NVIDIA-X1 (1 GPUs): price unknown; add it to a --catalogue file",
		}},
		"plan.md": {writeMarkdown, 4, []string{
			"- **Warning:** pool a: first",
			"- **Warning:** pool b: second",
			"- **Unknown GPU model:** NVIDIA-B300 (16 GPUs): price and MIG geometry unknown; add it to a --catalogue file",
			"- **Unknown GPU model:** NVIDIA-X1 (1 GPUs): price unknown; add it to a --catalogue file",
		}},
	} {
		var b strings.Builder
		tc.write(&b, p, s)
		if diff := cmp.Diff(tc.want, strings.Split(b.String(), "\n")[tc.first:tc.first+len(tc.want)]); diff != "" {
			t.Errorf("%s's notices (-want +got):\n%s\n%s", name, diff, b.String())
		}
	}
}
