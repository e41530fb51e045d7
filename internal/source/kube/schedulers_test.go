package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestServingSchedulers(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(name, holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
	}
	cases := map[string]struct {
		leases []*coordinationv1.Lease
		events []*corev1.Event
		want   []string
	}{
		"none":                 {want: []string{}},
		"stock lease":          {leases: []*coordinationv1.Lease{lease("kube-scheduler", "cp-1", 5*time.Second)}, want: []string{"default-scheduler", "kube-scheduler"}},
		"suffixed lease":       {leases: []*coordinationv1.Lease{lease("gpupack-scheduler", "p", 0)}, want: []string{"gpupack", "gpupack-scheduler"}},
		"stale lease":          {leases: []*coordinationv1.Lease{lease("volcano", "v", 10*time.Minute)}, want: []string{}},
		"released lease":       {leases: []*coordinationv1.Lease{lease("volcano", "", 0)}, want: []string{}},
		"event from scheduler": {events: []*corev1.Event{{ReportingController: "volcano"}, {Source: corev1.EventSource{Component: "yunikorn"}}}, want: []string{"volcano", "yunikorn"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, servingSchedulers(tc.leases, tc.events, now)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertPodSchedulingFields(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}, Spec: corev1.PodSpec{
		SchedulerName:   "volcano",
		SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}, {Name: "x.io/b"}}}}
	got, _ := convertPod(p)
	if diff := cmp.Diff([]string{"kueue.x-k8s.io/admission", "x.io/b"}, got.SchedulingGates); diff != "" || got.SchedulerName != "volcano" {
		t.Errorf("gates (-want +got):\n%s; schedulerName %q, want volcano", diff, got.SchedulerName)
	}
	p.Spec.SchedulerName, p.Spec.SchedulingGates = "default-scheduler", nil
	if got, _ := convertPod(p); got.SchedulerName != "" || got.SchedulingGates != nil {
		t.Errorf("default scheduler: got %q, gates %v; want empty", got.SchedulerName, got.SchedulingGates)
	}
}
