package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// TestPartitionableWarned: a pool of partitionable DRA GPUs (dynamic MIG),
// which the plan does not plan partitions for, is named in a warning with
// its classes, once per pool; a pool without them is not.
func TestPartitionableWarned(t *testing.T) {
	const gpuOf = `{model: H100-80GB, count: 1, dra: {driver: gpu.nvidia.com, pool: %s, device: gpu-0, classes: [gpu.nvidia.com],
      counterSets: [{name: gpu-0-counter-set, counters: {memory: 80, memory-slice-0: 1, memory-slice-1: 1}}],
      consumes: [{counterSet: gpu-0-counter-set, counters: {memory: 80, memory-slice-0: 1, memory-slice-1: 1}}],
      partitions: [{device: gpu-0-mig-3g40gb-0, profile: 3g.40gb, classes: [mig.nvidia.com], consumes: [{counterSet: gpu-0-counter-set, counters: {memory: 40, memory-slice-0: 1}}]}]}}`
	file := "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes:\n" +
		"- {name: a, cpu: \"64\", memory: 512Gi, gpus: [" + strings.Replace(gpuOf, "%s", "a", 1) + "]}\n" +
		"- {name: b, cpu: \"64\", memory: 512Gi, gpus: [" + strings.Replace(gpuOf, "%s", "b", 1) + "]}\n" +
		"- {name: c, cpu: \"64\", memory: 512Gi, gpus: [{model: H100-80GB, count: 1, dra: {driver: gpu.nvidia.com, pool: c, device: gpu-0, classes: [gpu.nvidia.com]}}]}\n"
	s, err := cluster.ParseFile([]byte(file), "s.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Make(context.Background(), s, nil, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range pl.Warnings {
		if strings.Contains(w, "DRAPartitionableDevices") {
			got = append(got, w)
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], "gpu.nvidia.com/a: 1 GPU(s)") || !strings.Contains(got[0], "gpu.nvidia.com, mig.nvidia.com") || !strings.Contains(got[1], "gpu.nvidia.com/b") {
		t.Errorf("partitionable warnings %q; want one for pool a and one for pool b, naming their classes", got)
	}
}
