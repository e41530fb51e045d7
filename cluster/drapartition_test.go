package cluster

import (
	"strings"
	"testing"

	"github.com/gpupack/gpupack/gpu"
)

// TestParseFilePartitions: a partitionable GPU (counter sets, what its
// whole device consumes, its partitions) is read from a v1alpha2 file, a
// pod's device names a partition by index, and counters that do not add
// up are refused with the field at fault.
func TestParseFilePartitions(t *testing.T) {
	head := "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\n"
	dev := func(dra, pods string) string {
		return head + "nodes:\n- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: H100-80GB, count: 1, dra: " + dra + "}]}\npods: " + pods + "\n"
	}
	const (
		sets  = "counterSets: [{name: s, counters: {memory: 80, slice-0: 1, slice-1: 1}}]"
		whole = "consumes: [{counterSet: s, counters: {memory: 80, slice-0: 1, slice-1: 1}}]"
		parts = "partitions: [{device: p0, profile: 3g.40gb, milli: 500, memory: 40960, consumes: [{counterSet: s, counters: {memory: 40, slice-0: 1}}]}, {device: p1, consumes: [{counterSet: s, counters: {memory: 40, slice-1: 1}}]}]"
		bound = "[{name: a, namespace: ml, node: n, gpu: {mig: 3g.40gb}, devices: [{gpu: 0, slice: 1}]}]"
	)
	s, err := ParseFile([]byte(dev("{driver: d, pool: n, device: g, "+sets+", "+whole+", "+parts+"}", bound)), "p.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Nodes[0].GPUs[0].DRA; !d.Partitionable() || len(d.Partitions) != 2 || d.Partitions[0].Milli != 500 || strings.Join(d.Names(), ",") != "g,p0,p1" {
		t.Errorf("DRA = %+v, want gpu g with partitions p0 and p1", d)
	}
	if got := s.Pods[0].Devices[0].Slice; got != 1 {
		t.Errorf("pod's device slice = %d, want partition 1", got)
	}
	cases := map[string]parseErrorCase{
		"no sets":        {dev("{driver: d, pool: n, device: g, "+parts+"}", "[]"), "counterSets: missing"},
		"unknown set":    {dev("{driver: d, pool: n, device: g, "+sets+", consumes: [{counterSet: t, counters: {memory: 1}}]}", "[]"), "consumes[0].counterSet: t is not among counterSets"},
		"unknown count":  {dev("{driver: d, pool: n, device: g, "+sets+", partitions: [{device: p, consumes: [{counterSet: s, counters: {cores: 1}}]}]}", "[]"), "partitions[0].consumes[0].counters.cores: counter set s has no such counter"},
		"consumes none":  {dev("{driver: d, pool: n, device: g, "+sets+", partitions: [{device: p, consumes: []}]}", "[]"), "partitions[0] (p): consumes: missing"},
		"negative":       {dev("{driver: d, pool: n, device: g, counterSets: [{name: s, counters: {memory: -1}}]}", "[]"), "counterSets[0].counters.memory: -1 is negative"},
		"set twice":      {dev("{driver: d, pool: n, device: g, counterSets: [{name: s, counters: {memory: 1}}, {name: s, counters: {memory: 1}}]}", "[]"), "counter set s is given twice"},
		"no partition 5": {dev("{driver: d, pool: n, device: g, "+sets+", "+parts+"}", strings.Replace(bound, "slice: 1", "slice: 5", 1)), "slice: 5 is not a MIG slice or partition of GPU 0"},
		"name twice":     {dev("{driver: d, pool: n, device: g, "+sets+", partitions: [{device: g, consumes: [{counterSet: s, counters: {memory: 1}}]}]}", "[]"), "DRA device d/n/g is offered twice"},
	}
	checkParseErrors(t, "p.yaml", cases)
}
