package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/cluster"
)

// Kueue's API: the group and the version gpupack reads, Kueue's storage
// version since v0.15 (its CRDs in sigs.k8s.io/kueue
// config/components/crd/bases).
const (
	KueueGroup   = "kueue.x-k8s.io"
	KueueVersion = "v1beta2"
)

// KueueResources are the Kueue resources gpupack lists, as the reader
// role grants them.
var KueueResources = []string{"workloads", "localqueues", "clusterqueues", "resourceflavors"}

// The parts of Kueue's objects gpupack reads, by the field names of the
// v1beta2 CRDs (sigs.k8s.io/kueue apis/kueue/v1beta2): a small mirror
// rather than Kueue's Go types, whose module would bring its
// dependencies into both of gpupack's modules. The live test writes these
// fields to an apiserver that serves Kueue's real CRDs with strict field
// validation, so a name that is wrong here fails there.
type (
	kueueObject struct {
		Metadata struct {
			Namespace       string                  `json:"namespace"`
			Name            string                  `json:"name"`
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	kueueWorkload struct {
		kueueObject
		Spec struct {
			QueueName string `json:"queueName"`
			Active    *bool  `json:"active"`
			PodSets   []struct {
				Name     string                 `json:"name"`
				Count    int32                  `json:"count"`
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"podSets"`
		} `json:"spec"`
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
			Admission  *struct {
				ClusterQueue string `json:"clusterQueue"`
			} `json:"admission"`
			ResourceRequests []struct {
				Name      string              `json:"name"`
				Resources corev1.ResourceList `json:"resources"`
			} `json:"resourceRequests"`
		} `json:"status"`
	}
	kueueLocalQueue struct {
		kueueObject
		Spec struct {
			ClusterQueue string `json:"clusterQueue"`
			StopPolicy   string `json:"stopPolicy"`
		} `json:"spec"`
	}
	kueueClusterQueue struct {
		kueueObject
		Spec struct {
			CohortName     string `json:"cohortName"`
			StopPolicy     string `json:"stopPolicy"`
			ResourceGroups []struct {
				Flavors []struct {
					Name      string `json:"name"`
					Resources []struct {
						Name           string             `json:"name"`
						NominalQuota   resource.Quantity  `json:"nominalQuota"`
						BorrowingLimit *resource.Quantity `json:"borrowingLimit"`
						LendingLimit   *resource.Quantity `json:"lendingLimit"`
					} `json:"resources"`
				} `json:"flavors"`
			} `json:"resourceGroups"`
		} `json:"spec"`
		Status struct {
			Conditions         []metav1.Condition `json:"conditions"`
			FlavorsReservation []struct {
				Name      string `json:"name"`
				Resources []struct {
					Name  string            `json:"name"`
					Total resource.Quantity `json:"total"`
				} `json:"resources"`
			} `json:"flavorsReservation"`
		} `json:"status"`
	}
)

// Kueue's condition types (apis/kueue/v1beta2).
const (
	kueueQuotaReserved = "QuotaReserved"
	kueueActive        = "Active"
)

// KueueObjects are Kueue's objects as listed.
type KueueObjects struct {
	workloads     []kueueWorkload
	localQueues   []kueueLocalQueue
	clusterQueues []kueueClusterQueue
	flavors       []kueueObject
}

// loadKueue lists Kueue's objects through the clientset's REST client. A
// cluster without Kueue (the group is not served: its CRDs are not
// installed) gives nil and no warning; one whose Kueue serves no v1beta2,
// or that the reader may not list, gives nil and a warning that says what
// to do.
func loadKueue(ctx context.Context, client kubernetes.Interface) (*cluster.Kueue, []string, error) {
	objs, warning, err := listKueue(ctx, client)
	if err != nil || objs == nil {
		return nil, warning, err
	}
	k, warnings := ConvertKueue(objs)
	return k, append(warning, warnings...), nil
}

func listKueue(ctx context.Context, client kubernetes.Interface) (*KueueObjects, []string, error) {
	dyn, warnings := kueueClient(client)
	if dyn == nil {
		return nil, warnings, nil
	}
	objs := &KueueObjects{}
	lists := []func() error{
		func() (err error) {
			objs.workloads, err = listKueueResource[kueueWorkload](ctx, dyn, "workloads")
			return
		},
		func() (err error) {
			objs.localQueues, err = listKueueResource[kueueLocalQueue](ctx, dyn, "localqueues")
			return
		},
		func() (err error) {
			objs.clusterQueues, err = listKueueResource[kueueClusterQueue](ctx, dyn, "clusterqueues")
			return
		},
		func() (err error) {
			objs.flavors, err = listKueueResource[kueueObject](ctx, dyn, "resourceflavors")
			return
		},
	}
	var forbidden []string
	for _, list := range lists {
		if err := list(); err != nil {
			var le *listError
			if errors.As(err, &le) && apierrors.IsForbidden(le.err) {
				forbidden = append(forbidden, le.resource)
				continue
			}
			return nil, nil, err
		}
	}
	if len(forbidden) > 0 {
		return nil, []string{kueueForbidden(forbidden)}, nil
	}
	return objs, nil, nil
}

// kueueForbidden is the warning for a reader that may not list Kueue's
// objects.
func kueueForbidden(resources []string) string {
	return fmt.Sprintf("cannot list %s: grant verbs \"list\" and \"watch\" on resources %s (API group %q, cluster scope), as deploy/rbac.yaml does; without them gpupack says of a pod Kueue gates only that it is gated", strings.Join(resources, ", "), strings.Join(KueueResources, ", "), KueueGroup)
}

// kueueClient is a dynamic client for Kueue's objects when the cluster
// serves kueue.x-k8s.io/v1beta2, made from the clientset's own REST
// client (its HTTP client carries the credentials). Nil when Kueue is not
// installed (no warning: a cluster without Kueue is normal), or with a
// warning when gpupack cannot read it.
func kueueClient(client kubernetes.Interface) (dynamic.Interface, []string) {
	groups, err := client.Discovery().ServerGroups()
	if err != nil {
		return nil, []string{fmt.Sprintf("cannot tell whether Kueue is installed (API discovery failed), so no Kueue Workload is read: %v", err)}
	}
	var versions []string
	for _, g := range groups.Groups {
		if g.Name == KueueGroup {
			for _, v := range g.Versions {
				versions = append(versions, v.Version)
			}
		}
	}
	switch {
	case versions == nil:
		return nil, nil // Kueue is not installed
	case !slices.Contains(versions, KueueVersion):
		return nil, []string{fmt.Sprintf("Kueue serves %s %s, not %s (Kueue before v0.15): gpupack reads no Kueue Workload", KueueGroup, strings.Join(versions, ", "), KueueVersion)}
	}
	dyn, err := Dynamic(client)
	if errors.Is(err, errNoHTTP) {
		return nil, []string{errNoHTTP.Error() + ", so no Kueue object is read"}
	}
	if err != nil {
		return nil, []string{fmt.Sprintf("cannot make a client for Kueue's objects, so none is read: %v", err)}
	}
	return dyn, nil
}

// kueueResource is the resource of Kueue's API.
func kueueResource(res string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: res}
}

// listKueueResource lists one Kueue resource at cluster scope, page by
// page, reading each object into gpupack's mirror of its fields.
func listKueueResource[T any](ctx context.Context, dyn dynamic.Interface, res string) ([]T, error) {
	var out []T
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		page, err := dyn.Resource(kueueResource(res)).List(ctx, opts)
		if err != nil {
			return nil, &listError{verb: "list", resource: res, err: err}
		}
		for i := range page.Items {
			obj, err := fromUnstructured[T](&page.Items[i])
			if err != nil {
				return nil, &listError{verb: "list", resource: res, err: err}
			}
			out = append(out, obj)
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// fromUnstructured reads an object into gpupack's mirror of its fields.
func fromUnstructured[T any](u *unstructured.Unstructured) (T, error) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return out, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// ConvertKueue turns Kueue's objects into the snapshot's Kueue, in
// Kueue's integer units. An amount that is negative or absurdly large is
// left out with a warning that names the object.
func ConvertKueue(objs *KueueObjects) (*cluster.Kueue, []string) {
	k := &cluster.Kueue{Flavors: []string{}}
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	for _, f := range objs.flavors {
		k.Flavors = append(k.Flavors, f.Metadata.Name)
	}
	for _, w := range objs.workloads {
		out := cluster.KueueWorkload{Namespace: w.Metadata.Namespace, Name: w.Metadata.Name, Queue: w.Spec.QueueName,
			Inactive: w.Spec.Active != nil && !*w.Spec.Active}
		for _, o := range w.Metadata.OwnerReferences {
			if o.Kind == "Pod" && o.APIVersion == "v1" {
				out.Pods = append(out.Pods, o.Name)
			}
		}
		if a := w.Status.Admission; a != nil {
			out.ClusterQueue = a.ClusterQueue
		}
		for _, c := range w.Status.Conditions {
			if c.Type == kueueQuotaReserved && c.Status == metav1.ConditionFalse {
				out.Pending = c.Message
			}
		}
		var bad []string
		out.Requests, bad = workloadRequests(&w)
		if len(bad) > 0 {
			warn("workload %s/%s: %s: absurd or negative, left out", out.Namespace, out.Name, strings.Join(bad, ", "))
		}
		k.Workloads = append(k.Workloads, out)
	}
	for _, q := range objs.localQueues {
		k.LocalQueues = append(k.LocalQueues, cluster.KueueLocalQueue{Namespace: q.Metadata.Namespace, Name: q.Metadata.Name,
			ClusterQueue: q.Spec.ClusterQueue, StopPolicy: q.Spec.StopPolicy})
	}
	for _, q := range objs.clusterQueues {
		out := cluster.KueueClusterQueue{Name: q.Metadata.Name, Cohort: q.Spec.CohortName, StopPolicy: q.Spec.StopPolicy}
		for _, c := range q.Status.Conditions {
			if c.Type == kueueActive {
				out.Active = &cluster.KueueCondition{Status: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message}
			}
		}
		reserved := map[[2]string]int64{}
		for _, f := range q.Status.FlavorsReservation {
			for _, r := range f.Resources {
				if v, ok := kueueValue(r.Name, r.Total); ok {
					reserved[[2]string{f.Name, r.Name}] = v
				} else {
					warn("clusterqueue %s: status.flavorsReservation %s %s: %s is absurd or negative, left out", q.Metadata.Name, f.Name, r.Name, r.Total.String())
				}
			}
		}
		for g, group := range q.Spec.ResourceGroups {
			for _, f := range group.Flavors {
				for _, r := range f.Resources {
					x := cluster.KueueQuota{Group: g, Flavor: f.Name, Resource: r.Name}
					v, ok := kueueValue(r.Name, r.NominalQuota)
					if !ok {
						warn("clusterqueue %s: nominalQuota of flavor %s for %s: %s is absurd or negative; taken as 0", q.Metadata.Name, f.Name, r.Name, r.NominalQuota.String())
					}
					x.Nominal = v
					for _, l := range []struct {
						field string
						q     *resource.Quantity
						to    **int64
					}{{"borrowingLimit", r.BorrowingLimit, &x.BorrowingLimit}, {"lendingLimit", r.LendingLimit, &x.LendingLimit}} {
						if l.q == nil {
							continue
						}
						if v, ok := kueueValue(r.Name, *l.q); ok {
							*l.to = &v
						} else {
							warn("clusterqueue %s: %s of flavor %s for %s: %s is absurd or negative, left out", q.Metadata.Name, l.field, f.Name, r.Name, l.q.String())
						}
					}
					if v, ok := reserved[[2]string{f.Name, r.Name}]; ok {
						x.Reserved = &v
					}
					out.Quotas = append(out.Quotas, x)
				}
			}
		}
		k.ClusterQueues = append(k.ClusterQueues, out)
	}
	return k, warnings
}

// workloadRequests are what all of a Workload's pods ask for: Kueue's
// status.resourceRequests where it stated them, else each pod set's count
// times its pod's requests as the scheduler counts them (podRequests).
// The resources whose sum is absurd are named in bad.
func workloadRequests(w *kueueWorkload) (map[string]int64, []string) {
	total := map[string]int64{}
	var bad []string
	add := func(name string, v int64, ok bool) {
		if !ok || total[name] > cluster.MaxKueueAmount-v {
			if !slices.Contains(bad, name) {
				bad = append(bad, name)
			}
			return
		}
		total[name] += v
	}
	if len(w.Status.ResourceRequests) > 0 {
		for _, ps := range w.Status.ResourceRequests {
			for name, q := range ps.Resources {
				v, ok := kueueValue(string(name), q)
				add(string(name), v, ok)
			}
		}
	} else {
		for _, ps := range w.Spec.PodSets {
			for name, q := range podRequests(&corev1.Pod{Spec: ps.Template.Spec}) {
				v, ok := kueueValue(string(name), q)
				if !ok || ps.Count < 0 || (ps.Count > 0 && v > cluster.MaxKueueAmount/int64(ps.Count)) {
					add(string(name), 0, false)
					continue
				}
				add(string(name), v*int64(ps.Count), true)
			}
		}
	}
	for _, name := range bad {
		delete(total, name)
	}
	return total, bad
}

// kueueValue is an amount in Kueue's units (its
// pkg/resources.ResourceValue: milli-CPU for cpu, else the base unit); ok
// is false for a negative or absurdly large one.
func kueueValue(name string, q resource.Quantity) (int64, bool) {
	limit := cluster.MaxKueueAmount
	if name == string(corev1.ResourceCPU) {
		limit /= 1000
	}
	if q.Sign() < 0 || q.Cmp(*resource.NewQuantity(limit, resource.DecimalSI)) > 0 {
		return 0, false
	}
	if name == string(corev1.ResourceCPU) {
		return q.MilliValue(), true
	}
	return q.Value(), true
}
