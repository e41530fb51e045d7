package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/reclaim"
)

// The neighbours' resources that reclaim reads and writes.
var (
	NotebookResource     = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "notebooks"}
	ScaledObjectResource = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	WorkloadResource     = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "workloads"}
)

// ReclaimWorld is what reclaim's detection reads of a live cluster: its
// running GPU pods, their owners and the namespaces' reclaim labels.
type ReclaimWorld struct {
	Pods       []reclaim.PodState
	Owners     map[string]*reclaim.Owner
	Namespaces map[string]string
	Warnings   []string
}

// errNoHTTP is Dynamic's refusal of a clientset without a connection.
var errNoHTTP = errors.New("the client has no HTTP connection of its own (a fake)")

// Dynamic makes a dynamic client from the clientset's own REST client (its
// HTTP client carries the credentials); nil for a fake clientset.
func Dynamic(client kubernetes.Interface) (dynamic.Interface, error) {
	rc, ok := client.Discovery().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil {
		return nil, errNoHTTP
	}
	return dynamic.NewForConfigAndClient(&rest.Config{Host: rc.Get().URL().String()}, rc.Client)
}

// ReadReclaim lists the running pods that hold GPUs (isGPU says which
// pods do), resolves each one's owner up the controller chain (ReplicaSet
// to Deployment, StatefulSet to a Kubeflow Notebook, Job to its Kueue
// Workload) with the KEDA ScaledObject or HorizontalPodAutoscaler that
// scales it, and reads the namespaces' gpupack.io/reclaim labels. A
// neighbour's API that is not installed is skipped quietly; one that
// cannot be read is a warning, and its owners are left unsupported rather
// than guessed.
func ReadReclaim(ctx context.Context, client kubernetes.Interface, isGPU func(*corev1.Pod) bool) (*ReclaimWorld, error) {
	w := &ReclaimWorld{Owners: map[string]*reclaim.Owner{}, Namespaces: map[string]string{}}
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		if v, ok := ns.Labels[wellknown.LabelReclaim]; ok {
			w.Namespaces[ns.Name] = v
		}
	}
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	r := &resolver{ctx: ctx, client: client, world: w}
	r.dyn, _ = Dynamic(client)
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || !isGPU(p) {
			continue
		}
		st := reclaim.PodState{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Node: p.Spec.NodeName,
			Created: p.CreationTimestamp.Time, Ready: podReady(p), Labels: p.Labels, Annotations: p.Annotations}
		st.Owner = r.owner(p)
		w.Pods = append(w.Pods, st)
	}
	return w, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// resolver walks owner chains, reading each object once.
type resolver struct {
	ctx    context.Context
	client kubernetes.Interface
	dyn    dynamic.Interface
	world  *ReclaimWorld
	// scalers caches each namespace's ScaledObjects and HPAs.
	scalers map[string][]scaler
	warned  map[string]bool
}

type scaler struct {
	ref         reclaim.Ref
	targetKind  string
	targetName  string
	annotations map[string]string
}

// owner resolves the pod's owner, records it in the world, and returns its
// key; "" for a pod with no controller (detection makes it its own).
func (r *resolver) owner(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return ""
	}
	var o *reclaim.Owner
	switch ref.Kind {
	case "ReplicaSet":
		o = r.replicaSet(p.Namespace, ref.Name)
	case "StatefulSet":
		o = r.statefulSet(p.Namespace, ref.Name)
	case "Job":
		o = r.job(p.Namespace, ref.Name)
	default:
		o = &reclaim.Owner{Ref: reclaim.Ref{Kind: reclaim.Kind(ref.Kind), APIVersion: ref.APIVersion, Namespace: p.Namespace, Name: ref.Name, UID: string(ref.UID)},
			Unsupported: fmt.Sprintf("%s %s/%s: reclaim cannot pause a %s; remove its GPU request or scale it by hand", ref.Kind, p.Namespace, ref.Name, ref.Kind)}
	}
	key := reclaim.OwnerKey(o.Kind, o.Namespace, o.Name)
	if _, ok := r.world.Owners[key]; !ok {
		if o.Kind == reclaim.Deployment || o.Kind == reclaim.StatefulSet || o.Kind == reclaim.ReplicaSet {
			r.attachScaler(o)
		}
		r.world.Owners[key] = o
	}
	return key
}

