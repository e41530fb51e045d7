package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// spread sets the pod's app label and a zone spread constraint of maxSkew
// 1 over that app.
func (b podBuilder) spread(app string) podBuilder {
	b.p.Labels = map[string]string{"app": app}
	b.p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	return b
}

// TestSpreadKeepsReplicasWaiting is the mission's case on a real control
// plane: ten time-sliced replicas fit in total (zone a has 11 replicas
// free) but not under maxSkew 1 while zone b is full. gpupack's line must be
// the scheduler's, its cause placement, and the patch of its fix that runs
// them all, applied to the pods, must let the scheduler bind every one.
func TestSpreadKeepsReplicasWaiting(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	l4 := func(gpus int64, zone string) testcluster.GPUNode {
		return testcluster.GPUNode{Product: l4Product, MemoryMiB: 23034, GPUs: gpus, Sharing: testcluster.SharingTimeSlicing, Replicas: 4,
			Labels: map[string]string{corev1.LabelTopologyZone: zone}}
	}
	c.AddGPUNode("ts-a1", l4(2, "a"))
	c.AddGPUNode("ts-a2", l4(2, "a"))
	c.AddGPUNode("ts-b1", l4(1, "b"))
	const ns = "ml"
	c.CreateNamespace(ns)
	pods := c.Client().CoreV1().Pods(ns)
	var running []string
	for node, n := range map[string]int{"ts-a1": 3, "ts-a2": 2, "ts-b1": 4} {
		for i := range n {
			p := makePod(ns, fmt.Sprintf("run-%s-%d", node, i)).gpus(testcluster.ResourceGPU, 1).spread("infer").node(node).obj()
			if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			running = append(running, p.Name)
		}
	}
	poll(t, "the bound replicas to run", func(ctx context.Context) (bool, string, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		n := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == len(running), fmt.Sprintf("%d of %d running", n, len(running)), nil
	})
	waiting := map[string]*corev1.Pod{}
	for i := range 10 {
		p := makePod(ns, fmt.Sprintf("infer-%d", i)).gpus(testcluster.ResourceGPU, 1).spread("infer").obj()
		waiting[p.Name] = p.DeepCopy()
		if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var st *kube.State
	poll(t, "a FailedScheduling message for every replica", func(ctx context.Context) (bool, string, error) {
		var err error
		if st, err = kube.Load(ctx, c.Client(), gpu.Default()); err != nil {
			return false, "", err
		}
		missing := 0
		for name := range waiting {
			if _, ok := st.SchedulingFailures[ns+"/"+name]; !ok {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d without a message", missing), nil
	})
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	var patch []byte
	for _, f := range rep.Findings {
		name := strings.TrimPrefix(f.Pod, ns+"/")
		if waiting[name] == nil {
			continue
		}
		failure := st.SchedulingFailures[f.Pod]
		if f.Summary != failure.Message || f.Cause != diagnose.Placement {
			t.Errorf("%s: gpupack %s, %q; kube-scheduler %q", f.Pod, f.Cause, f.Summary, failure.Message)
		}
		for _, r := range f.Remedies {
			if strings.Contains(f.Fix[r.Fix], "to run them all") && r.Patch != nil {
				patch = r.Patch.Body
			}
		}
	}
	if patch == nil {
		t.Fatalf("no fix with a patch that runs them all: %+v", rep.Findings[0].Fix)
	}
	t.Logf("kube-scheduler: %s; gpupack's patch for the pod template: %s", st.SchedulingFailures[ns+"/infer-0"].Message, patch)
	// The pod template change, made as the workload's controller would:
	// the replicas again, patched.
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range waiting {
		zero := int64(0)
		if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		doc, _ := json.Marshal(p)
		out, err := ops.Apply(doc)
		if err != nil {
			t.Fatalf("patch %s on %s: %v", patch, name, err)
		}
		var q corev1.Pod
		if err := json.Unmarshal(out, &q); err != nil {
			t.Fatal(err)
		}
		q.Name = name + "-patched"
		if _, err := pods.Create(t.Context(), &q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "the patched replicas to be bound", func(ctx context.Context) (bool, string, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range list.Items {
			if strings.HasSuffix(p.Name, "-patched") && p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == len(waiting), fmt.Sprintf("%d of %d bound", bound, len(waiting)), nil
	})
}
