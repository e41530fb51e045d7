package testcluster_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestControllerManager checks that the controller-manager makes workloads,
// ServiceAccounts, garbage collection, namespace deletion, DRA claims and
// PodDisruptionBudgets work as in a real cluster, with kwok running the
// pods.
func TestControllerManager(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("h100-0", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 8})
	const ns = "workloads"
	c.CreateNamespace(ns)
	apps := c.Client().AppsV1()

	t.Run("a Deployment becomes Available and owns its ReplicaSet and pods", func(t *testing.T) {
		created, err := apps.Deployments(ns).Create(t.Context(), deployment("web", 2), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := c.WaitDeploymentAvailable(ns, "web")
		if d.Status.AvailableReplicas != 2 {
			t.Errorf("Deployment web: %d available replicas, want 2", d.Status.AvailableReplicas)
		}
		rs := ownedReplicaSets(t, c, ns, created.UID)
		if len(rs) != 1 {
			t.Fatalf("Deployment web owns %d ReplicaSets, want 1", len(rs))
		}
		pods := ownedPods(t, c, ns, rs[0].UID)
		if len(pods) != 2 {
			t.Fatalf("ReplicaSet %s owns %d pods, want 2", rs[0].Name, len(pods))
		}
		for _, pod := range pods {
			if pod.Spec.NodeName != "h100-0" || pod.Status.Phase != corev1.PodRunning {
				t.Errorf("pod %s: node %q, phase %q; want h100-0, Running", pod.Name, pod.Spec.NodeName, pod.Status.Phase)
			}
		}
	})

	t.Run("deleting a Deployment garbage-collects its ReplicaSet and pods", func(t *testing.T) {
		created, err := apps.Deployments(ns).Create(t.Context(), deployment("doomed", 2), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.WaitDeploymentAvailable(ns, "doomed")
		rs := ownedReplicaSets(t, c, ns, created.UID)
		if len(rs) != 1 {
			t.Fatalf("Deployment doomed owns %d ReplicaSets, want 1", len(rs))
		}
		if n := len(ownedPods(t, c, ns, rs[0].UID)); n != 2 {
			t.Fatalf("ReplicaSet %s owns %d pods before the deletion, want 2", rs[0].Name, n)
		}
		if err := apps.Deployments(ns).Delete(t.Context(), "doomed", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the garbage collector to delete ReplicaSet "+rs[0].Name+" and its pods", func(ctx context.Context) (bool, string, error) {
			_, err := apps.ReplicaSets(ns).Get(ctx, rs[0].Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, "", err
			}
			rsGone := apierrors.IsNotFound(err)
			pods := ownedPods(t, c, ns, rs[0].UID)
			return rsGone && len(pods) == 0, fmt.Sprintf("ReplicaSet gone: %v, %d pods left", rsGone, len(pods)), nil
		})
		// The other Deployment's pods are untouched.
		if d := c.WaitDeploymentAvailable(ns, "web"); d.Status.AvailableReplicas != 2 {
			t.Errorf("Deployment web: %d available replicas after deleting doomed, want 2", d.Status.AvailableReplicas)
		}
	})

	t.Run("a Job runs to completion", func(t *testing.T) {
		// kwok's pod-complete stage (kwok-stages.yaml) makes the Running
		// pods that a Job owns Succeeded.
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "once"},
			Spec: batchv1.JobSpec{
				Completions:  new(int32(1)),
				BackoffLimit: new(int32(0)),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.37"}},
				}},
			},
		}
		if _, err := c.Client().BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "Job once to complete", func(ctx context.Context) (bool, string, error) {
			j, err := c.Client().BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			complete := false
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					complete = true
				}
				if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
					return false, "", fmt.Errorf("Job once failed: %s: %s", cond.Reason, cond.Message)
				}
			}
			return complete && j.Status.Succeeded == 1, fmt.Sprintf("active %d, succeeded %d, failed %d, conditions %+v", j.Status.Active, j.Status.Succeeded, j.Status.Failed, j.Status.Conditions), nil
		})
	})

	t.Run("a new namespace gets a default ServiceAccount whose token the apiserver authenticates", func(t *testing.T) {
		const fresh = "fresh"
		// Not CreateNamespace, which waits for the ServiceAccount itself.
		if _, err := c.Client().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fresh}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var caCrt string
		poll(t, "the default ServiceAccount and kube-root-ca.crt of namespace "+fresh, func(ctx context.Context) (bool, string, error) {
			_, saErr := c.Client().CoreV1().ServiceAccounts(fresh).Get(ctx, "default", metav1.GetOptions{})
			cm, cmErr := c.Client().CoreV1().ConfigMaps(fresh).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			for _, err := range []error{saErr, cmErr} {
				if err != nil && !apierrors.IsNotFound(err) {
					return false, "", err
				}
			}
			if cmErr == nil {
				caCrt = cm.Data["ca.crt"]
			}
			return saErr == nil && caCrt != "", fmt.Sprintf("ServiceAccount: %v, ConfigMap: %v, ca.crt of %d bytes", saErr, cmErr, len(caCrt)), nil
		})

		want := "system:serviceaccount:" + fresh + ":default"
		if got := whoAmI(t, c.ClientAs(fresh, "default")); got != want {
			t.Errorf("ClientAs(%q, \"default\") is authenticated as %q, want %q", fresh, got, want)
		}
		// A pod's view: trust only the published ca.crt, present the token.
		admin, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		inPod := &rest.Config{
			Host:            admin.Host,
			BearerToken:     requestToken(t, c, fresh, "default"),
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte(caCrt)},
		}
		if got := whoAmI(t, kubernetes.NewForConfigOrDie(inPod)); got != want {
			t.Errorf("a client trusting kube-root-ca.crt is authenticated as %q, want %q", got, want)
		}
		// A legacy token Secret gets its token from the
		// serviceaccount-token-controller.
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "default-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type:       corev1.SecretTypeServiceAccountToken,
		}
		if _, err := c.Client().CoreV1().Secrets(fresh).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var legacyToken string
		poll(t, "the token of Secret "+fresh+"/default-token", func(ctx context.Context) (bool, string, error) {
			s, err := c.Client().CoreV1().Secrets(fresh).Get(ctx, "default-token", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			legacyToken = string(s.Data[corev1.ServiceAccountTokenKey])
			return legacyToken != "", fmt.Sprintf("keys %v", slices.Sorted(maps.Keys(s.Data))), nil
		})
		inPod.BearerToken = legacyToken
		if got := whoAmI(t, kubernetes.NewForConfigOrDie(inPod)); got != want {
			t.Errorf("the legacy token Secret's token is authenticated as %q, want %q", got, want)
		}
		// The token carries the ServiceAccount's rights, not more.
		_, err = c.ClientAs(fresh, "default").CoreV1().Pods(fresh).List(t.Context(), metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("the default ServiceAccount listing pods: error %v, want Forbidden", err)
		}
	})

	t.Run("a pod's ResourceClaimTemplate becomes its ResourceClaim", func(t *testing.T) {
		template := &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
				Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
					Name:    "gpu",
					Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"},
				}}},
			}},
		}
		if _, err := c.Client().ResourceV1().ResourceClaimTemplates(ns).Create(t.Context(), template, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "claims-a-gpu"},
			Spec: corev1.PodSpec{
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: new("one-gpu")}},
				Containers: []corev1.Container{{
					Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
				}},
			},
		}
		created, err := c.Client().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var claimName string
		poll(t, "the resourceclaim-controller to create the claim of pod claims-a-gpu", func(ctx context.Context) (bool, string, error) {
			p, err := c.Client().CoreV1().Pods(ns).Get(ctx, "claims-a-gpu", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.Name == "gpu" && st.ResourceClaimName != nil {
					claimName = *st.ResourceClaimName
				}
			}
			return claimName != "", fmt.Sprintf("resourceClaimStatuses %+v", p.Status.ResourceClaimStatuses), nil
		})
		claim, err := c.Client().ResourceV1().ResourceClaims(ns).Get(t.Context(), claimName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the pod's claim %s: %v", claimName, err)
		}
		if owner := metav1.GetControllerOf(claim); owner == nil || owner.UID != created.UID {
			t.Errorf("claim %s is controlled by %+v, want pod claims-a-gpu (%s)", claimName, owner, created.UID)
		}
		if got := claim.Spec.Devices.Requests; len(got) != 1 || got[0].Exactly == nil || got[0].Exactly.DeviceClassName != "gpu.example.com" {
			t.Errorf("claim %s requests %+v, want the template's one request of class gpu.example.com", claimName, got)
		}
	})

	t.Run("evictions drain a Deployment one pod at a time under maxUnavailable 1", func(t *testing.T) {
		testEvictionOneAtATime(t, c, ns)
	})

	t.Run("a PodDisruptionBudget of minAvailable 100% refuses every eviction", func(t *testing.T) {
		testEvictionMinAvailableAll(t, c, ns)
	})

	t.Run("deleting a namespace deletes what it holds, then the namespace", func(t *testing.T) {
		const doomed = "doomed"
		c.CreateNamespace(doomed)
		if _, err := apps.Deployments(doomed).Create(t.Context(), deployment("web", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.WaitDeploymentAvailable(doomed, "web")
		if err := c.Client().CoreV1().Namespaces().Delete(t.Context(), doomed, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "namespace "+doomed+" to be deleted", func(ctx context.Context) (bool, string, error) {
			n, err := c.Client().CoreV1().Namespaces().Get(ctx, doomed, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, "", err
			}
			return false, fmt.Sprintf("phase %s, conditions %+v", n.Status.Phase, n.Status.Conditions), nil
		})
	})
}

// deployment returns a Deployment of replicas pods without GPUs.
func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1.29"}}},
			},
		},
	}
}