func (r *resolver) failed(what string, err error) *reclaim.Owner {
	return &reclaim.Owner{Unsupported: fmt.Sprintf("reading %s: %v; grant gpupack get on it", what, err)}
}

func (r *resolver) replicaSet(ns, name string) *reclaim.Owner {
	rs, err := r.client.AppsV1().ReplicaSets(ns).Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		return withRef(r.failed("ReplicaSet "+ns+"/"+name, err), reclaim.ReplicaSet, "apps/v1", ns, name)
	}
	if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
		d, err := r.client.AppsV1().Deployments(ns).Get(r.ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return withRef(r.failed("Deployment "+ns+"/"+ref.Name, err), reclaim.Deployment, "apps/v1", ns, ref.Name)
		}
		return scalable(reclaim.Deployment, &d.ObjectMeta, d.Spec.Replicas)
	}
	return scalable(reclaim.ReplicaSet, &rs.ObjectMeta, rs.Spec.Replicas)
}

func (r *resolver) statefulSet(ns, name string) *reclaim.Owner {
	s, err := r.client.AppsV1().StatefulSets(ns).Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		return withRef(r.failed("StatefulSet "+ns+"/"+name, err), reclaim.StatefulSet, "apps/v1", ns, name)
	}
	if ref := metav1.GetControllerOf(s); ref != nil && ref.Kind == "Notebook" && strings.HasPrefix(ref.APIVersion, "kubeflow.org/") {
		return r.notebook(ns, ref.Name, s)
	}
	return scalable(reclaim.StatefulSet, &s.ObjectMeta, s.Spec.Replicas)
}

func (r *resolver) notebook(ns, name string, s *appsv1.StatefulSet) *reclaim.Owner {
	if r.dyn == nil {
		return withRef(&reclaim.Owner{Unsupported: "no client for kubeflow.org Notebooks"}, reclaim.Notebook, "kubeflow.org/v1", ns, name)
	}
	u, err := r.dyn.Resource(NotebookResource).Namespace(ns).Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		return withRef(r.failed("Notebook "+ns+"/"+name, err), reclaim.Notebook, "kubeflow.org/v1", ns, name)
	}
	o := fromObject(reclaim.Notebook, "kubeflow.org/v1", u)
	o.Replicas = s.Spec.Replicas
	return o
}

func (r *resolver) job(ns, name string) *reclaim.Owner {
	j, err := r.client.BatchV1().Jobs(ns).Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		return withRef(r.failed("Job "+ns+"/"+name, err), reclaim.Job, "batch/v1", ns, name)
	}
	if w := r.kueueWorkload(ns, j.UID); w != nil {
		return w
	}
	o := fromMeta(reclaim.Job, "batch/v1", &j.ObjectMeta)
	o.Suspended = j.Spec.Suspend != nil && *j.Spec.Suspend
	return o
}

// kueueWorkload finds the Kueue Workload that the Job with this UID owns
// (Kueue makes one per job it manages); nil when Kueue is absent or none.
func (r *resolver) kueueWorkload(ns string, jobUID types.UID) *reclaim.Owner {
	if r.dyn == nil {
		return nil
	}
	list, err := r.dyn.Resource(WorkloadResource).Namespace(ns).List(r.ctx, metav1.ListOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			r.warn("kueue", fmt.Sprintf("cannot list Kueue Workloads (%v): a Job Kueue manages is suspended rather than deactivated, and Kueue may resume it", err))
		}
		return nil
	}
	for i := range list.Items {
		u := &list.Items[i]
		for _, ref := range u.GetOwnerReferences() {
			if ref.UID == jobUID {
				o := fromObject(reclaim.Workload, WorkloadResource.GroupVersion().String(), u)
				if active, found, _ := unstructured.NestedBool(u.Object, "spec", "active"); found {
					o.Active = &active
				}
				return o
			}
		}
	}
	return nil
}

