package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

const kueueDoc = `apiVersion: gpupack.io/v1alpha2
kind: ClusterSnapshot
nodes: []
pods:
- {namespace: ml, name: train-0, gpu: {count: 2}, schedulingGates: [kueue.x-k8s.io/admission]}
kueue:
  flavors: [h100]
  workloads:
  - {namespace: ml, name: train, queue: team, pods: [train-0], requests: {nvidia.com/gpu: 2, memory: 68719476736}, pending: "insufficient quota"}
  localQueues:
  - {namespace: ml, name: team, clusterQueue: team, stopPolicy: Hold}
  clusterQueues:
  - name: team
    cohort: research
    active: {status: true, reason: Ready}
    quotas:
    - {group: 0, flavor: h100, resource: nvidia.com/gpu, nominal: 4, borrowingLimit: 2, reserved: 3}
    - {group: 0, flavor: h100, resource: memory, nominal: 0}
`

// TestKueueReadsBack: the Kueue section is read as written and written
// back the same; absent, the snapshot has no Kueue (not installed or not
// read), which differs from an empty one.
func TestKueueReadsBack(t *testing.T) {
	s, err := ParseFile([]byte(kueueDoc), "k.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	k := s.Kueue
	if k == nil || len(k.Workloads) != 1 || k.ClusterQueues[0].Quotas[0].Reserved == nil || *k.ClusterQueues[0].Quotas[0].Reserved != 3 || k.ClusterQueues[0].Quotas[1].Reserved != nil {
		t.Fatalf("kueue = %+v", k)
	}
	if w := k.Workload(s.Pods[0]); w == nil || w.Name != "train" || k.LocalQueue("ml", "team") == nil || k.ClusterQueue("team") == nil {
		t.Errorf("lookups: workload %v", w)
	}
	back, _ := readBack(t, s)
	if diff := cmp.Diff(s.Kueue, back.Kueue); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	none, err := ParseFile([]byte(strings.Split(kueueDoc, "kueue:")[0]), "k.yaml", gpu.Default())
	if err != nil || none.Kueue != nil {
		t.Errorf("no kueue section: kueue %+v, err %v", none.Kueue, err)
	}
}

// TestKueueFileErrors: hostile Kueue sections are refused with the place
// and what to give.
func TestKueueFileErrors(t *testing.T) {
	head := "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes: []\nkueue:\n"
	cases := map[string]parseErrorCase{
		"negative request": {head + "  workloads: [{namespace: ml, name: w, queue: q, requests: {nvidia.com/gpu: -1}}]\n", "kueue.workloads[0] (ml/w).requests[nvidia.com/gpu]: amount -1 is negative"},
		"absurd nominal":   {head + "  clusterQueues: [{name: q, quotas: [{flavor: f, resource: cpu, nominal: 9223372036854775807}]}]\n", "kueue.clusterQueues[0] (q).quotas[0]: amount 9223372036854775807 is absurdly large"},
		"too large":        {head + "  clusterQueues: [{name: q, quotas: [{flavor: f, resource: cpu, nominal: 99999999999999999999}]}]\n", "out of range"},
		"no name":          {head + "  workloads: [{namespace: ml, queue: q}]\n", "kueue.workloads[0]: give the Workload's namespace and name"},
		"no flavor":        {head + "  clusterQueues: [{name: q, quotas: [{resource: cpu, nominal: 1}]}]\n", "give the flavor and the resource"},
		"unknown field":    {head + "  workloads: [{namespace: ml, name: w, queueName: q}]\n", `unknown field "queueName"`},
	}
	checkParseErrors(t, "k.yaml", cases)
}

func TestFormatKueueAmount(t *testing.T) {
	cases := map[[2]string]int64{
		{"cpu", "4"}: 4000, {"cpu", "1500m"}: 1500, {"memory", "64Gi"}: 64 << 30, {"memory", "1000"}: 1000,
		{"memory", "0"}: 0, {"nvidia.com/gpu", "3"}: 3, {"hugepages-2Mi", "2Mi"}: 2 << 20, {"ephemeral-storage", "1Ti"}: 1 << 40,
	}
	for k, v := range cases {
		if got := FormatKueueAmount(k[0], v); got != k[1] {
			t.Errorf("FormatKueueAmount(%s, %d) = %q, want %q", k[0], v, got, k[1])
		}
	}
}
