package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestLiveQuotaExhausted: a namespace's ResourceQuota allows 2 GPUs and a
// Deployment wants 3 pods of 1 GPU on a node with 8. The real quota
// admission refuses the third pod and the ReplicaSet controller records
// its FailedCreate warning; gpupack's live diagnosis names the ReplicaSet,
// the quota and its figures, and the remedy's patch, applied to the
// apiserver, lets the controller create the missing pod.
func TestLiveQuotaExhausted(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("h100-0", testcluster.GPUNode{Product: h100Product, MemoryMiB: 81559, GPUs: 8})
	const ns, quotaName, gpuRequests = "team-a", "gpu-quota", "requests.nvidia.com/gpu"
	c.CreateNamespace(ns)
	ctx, core := t.Context(), c.Client().CoreV1()

	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotaName},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{gpuRequests: resource.MustParse("2")}}}
	if _, err := core.ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the resourcequota controller to count quota "+quotaName, func(ctx context.Context) (bool, string, error) {
		q, err := core.ResourceQuotas(ns).Get(ctx, quotaName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, counted := q.Status.Used[gpuRequests]
		return counted, fmt.Sprintf("status %+v", q.Status), nil
	})

	labels := map[string]string{"app": "train"}
	template := makePod(ns, "").gpus(testcluster.ResourceGPU, 1).obj()
	template.ObjectMeta = metav1.ObjectMeta{Labels: labels}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec}}}
	if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var refused *corev1.Event
	poll(t, "the ReplicaSet controller's FailedCreate warning", func(ctx context.Context) (bool, string, error) {
		list, err := core.Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + kube.ReasonFailedCreate})
		if err != nil {
			return false, "", err
		}
		for i, ev := range list.Items {
			if ev.InvolvedObject.Kind == "ReplicaSet" && strings.Contains(ev.Message, "exceeded quota") {
				refused = &list.Items[i]
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d FailedCreate events", len(list.Items)), nil
	})
	t.Logf("the controller's warning: %s", refused.Message)
	rs := refused.InvolvedObject.Name
	wantPrefix := `Error creating: pods "` + rs + `-`
	wantRest := `" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2`
	if !strings.HasPrefix(refused.Message, wantPrefix) || !strings.HasSuffix(refused.Message, wantRest) {
		t.Errorf("FailedCreate message %q; want %q...%q, the words gpupack parses", refused.Message, wantPrefix, wantRest)
	}

	st, err := kube.Load(ctx, c.Client(), gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	var f *diagnose.Finding
	for i := range rep.Findings {
		if w := rep.Findings[i].Workload; w != nil && w.Name == rs {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no finding for ReplicaSet %s; findings %+v, warnings %q", rs, rep.Findings, st.Warnings)
	}
	if f.Cause != diagnose.QuotaExhausted || *f.Workload != (diagnose.Object{Kind: "ReplicaSet", Namespace: ns, Name: rs}) {
		t.Errorf("finding %s of %v, want %s of ReplicaSet %s", f.Cause, f.Workload, diagnose.QuotaExhausted, rs)
	}
	q := f.Evidence.Quota
	if q == nil {
		t.Fatalf("no quota evidence: %+v", f.Evidence)
	}
	if diff := cmp.Diff([]diagnose.QuotaResource{{Resource: gpuRequests, Requested: 1, Used: 2, Hard: 2, Needed: 3}}, q.Resources); diff != "" {
		t.Errorf("quota figures (-want +got):\n%s", diff)
	}
	if q.Quota != (diagnose.Object{Kind: "ResourceQuota", Namespace: ns, Name: quotaName}) || q.Holders == nil || q.Holders.Pods != 2 {
		t.Errorf("quota %v with holders %+v; want %s/%s held by the Deployment's 2 pods", q.Quota, q.Holders, ns, quotaName)
	}
	// serve's Watcher sees the same refusal from its informers.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := kube.NewWatcher(c.Client(), gpu.Default())
	if err := w.Start(wctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Watcher to see the quota's refusal", func(context.Context) (bool, string, error) {
		ws, err := w.State()
		if err != nil {
			return false, "", err
		}
		for _, r := range ws.Snapshot.QuotaRefusals {
			if r.Workload.Name == rs {
				return len(ws.Snapshot.Quotas) > 0, fmt.Sprintf("quotas %+v", ws.Snapshot.Quotas), nil
			}
		}
		return false, fmt.Sprintf("refusals %+v, warnings %q", ws.Snapshot.QuotaRefusals, ws.Warnings), nil
	})
	var patch *diagnose.Patch
	for _, r := range f.Remedies {
		if r.Kind == diagnose.QuotaChange {
			patch = r.Patch
		}
	}
	if patch == nil || patch.Type != diagnose.StrategicPatch {
		t.Fatalf("no strategic quota patch among the remedies %+v", f.Remedies)
	}
	if _, err := core.ResourceQuotas(ns).Patch(ctx, quotaName, types.StrategicMergePatchType, patch.Body, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the remedy's patch %s: %v", patch.Body, err)
	}
	if got := c.WaitDeploymentAvailable(ns, "train"); got.Status.AvailableReplicas != 3 {
		t.Errorf("after the patch: %d available replicas, want 3", got.Status.AvailableReplicas)
	}
}