// ownedReplicaSets lists the ReplicaSets in ns that owner controls.
func ownedReplicaSets(t *testing.T, c *testcluster.Cluster, ns string, owner types.UID) []appsv1.ReplicaSet {
	t.Helper()
	list, err := c.Client().AppsV1().ReplicaSets(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var owned []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == owner {
			owned = append(owned, rs)
		}
	}
	return owned
}

// ownedPods lists the pods in ns that owner controls.
func ownedPods(t *testing.T, c *testcluster.Cluster, ns string, owner types.UID) []corev1.Pod {
	t.Helper()
	list, err := c.Client().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var owned []corev1.Pod
	for _, pod := range list.Items {
		if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == owner {
			owned = append(owned, pod)
		}
	}
	return owned
}

// whoAmI returns the user name that the apiserver authenticates client as.
func whoAmI(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return review.Status.UserInfo.Username
}

// requestToken asks the TokenRequest API for a token of the ServiceAccount.
func requestToken(t *testing.T, c *testcluster.Cluster, ns, name string) string {
	t.Helper()
	tr, err := c.Client().CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// pollInterval is how often poll asks again.
const pollInterval = 100 * time.Millisecond

// poll waits until cond is done, failing t with cond's last description
// after podTimeout.
func poll(t *testing.T, what string, cond func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	var state string
	err := wait.PollUntilContextTimeout(t.Context(), pollInterval, podTimeout, true, func(ctx context.Context) (bool, error) {
		done, s, err := cond(ctx)
		if err == nil {
			state = s // an error at the deadline says nothing of the state
		}
		return done, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last seen: %s", what, err, state)
	}
}
