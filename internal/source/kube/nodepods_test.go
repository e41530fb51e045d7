package kube

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpupack/gpupack/agent"
)

func TestContainerIDs(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "a", UID: "u1"},
		Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch", ContainerID: "cri-o://i1"}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://c1"}, {Name: "waiting"}},
		},
	}
	got, err := NodePods(context.Background(), fake.NewClientset(p), "gpu-1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]agent.Pod{"u1": {Namespace: "ml", Name: "a", Containers: map[string]string{"i1": "fetch", "c1": "main"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodePods (-want +got):\n%s", diff)
	}
}
