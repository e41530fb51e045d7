package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// quotaRefused is the event the ReplicaSet controller records when the
// quota admission refuses its pod, in the words of Kubernetes v1.37.
func quotaRefused(name, rs, quota string, requested, used, hard int, count int32, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "ml", Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Namespace: "ml", Name: rs, APIVersion: "apps/v1"},
		Type:           corev1.EventTypeWarning, Reason: ReasonFailedCreate, Count: count, LastTimestamp: metav1.NewTime(at),
		Message: "Error creating: pods \"" + rs + "-abcde\" is forbidden: exceeded quota: " + quota +
			", requested: requests.nvidia.com/gpu=" + itoa(requested) + ", used: requests.nvidia.com/gpu=" + itoa(used) + ", limited: requests.nvidia.com/gpu=" + itoa(hard),
	}
}

func itoa(n int) string { return resource.NewQuantity(int64(n), resource.DecimalSI).String() }

func TestLoadQuotas(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	gpuQuota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gpu-quota"},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceRequestsMemory: resource.MustParse("1Gi")},
			Used: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("4")},
		},
	}
	cpuQuota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "cpu"},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("8")}}}
	older := quotaRefused("train.1", "train-7d9c5", "gpu-quota", 1, 3, 4, 2, t0)
	newer := quotaRefused("train.2", "train-7d9c5", "gpu-quota", 1, 4, 4, 3, t0.Add(time.Minute))
	gone := quotaRefused("old.1", "old-1", "deleted-quota", 1, 1, 1, 1, t0)
	other := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "sa.1"}, InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: "ml", Name: "j"},
		Type: corev1.EventTypeWarning, Reason: ReasonFailedCreate, Message: `Error creating: pods "j-x" is forbidden: error looking up service account ml/x: serviceaccount "x" not found`}
	objects := []runtime.Object{gpuQuota, cpuQuota, older, newer, gone, other}

	wantQuotas := []cluster.ResourceQuota{{Namespace: "ml", Name: "gpu-quota", Hard: map[string]int64{"requests.nvidia.com/gpu": 4}, Used: map[string]int64{"requests.nvidia.com/gpu": 4}}}
	wantRefusals := []cluster.QuotaRefusal{{Workload: cluster.Workload{Kind: "ReplicaSet", Namespace: "ml", Name: "train-7d9c5"}, Pod: "train-7d9c5-abcde", Quota: "gpu-quota",
		Requested: map[string]int64{"requests.nvidia.com/gpu": 1}, Used: map[string]int64{"requests.nvidia.com/gpu": 4}, Limited: map[string]int64{"requests.nvidia.com/gpu": 4}, Count: 5}}
	cases := map[string]struct {
		forbidden    string
		quotas       []cluster.ResourceQuota
		refusals     []cluster.QuotaRefusal
		wantWarnings []string
	}{
		"readable": {quotas: wantQuotas, refusals: wantRefusals},
		"quotas forbidden": {forbidden: "resourcequotas",
			wantWarnings: []string{`cannot list resourcequotas: grant verb "list" on resource "resourcequotas" (API group "", cluster scope)`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(objects...)
			if tc.forbidden != "" {
				client.PrependReactor("list", tc.forbidden, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tc.forbidden}, "", nil)
				})
			}
			st, err := Load(context.Background(), client, gpu.Default())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.quotas, st.Snapshot.Quotas); diff != "" {
				t.Errorf("quotas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.refusals, st.Snapshot.QuotaRefusals); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
			var quotaWarnings []string
			for _, w := range st.Warnings {
				if strings.HasPrefix(w, "cannot list resourcequotas") {
					quotaWarnings = append(quotaWarnings, w)
				}
			}
			checkWarnings(t, tc.wantWarnings, quotaWarnings)
		})
	}
}
