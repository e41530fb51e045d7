package kube

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/agent"
)

// NodePods lists the pods bound to node, by UID, with their containers'
// names by runtime ID (containerStatuses' containerID without its
// "containerd://" or "cri-o://" scheme): what the agent needs to name the
// pod and container of a process whose cgroup gives only their IDs.
func NodePods(ctx context.Context, client kubernetes.Interface, node string) (map[string]agent.Pod, error) {
	list, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	out := make(map[string]agent.Pod, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		out[string(p.UID)] = agent.Pod{Namespace: p.Namespace, Name: p.Name, Containers: containerIDs(p)}
	}
	return out, nil
}

// containerIDs maps the runtime IDs of the pod's containers, init and
// ephemeral ones included, to their names.
func containerIDs(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, s := range statuses {
			if _, id, ok := strings.Cut(s.ContainerID, "://"); ok && id != "" {
				out[id] = s.Name
			}
		}
	}
	return out
}
