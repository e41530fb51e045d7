package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/cluster"
)

// ReasonFailedCreate is the reason of the warning a workload controller
// (ReplicaSet, Job, StatefulSet, DaemonSet) records on its workload when
// the apiserver refuses a pod it creates (k8s.io/kubernetes
// pkg/controller.FailedCreatePodReason).
const ReasonFailedCreate = "FailedCreate"

// failedCreateSelector selects the controllers' FailedCreate events.
var failedCreateSelector = fields.Set{"reason": ReasonFailedCreate}.AsSelector().String()

// loadQuotas lists the ResourceQuotas and the FailedCreate events, in
// pages, and reads the quotas on GPUs and the workloads a quota refused.
// A reader that may not list resourcequotas gets a warning naming the rule
// that is missing, and no refusals: without the quota they cannot be
// checked.
func loadQuotas(ctx context.Context, client kubernetes.Interface) ([]cluster.ResourceQuota, []cluster.QuotaRefusal, []string, error) {
	core := client.CoreV1()
	quotas, err := listAll[corev1.ResourceQuota](ctx, "resourcequotas", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return core.ResourceQuotas(metav1.NamespaceAll).List(ctx, opts)
	}, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, nil, []string{fmt.Sprintf("cannot list resourcequotas: grant verb \"list\" on resource \"resourcequotas\" (API group \"\", cluster scope), as deploy/rbac.yaml does; without it gpupack names no workload that a GPU quota keeps from creating pods: %v", err)}, nil
		}
		return nil, nil, nil, err
	}
	var events []*corev1.Event
	err = listEach(ctx, "events", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return core.Events(metav1.NamespaceAll).List(ctx, opts)
	}, metav1.ListOptions{FieldSelector: failedCreateSelector}, func(ev *corev1.Event) {
		if strings.Contains(ev.Message, "exceeded quota: ") {
			events = append(events, ev.DeepCopy())
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	qs := ConvertQuotas(quotas)
	return qs, QuotaRefusals(events, qs), nil, nil
}

// ConvertQuotas keeps the quotas that limit GPUs, with the hard limit and
// usage of their GPU resources in whole units, sorted by namespace and
// name.
func ConvertQuotas(quotas []*corev1.ResourceQuota) []cluster.ResourceQuota {
	var out []cluster.ResourceQuota
	for _, q := range quotas {
		hard, used := gpuCounts(q.Status.Hard), gpuCounts(q.Status.Used)
		if len(hard) == 0 {
			continue
		}
		out = append(out, cluster.ResourceQuota{Namespace: q.Namespace, Name: q.Name, Hard: hard, Used: used})
	}
	slices.SortFunc(out, func(a, b cluster.ResourceQuota) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// gpuCounts are the GPU resources of a list that are whole numbers.
func gpuCounts(l corev1.ResourceList) map[string]int64 {
	out := map[string]int64{}
	for name, q := range l {
		if !cluster.GPUResource(string(name)) || q.MilliValue()%1000 != 0 || q.Sign() < 0 {
			continue
		}
		out[string(name)] = q.Value()
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// QuotaRefusals reads the FailedCreate events whose message is a GPU
// quota's refusal: one per workload and quota, the latest, counted over
// all of its events. A refusal by a quota that no longer exists is left
// out: the controller creates the pod on its next try.
func QuotaRefusals(events []*corev1.Event, quotas []cluster.ResourceQuota) []cluster.QuotaRefusal {
	exists := map[string]bool{}
	for _, q := range quotas {
		exists[q.Key()] = true
	}
	type key struct {
		w     cluster.Workload
		quota string
	}
	latest := map[key]time.Time{}
	byKey := map[key]*cluster.QuotaRefusal{}
	var order []key
	for _, ev := range events {
		if ev.Type != corev1.EventTypeWarning || ev.Reason != ReasonFailedCreate {
			continue
		}
		r, ok := cluster.ParseQuotaExceeded(ev.Message)
		o := ev.InvolvedObject
		if !ok || o.Kind == "" || o.Name == "" || !exists[o.Namespace+"/"+r.Quota] {
			continue
		}
		r.Workload = cluster.Workload{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
		k := key{r.Workload, r.Quota}
		count := max(int(ev.Count), 1)
		if ev.Series != nil {
			count = max(count, int(ev.Series.Count))
		}
		t := eventTime(ev)
		prev, seen := byKey[k]
		switch {
		case !seen:
			order = append(order, k)
		case t.Before(latest[k]):
			prev.Count += count
			continue
		default:
			count += prev.Count
		}
		r.Count = count
		byKey[k], latest[k] = &r, t
	}
	out := make([]cluster.QuotaRefusal, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	slices.SortStableFunc(out, func(a, b cluster.QuotaRefusal) int {
		return strings.Compare(a.Workload.Namespace+"/"+a.Workload.Kind+"/"+a.Workload.Name, b.Workload.Namespace+"/"+b.Workload.Kind+"/"+b.Workload.Name)
	})
	return out
}
