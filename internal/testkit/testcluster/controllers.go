package testcluster

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// serviceAccountTokenSeconds is the lifetime of the tokens ClientAs asks
// for: an hour, longer than any test.
const serviceAccountTokenSeconds = 3600

// ClientAs returns a client authenticated as the ServiceAccount name in
// namespace, with a token from the TokenRequest API, so that a test sees
// exactly what a component running as that ServiceAccount may do. The
// ServiceAccount must exist; a namespace's default one does once
// CreateNamespace has returned.
func (c *Cluster) ClientAs(namespace, name string) kubernetes.Interface {
	c.t.Helper()
	expiry := int64(serviceAccountTokenSeconds)
	tr, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(c.t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("testcluster: TokenRequest for ServiceAccount %s/%s (create the ServiceAccount first): %v", namespace, name, err)
	}
	config := rest.AnonymousClientConfig(c.config)
	config.BearerToken = tr.Status.Token
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		c.t.Fatalf("testcluster: client for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return client
}

// WaitDeploymentAvailable waits until the controller-manager has rolled out
// the Deployment namespace/name: it has seen the latest spec, every replica
// runs that spec and is available (kwok made its pod Ready on a node), no
// old replica is left, and the Available condition is True. It returns the
// Deployment, and fails the test with its last status after the cluster's
// StartTimeout.
func (c *Cluster) WaitDeploymentAvailable(namespace, name string) *appsv1.Deployment {
	c.t.Helper()
	var last *appsv1.Deployment
	err := wait.PollUntilContextTimeout(c.t.Context(), pollInterval, c.timeout, true, func(ctx context.Context) (bool, error) {
		d, err := c.client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d
		return deploymentAvailable(d), nil
	})
	if err != nil {
		if last == nil {
			c.t.Fatalf("testcluster: Deployment %s/%s: %v", namespace, name, err)
		}
		c.t.Fatalf("testcluster: Deployment %s/%s not available after %v: %v; last seen: %s (the logs of kube-controller-manager, kube-scheduler and kwok are printed below)",
			namespace, name, c.timeout, err, deploymentStatus(last))
	}
	return last
}

// deploymentAvailable reports whether d is completely rolled out and available.
func deploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.AvailableReplicas != want {
		return false
	}
	for _, cond := range st.Conditions {
		if cond.Type == appsv1.DeploymentAvailable {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deploymentStatus describes d's rollout for a failure message.
func deploymentStatus(d *appsv1.Deployment) string {
	want := "1 (default)"
	if d.Spec.Replicas != nil {
		want = fmt.Sprint(*d.Spec.Replicas)
	}
	s := fmt.Sprintf("generation %d observed %d, replicas wanted %s, total %d, updated %d, ready %d, available %d",
		d.Generation, d.Status.ObservedGeneration, want, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	for _, cond := range d.Status.Conditions {
		s += fmt.Sprintf("; %s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return s
}

// CreateGPUPod creates a pod of one container asking count of resource
// (nvidia.com/gpu, a MIG or shared resource) as request and limit, bound to
// node (kwok runs it) or left to the scheduler when node is "".
func (c *Cluster) CreateGPUPod(namespace, name, node string, resource corev1.ResourceName, count int64) *corev1.Pod {
	c.t.Helper()
	q := *apiresource.NewQuantity(count, apiresource.DecimalSI)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "cuda",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{resource: q}, Limits: corev1.ResourceList{resource: q}}}}},
	}
	created, err := c.client.CoreV1().Pods(namespace).Create(c.t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("testcluster: create pod %s/%s: %v", namespace, name, err)
	}
	return created
}

// RecordPulled writes the Pulled event that a kubelet on the pod's node
// writes for an image of the container at fieldPath (spec.containers{NAME}
// or spec.initContainers{NAME}), with the kubelet's message and at as its
// time; kwok writes none.
func (c *Cluster) RecordPulled(pod *corev1.Pod, fieldPath, message string, at time.Time) {
	c.t.Helper()
	stamp := metav1.NewTime(at)
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: fmt.Sprintf("%s.%x", pod.Name, stamp.UnixNano())},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, FieldPath: fieldPath},
		Reason:              "Pulled",
		Message:             message,
		Source:              corev1.EventSource{Component: "kubelet", Host: pod.Spec.NodeName},
		FirstTimestamp:      stamp,
		LastTimestamp:       stamp,
		Count:               1,
		Type:                corev1.EventTypeNormal,
		ReportingController: "kubelet",
		ReportingInstance:   pod.Spec.NodeName,
	}
	if _, err := c.client.CoreV1().Events(pod.Namespace).Create(c.t.Context(), event, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("testcluster: record a Pulled event for %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}
