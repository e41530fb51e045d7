package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// The kubelet's words for a device plugin's refusal (pkg/kubelet/cm/
// admission.unexpectedAdmissionError around the gRPC error of NVIDIA's
// device plugin v0.15 on, time-slicing with failRequestsGreaterThanOne),
// and a PyTorch out-of-memory error as FallbackToLogsOnError keeps it.
const (
	refusedTwo = `Allocate failed due to rpc error: code = Unknown desc = invalid allocation request for "nvidia.com/gpu": invalid request: maximum request size for shared resources is 1; found 2, which is unexpected`
	cudaOOM    = "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.05 GiB of which 1.12 GiB is free.\n"
)

// TestLiveFailuresAfterScheduling: the real kube-scheduler binds a pod
// asking for two replicas of a time-sliced L4 (to it they are a count),
// and one asking for one; the test writes, through the status
// subresource, what the kubelet writes when the device plugin refuses the
// first (it rejects the pod: phase Failed, UnexpectedAdmissionError) and
// when the second's container keeps dying of CUDA out of memory. gpupack
// reads both as failures with their fixes, and agrees with the scheduler
// that the rejected pod holds nothing: the pod that waited for its
// replicas is bound once it failed, and gpupack saw it fit.
func TestLiveFailuresAfterScheduling(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("l4-ts", testcluster.GPUNode{Product: l4Product, MemoryMiB: 23034, GPUs: 1, Sharing: testcluster.SharingTimeSlicing, Replicas: 4})
	const ns = "ml"
	c.CreateNamespace(ns)
	pods := c.Client().CoreV1().Pods(ns)
	create := func(p *corev1.Pod) {
		p.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
	running := func(names ...string) {
		poll(t, fmt.Sprintf("pods %v to run", names), func(ctx context.Context) (bool, string, error) {
			for _, name := range names {
				p, err := pods.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
					return false, name + " is " + string(p.Status.Phase), nil
				}
			}
			return true, "", nil
		})
	}
	create(makePod(ns, "two-slices").gpus(testcluster.ResourceGPU, 2).obj())
	create(makePod(ns, "chat").gpus(testcluster.ResourceGPU, 1).obj())
	running("two-slices", "chat")
	crashLoop(t, c, ns, "chat", 5, cudaOOM)

	// Three replicas are more than the one left: the scheduler says so.
	create(makePod(ns, "wants-three").gpus(testcluster.ResourceGPU, 3).obj())
	poll(t, "the scheduler to find wants-three unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := pods.Get(ctx, "wants-three", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cond := scheduledCondition(p)
		return cond != nil && cond.Reason == corev1.PodReasonUnschedulable, "not judged yet", nil
	})
	st := load(t, c)
	if got := causeOf(t, st, ns+"/wants-three"); got != diagnose.Allocation {
		t.Errorf("wants-three while two-slices holds its replicas: cause %s, want %s", got, diagnose.Allocation)
	}

	rejectPod(t, c, ns, "two-slices", cluster.ReasonUnexpectedAdmissionError, refusedTwo)
	running("wants-three")

	st = load(t, c)
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Cause     diagnose.Cause
		Kind      cluster.FailureKind
		Node      string
		Requested int64
		Restarts  int32
	}
	got := map[string]seen{}
	for _, f := range rep.Failures {
		fl := f.Evidence.Failure
		got[f.Pod] = seen{f.Cause, fl.Kind, fl.Node, fl.Requested, fl.Restarts}
	}
	want := map[string]seen{
		ns + "/two-slices": {diagnose.Rejected, cluster.SharedRequestRefused, "l4-ts", 2, 0},
		ns + "/chat":       {diagnose.Crashing, cluster.GPUOutOfMemory, "l4-ts", 0, 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failures after scheduling (-want +got):\n%s", diff)
	}
	for _, p := range st.Snapshot.Pods {
		if p.Key() == ns+"/two-slices" {
			t.Errorf("the rejected pod is in the snapshot's pods, holding %s", p.GPU)
		}
	}
	checkAllocations(t, c, st.Snapshot)

	// The CLI says it in words, with what to apply.
	var out bytes.Buffer
	root := newRoot(t, &out, "diagnose", "--kubeconfig", c.Kubeconfig())
	if err := root.Execute(); err != nil {
		t.Fatalf("gpupack diagnose --kubeconfig: %v\n%s", err, out.String())
	}
	for _, w := range []string{"ml/two-slices (2 nvidia.com/gpu): REJECTED", "ask for 1 nvidia.com/gpu instead of 2", "kubectl delete pod -n ml two-slices",
		"ml/chat (1 GPU): CRASHING", "torch.OutOfMemoryError: CUDA out of memory", "time-sliced into 4 replicas"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("gpupack diagnose --kubeconfig lacks %q:\n%s", w, out.String())
		}
	}
}

// rejectPod writes the status the kubelet writes for a pod it refuses to
// admit (k8s.io/kubernetes pkg/kubelet/kubelet.go, rejectPod): phase
// Failed, the reason, and "Pod was rejected: " before the message; the
// QoS class stays.
func rejectPod(t *testing.T, c *testcluster.Cluster, ns, name, reason, message string) {
	t.Helper()
	pods := c.Client().CoreV1().Pods(ns)
	p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{QOSClass: p.Status.QOSClass, Phase: corev1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message}
	if _, err := pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("write the kubelet's rejection of %s: %v", name, err)
	}
}

// crashLoop writes the status the kubelet keeps for a container in
// CrashLoopBackOff: waiting with the back-off, and its last termination
// (exit code 1, reason Error) with the message that its
// terminationMessagePolicy FallbackToLogsOnError took from its log.
func crashLoop(t *testing.T, c *testcluster.Cluster, ns, name string, restarts int32, message string) {
	t.Helper()
	pods := c.Client().CoreV1().Pods(ns)
	p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cs := &p.Status.ContainerStatuses[0]
	cs.Ready, cs.RestartCount, cs.Started = false, restarts, new(false)
	cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off 2m40s restarting failed container=%s pod=%s_%s(%s)", cs.Name, name, ns, p.UID)}}
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: message,
		StartedAt: now, FinishedAt: now, ContainerID: "containerd://" + name}}
	if _, err := pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("write %s's crash loop: %v", name, err)
	}
}

func load(t *testing.T, c *testcluster.Cluster) *kube.State {
	t.Helper()
	st, err := kube.Load(t.Context(), c.Client(), gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// causeOf is gpupack's cause for the pending pod.
func causeOf(t *testing.T, st *kube.State, pod string) diagnose.Cause {
	t.Helper()
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Pod == pod {
			return f.Cause
		}
	}
	t.Fatalf("no finding for %s", pod)
	return ""
}
