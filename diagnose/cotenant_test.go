package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// TestMemoryNamesCoTenant: a pod that needs 16 GiB waits beside a
// time-sliced L40S whose two tenants hold 40 GiB; where gpupack agent
// measured their own figures, the fix names the one holding the most,
// with its VRAM and time; without them it names none.
func TestMemoryNamesCoTenant(t *testing.T) {
	file := "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes:\n" +
		"- {name: ts, cpu: \"32\", memory: 256Gi, gpus: [{model: L40S, count: 1, sharing: time-slicing, replicas: 4}]}\n" +
		"pods:\n" +
		"- {namespace: search, name: rerank-1, cpu: \"4\", gpu: {count: 1, memory: 20Gi}, node: ts, devices: [{gpu: 0}]}\n" +
		"- {namespace: search, name: rerank-2, cpu: \"4\", gpu: {count: 1, memory: 20Gi}, node: ts, devices: [{gpu: 0}]}\n" +
		"- {namespace: search, name: embed, cpu: \"4\", gpu: {count: 1, memory: 16Gi}}\n"
	s, err := cluster.ParseFile([]byte(file), "s.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	facts := func(vram gpu.MiB, active float64, perProcess bool, other string) usage.PodFacts {
		return usage.PodFacts{Measured: true, ActiveRatio: active, Pattern: usage.Busy, VRAMUsedP95: vram, VRAMMeasured: true, SharedWith: []string{other}, PerProcess: perProcess}
	}
	for name, tc := range map[string]struct {
		perProcess bool
		want       *CoTenant
	}{
		"per process": {true, &CoTenant{Pod: "search/rerank-2", VRAMUsedP95: 30000, ActiveRatio: 0.8, GPUMemory: s.Nodes[0].GPUs[0].Memory}},
		"even split":  {false, nil},
	} {
		t.Run(name, func(t *testing.T) {
			u := &usage.Facts{Window: time.Hour, Pods: map[string]usage.PodFacts{
				"search/rerank-1": facts(10000, 0.1, tc.perProcess, "search/rerank-2"),
				"search/rerank-2": facts(30000, 0.8, tc.perProcess, "search/rerank-1"),
			}}
			r, err := Diagnose(s, u)
			if err != nil {
				t.Fatal(err)
			}
			f := r.Findings[0]
			if f.Cause != Memory || f.Evidence.Memory == nil {
				t.Fatalf("cause %s, memory evidence %v; want memory", f.Cause, f.Evidence.Memory)
			}
			got := f.Evidence.Memory.CoTenant
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("co-tenant (-want +got):\n%s", diff)
			}
			named := strings.Contains(strings.Join(f.Fix, "\n"), "search/rerank-2 holds")
			if named != (tc.want != nil) {
				t.Errorf("fix %q: names the co-tenant %v, want %v", f.Fix, named, tc.want != nil)
			}
		})
	}
}
