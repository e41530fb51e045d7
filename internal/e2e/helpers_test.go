package e2e_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpupack/gpupack/internal/cli"
)

// waitTimeout bounds each wait for the scheduler and kwok; it guards against
// a hang and is not an expectation of speed.
const waitTimeout = 3 * time.Minute

// podBuilder makes GPU pods fluently.
type podBuilder struct{ p *corev1.Pod }

func makePod(ns, name string) podBuilder {
	return podBuilder{&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")},
				Limits:   corev1.ResourceList{},
			},
		}}},
	}}
}

// gpus sets the limit of an extended resource (nvidia.com/gpu,
// nvidia.com/mig-<profile>); Kubernetes copies it to the request.
func (b podBuilder) gpus(name corev1.ResourceName, n int64) podBuilder {
	b.p.Spec.Containers[0].Resources.Limits[name] = *resource.NewQuantity(n, resource.DecimalSI)
	return b
}

func (b podBuilder) selector(k, v string) podBuilder {
	if b.p.Spec.NodeSelector == nil {
		b.p.Spec.NodeSelector = map[string]string{}
	}
	b.p.Spec.NodeSelector[k] = v
	return b
}

func (b podBuilder) tolerate(k, v string) podBuilder {
	b.p.Spec.Tolerations = append(b.p.Spec.Tolerations, corev1.Toleration{Key: k, Operator: corev1.TolerationOpEqual, Value: v, Effect: corev1.TaintEffectNoSchedule})
	return b
}

func (b podBuilder) node(name string) podBuilder { b.p.Spec.NodeName = name; return b }

func (b podBuilder) obj() *corev1.Pod { return b.p }

// poll calls cond until it reports done, fails the test after waitTimeout
// with what last describes the state.
func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		done, state, err := cond(ctx)
		last = state
		return done, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last seen: %s", what, err, last)
	}
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// newRoot is the gpupack command line with args, its output in out.
func newRoot(t *testing.T, out *bytes.Buffer, args ...string) *cobra.Command {
	root := cli.NewRoot(t.Context())
	root.SetArgs(args)
	out.Reset()
	root.SetOut(out)
	root.SetErr(out)
	return root
}
