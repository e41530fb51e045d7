package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// rejected marks the pod as the kubelet leaves one it refused to admit.
func (b podBuilder) rejected(reason, message string) podBuilder {
	b.p.Status.Phase, b.p.Status.Reason, b.p.Status.Message = corev1.PodFailed, reason, "Pod was rejected: "+message
	return b
}

// crashed gives the first container the restarts and the last
// termination of one in CrashLoopBackOff.
func (b podBuilder) crashed(restarts int32, exitCode int32, reason, message string) podBuilder {
	b.p.Status.Phase = corev1.PodRunning
	b.p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: b.p.Spec.Containers[0].Name, RestartCount: restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, Message: message}},
	}}
	return b
}

func TestBuildReadsFailures(t *testing.T) {
	const tooMany = "Allocate failed due to rpc error: code = Unknown desc = invalid allocation request for \"nvidia.com/gpu\": invalid request: maximum request size for shared resources is 1; found 2, which is unexpected"
	const oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
	one := int32(1)
	cases := map[string]struct {
		pod  *corev1.Pod
		want []cluster.PodFailure
	}{
		"the kubelet rejects two time-sliced replicas": {
			pod: makePod("two").limit(ResourceGPU, "2").node("ts").rejected(cluster.ReasonUnexpectedAdmissionError, tooMany).obj(),
			want: []cluster.PodFailure{{Namespace: "ml", Name: "two", Node: "ts", Resource: "nvidia.com/gpu", Count: 2, Container: "main",
				Rejected: true, Reason: cluster.ReasonUnexpectedAdmissionError, Message: "Pod was rejected: " + tooMany}},
		},
		"a crash loop on CUDA out of memory": {
			pod: makePod("oom").limit(ResourceGPU, "1").node("ts").crashed(7, 1, "Error", oom).obj(),
			want: []cluster.PodFailure{{Namespace: "ml", Name: "oom", Node: "ts", Resource: "nvidia.com/gpu", Count: 1, Container: "main",
				Reason: "Error", Message: oom, Restarts: 7, ExitCode: &one}},
		},
		"another rejection (no GPU device) is not kept": {
			pod: makePod("cpu").limit(ResourceGPU, "1").node("ts").rejected("OutOfcpu", "Node didn't have enough resource: cpu").obj(),
		},
		"a pod without GPUs that crash-loops is not kept": {
			pod: makePod("web").node("ts").crashed(3, 1, "Error", oom).obj(),
		},
		"a GPU container that exited 0 and restarted is not kept": {
			pod: makePod("done").limit(ResourceGPU, "1").node("ts").crashed(2, 0, "Completed", "").obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			node := makeNode("ts").alloc(ResourceGPU, "4").gfd("NVIDIA-L4", "23034", "1").label(LabelGPUSharingStrategy, "time-slicing").obj()
			st, err := Build(gpu.Default(), []*corev1.Node{node}, []*corev1.Pod{tc.pod}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.Snapshot.Failures); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
		})
	}
}