// attachScaler finds the ScaledObject (first) or HPA that scales o.
func (r *resolver) attachScaler(o *reclaim.Owner) {
	for _, s := range r.namespaceScalers(o.Namespace) {
		kind := s.targetKind
		if kind == "" {
			kind = "Deployment"
		}
		if kind == string(o.Kind) && s.targetName == o.Name {
			ref := s.ref
			o.Scaler, o.ScalerAnnotations = &ref, s.annotations
			return
		}
	}
}

func (r *resolver) namespaceScalers(ns string) []scaler {
	if r.scalers == nil {
		r.scalers = map[string][]scaler{}
	}
	if s, ok := r.scalers[ns]; ok {
		return s
	}
	var out []scaler
	if r.dyn != nil {
		list, err := r.dyn.Resource(ScaledObjectResource).Namespace(ns).List(r.ctx, metav1.ListOptions{})
		switch {
		case err == nil:
			for i := range list.Items {
				u := &list.Items[i]
				kind, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "kind")
				name, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
				out = append(out, scaler{ref: refOf(reclaim.ScaledObject, "keda.sh/v1alpha1", u), targetKind: kind, targetName: name, annotations: u.GetAnnotations()})
			}
		case !apierrors.IsNotFound(err):
			r.warn("keda", fmt.Sprintf("cannot list KEDA ScaledObjects (%v): a KEDA-scaled workload would be scaled to zero and KEDA would scale it back", err))
		}
	}
	hpas, err := r.client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(r.ctx, metav1.ListOptions{})
	if err != nil {
		r.warn("hpa", fmt.Sprintf("cannot list HorizontalPodAutoscalers: %v", err))
	} else {
		for _, h := range hpas.Items {
			if slices.ContainsFunc(h.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "ScaledObject" }) {
				continue // KEDA's own HPA: the ScaledObject above stands for it
			}
			out = append(out, scaler{ref: reclaim.Ref{Kind: reclaim.HorizontalPodAutoscaler, APIVersion: "autoscaling/v2", Namespace: ns, Name: h.Name, UID: string(h.UID)},
				targetKind: h.Spec.ScaleTargetRef.Kind, targetName: h.Spec.ScaleTargetRef.Name, annotations: h.Annotations})
		}
	}
	r.scalers[ns] = out
	return out
}

func (r *resolver) warn(key, msg string) {
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	if !r.warned[key] {
		r.warned[key] = true
		r.world.Warnings = append(r.world.Warnings, msg)
	}
}

func scalable(kind reclaim.Kind, m *metav1.ObjectMeta, replicas *int32) *reclaim.Owner {
	o := fromMeta(kind, "apps/v1", m)
	o.Replicas = replicas
	if o.Replicas == nil {
		one := int32(1)
		o.Replicas = &one
	}
	return o
}

func fromMeta(kind reclaim.Kind, apiVersion string, m *metav1.ObjectMeta) *reclaim.Owner {
	return &reclaim.Owner{Ref: reclaim.Ref{Kind: kind, APIVersion: apiVersion, Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}, Labels: m.Labels, Annotations: m.Annotations}
}

func fromObject(kind reclaim.Kind, apiVersion string, u *unstructured.Unstructured) *reclaim.Owner {
	return &reclaim.Owner{Ref: refOf(kind, apiVersion, u), Labels: u.GetLabels(), Annotations: u.GetAnnotations()}
}

func refOf(kind reclaim.Kind, apiVersion string, u *unstructured.Unstructured) reclaim.Ref {
	return reclaim.Ref{Kind: kind, APIVersion: apiVersion, Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID())}
}

func withRef(o *reclaim.Owner, kind reclaim.Kind, apiVersion, ns, name string) *reclaim.Owner {
	o.Ref = reclaim.Ref{Kind: kind, APIVersion: apiVersion, Namespace: ns, Name: name}
	return o
}
