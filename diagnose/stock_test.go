package diagnose

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// TestSchedulerLineIsStock checks the scheduler line against messages in
// kube-scheduler v1.37's exact format and words: one failing filter's
// reasons per node (the first in filter order), every "count reason"
// sorted as strings, and DefaultPreemption's suffix.
func TestSchedulerLineIsStock(t *testing.T) {
	const nodes = `
- {name: tainted, cpu: "32", memory: 64Gi, labels: {pool: gpu}, taints: [{key: team, value: vision, effect: NoSchedule}], gpus: [{model: L4, count: 1}]}
- {name: full-1, cpu: "32", memory: 64Gi, labels: {pool: gpu}, gpus: [{model: L4, count: 1}]}
- {name: full-2, cpu: "32", memory: 64Gi, labels: {pool: gpu}, gpus: [{model: L4, count: 1}]}
- {name: cpu-1, cpu: "32", memory: 64Gi, labels: {pool: cpu}}
- {name: cpu-2, cpu: "32", memory: 64Gi, labels: {pool: cpu}}
`
	const held = `
- {namespace: a, name: h1, gpu: {count: 1}, node: full-1}
- {namespace: a, name: h2, gpu: {count: 1}, node: full-2}
`
	cases := map[string]struct {
		nodes, pods string
		want        string
		note        string
	}{
		"kube-scheduler v1.37, verbatim": {
			nodes: nodes, pods: held + "- {namespace: a, name: wait, gpu: {count: 1}, nodeSelector: {pool: gpu}}",
			want: "0/5 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 2 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.",
		},
		"the first failing filter only: a tainted node that the selector also excludes counts once": {
			nodes: nodes, pods: held + "- {namespace: a, name: wait, gpu: {count: 1}, nodeSelector: {pool: none}}",
			want: "0/5 nodes are available: 1 node(s) had untolerated taint(s), 4 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
		},
		"NodeResourcesFit gives all its reasons; nodes without the resource cannot be helped": {
			nodes: nodes, pods: held + "- {namespace: a, name: wait, cpu: \"40\", gpu: {count: 1}, tolerations: [{operator: Exists}]}",
			want: "0/5 nodes are available: 4 Insufficient nvidia.com/gpu, 5 Insufficient cpu. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
		},
		"cordoned, MIG and time-sliced nodes in the device plugin's resources": {
			nodes: `
- {name: cordoned, cpu: "32", memory: 64Gi, unschedulable: true, gpus: [{model: H100-80GB, count: 8}]}
- {name: mig, cpu: "32", memory: 64Gi, gpus: [{model: H100-80GB, count: 1, sharing: mig, mig: [3g.40gb, 3g.40gb]}]}
- {name: ts, cpu: "32", memory: 64Gi, gpus: [{model: L4, count: 1, sharing: time-slicing, replicas: 2}]}
`,
			pods: `
- {namespace: a, name: t1, gpu: {count: 1}, node: ts}
- {namespace: a, name: t2, gpu: {count: 1}, node: ts}
- {namespace: a, name: wait, gpu: {count: 1}}
`,
			want: "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
		},
		"counts sort as strings": {
			nodes: func() string {
				s := ""
				for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
					s += "- {name: " + n + ", cpu: \"8\", memory: 64Gi, labels: {pool: cpu}}\n"
				}
				return s + "- {name: k, cpu: \"8\", memory: 64Gi, labels: {pool: gpu}, gpus: [{model: L4, count: 1}]}\n- {name: l, cpu: \"8\", memory: 64Gi, labels: {pool: gpu}, gpus: [{model: L4, count: 1}]}\n"
			}(),
			pods: "- {namespace: a, name: h1, gpu: {count: 1}, node: k}\n- {namespace: a, name: h2, gpu: {count: 1}, node: l}\n- {namespace: a, name: wait, gpu: {count: 1}, nodeSelector: {pool: gpu}}",
			want: "0/12 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are available: 10 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
		},
		"gpuModels is a selector on the GPU product": {
			nodes: nodes, pods: held + "- {namespace: a, name: wait, gpu: {count: 1}, gpuModels: [H100-80GB], tolerations: [{operator: Exists}]}",
			want: "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
		},
		"the stock filters pass where gpupack's VRAM check does not: no message": {
			nodes: `- {name: ts, cpu: "32", memory: 64Gi, gpus: [{model: L4, count: 1, sharing: time-slicing, replicas: 4}]}`,
			pods:  "- {namespace: a, name: t1, gpu: {count: 1, memory: 20Gi}, node: ts}\n- {namespace: a, name: wait, gpu: {count: 1, memory: 10Gi}}",
			note:  "the stock kube-scheduler's filters pass on ts, so it would bind the pod there and report no FailedScheduling",
		},
		"the node's pod limit is NodeResourcesFit's first reason, and preemption could help": {
			nodes: `- {name: full, cpu: "32", memory: 64Gi, pods: 2, gpus: [{model: L4, count: 2}]}`,
			pods:  "- {namespace: a, name: p1, cpu: \"1\", node: full}\n- {namespace: a, name: p2, cpu: \"1\", node: full}\n- {namespace: a, name: wait, cpu: \"40\", gpu: {count: 1}}",
			want:  "0/1 nodes are available: 1 Insufficient cpu, 1 Too many pods. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
		},
		"below the pod limit": {
			nodes: `- {name: roomy, cpu: "32", memory: 64Gi, pods: 2, gpus: [{model: L4, count: 2}]}`,
			pods:  "- {namespace: a, name: p1, cpu: \"1\", node: roomy}\n- {namespace: a, name: wait, gpu: {count: 1}}",
			note:  "the stock kube-scheduler's filters pass on roomy, so it would bind the pod there and report no FailedScheduling",
		},
		"a pod that tolerates the cordon passes NodeUnschedulable": {
			nodes: `- {name: cordoned, cpu: "32", memory: 64Gi, unschedulable: true, gpus: [{model: L4, count: 1}]}`,
			pods:  "- {namespace: a, name: wait, gpu: {count: 1}, tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]}",
			note:  "the stock kube-scheduler's filters pass on cordoned, so it would bind the pod there and report no FailedScheduling",
		},
		"a fraction has no stock resource": {
			nodes: `- {name: frac, cpu: "32", memory: 64Gi, gpus: [{model: L4, count: 1, sharing: fractional}]}`,
			pods:  "- {namespace: a, name: wait, cpu: \"64\", gpu: {milli: 500}}",
			note:  "the stock kube-scheduler has no resource for a request of 0.5 GPU (fractions and GPU memory are placed by a GPU-sharing scheduler), so there is no stock message",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes:\n" + tc.nodes + "\npods:\n" + tc.pods + "\n"
			s, err := cluster.ParseFile([]byte(doc), "test.yaml", gpu.Default())
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Diagnose(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			var f Finding
			for _, x := range rep.Findings {
				if x.Pod == "a/wait" {
					f = x
				}
			}
			if diff := cmp.Diff([2]string{tc.want, tc.note}, [2]string{f.Summary, f.StockNote}); diff != "" {
				t.Errorf("summary, stock note (-want +got):\n%s", diff)
			}
		})
	}
}
