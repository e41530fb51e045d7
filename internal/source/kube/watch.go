package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// Watcher keeps a current view of the cluster's nodes, pods, DRA objects
// (DeviceClasses, ResourceSlices, ResourceClaims and their templates),
// ResourceQuotas and Kueue's objects (where Kueue is installed) from
// shared informers, for long-running edges, and of the kubelet's Pulled
// events and the PersistentVolumeClaims for the pods' start-up (Startup).
// Its State has the scheduler's messages from its FailedScheduling events
// and the pods' PodScheduled conditions, and, as Load's, the schedulers
// seen running (from Leases and those events). It needs the verbs list and
// watch on each at cluster scope; without them on events, leases or
// claims, State and Startup say what they lack.
type Watcher struct {
	client    kubernetes.Interface
	catalogue *gpu.Catalogue
	factory   informers.SharedInformerFactory
	nodes     listersv1.NodeLister
	pods      listersv1.PodLister
	// dra is nil when the cluster does not serve resource.k8s.io/v1 (Start
	// found out); its informers are then never started.
	dra *draListers
	// pulled and claims read the kubelet's Pulled events and the
	// PersistentVolumeClaims, for Startup; nil where gpupack may not list
	// them (startupWarnings says so).
	pulledFactory   informers.SharedInformerFactory
	pulled          listersv1.EventLister
	claims          listersv1.PersistentVolumeClaimLister
	startupWarnings []string
	// quotas and failedCreate read the ResourceQuotas and the controllers'
	// FailedCreate events, for the workloads a GPU quota keeps from
	// creating pods; nil where gpupack may not list them (quotaWarnings
	// says so).
	failedFactory informers.SharedInformerFactory
	quotas        listersv1.ResourceQuotaLister
	failedCreate  listersv1.EventLister
	quotaWarnings []string
	// leases and failedScheduling tell which schedulers run, as for Load
	// (servingSchedulers), and give the scheduler's FailedScheduling
	// events; nil where gpupack may not list them (schedulerWarnings says
	// so).
	schedulerFactories []informers.SharedInformerFactory
	leases             coordinationlisters.LeaseLister
	failedScheduling   listersv1.EventLister
	schedulerWarnings  []string
	// kueue caches Kueue's objects, by resource; nil where Kueue is not
	// installed or gpupack may not list it (kueueWarnings says which).
	kueueFactory  dynamicinformer.DynamicSharedInformerFactory
	kueue         map[string]cache.GenericLister
	kueueWarnings []string
}

// draListers read the DRA informers' caches.
type draListers struct {
	classes   resourcelisters.DeviceClassLister
	slices    resourcelisters.ResourceSliceLister
	claims    resourcelisters.ResourceClaimLister
	templates resourcelisters.ResourceClaimTemplateLister
	// rules is nil where the apiserver does not serve DeviceTaintRules.
	rules resourcelisters.DeviceTaintRuleLister
}

// NewWatcher prepares the informers; Start runs them. Its informers
// keep their objects lean (leanObject), for a cluster's
// pods are most of what serve holds in memory.
func NewWatcher(client kubernetes.Interface, c *gpu.Catalogue) *Watcher {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(leanObject))
	return &Watcher{
		client:    client,
		catalogue: c,
		factory:   factory,
		nodes:     factory.Core().V1().Nodes().Lister(),
		pods:      factory.Core().V1().Pods().Lister(),
	}
}

// draResources are the DRA resources the Watcher lists and watches.
var draResources = []string{"deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"}

// Start checks that the apiserver answers and lets gpupack list nodes and
// pods (so that a missing permission is an error, not an informer retrying
// forever), starts the informers, and waits until their caches have synced.
// The informers stop when ctx ends. Start must be called once.
func (w *Watcher) Start(ctx context.Context) error {
	core := w.client.CoreV1()
	probe := metav1.ListOptions{Limit: 1}
	var errs []error
	if _, err := core.Nodes().List(ctx, probe); err != nil {
		errs = append(errs, &listError{verb: "list", resource: "nodes", err: err})
	}
	if _, err := core.Pods(metav1.NamespaceAll).List(ctx, probe); err != nil {
		errs = append(errs, &listError{verb: "list", resource: "pods", err: err})
	}
	res := w.client.ResourceV1()
	probes := map[string]func() error{
		"deviceclasses":          func() error { _, err := res.DeviceClasses().List(ctx, probe); return err },
		"resourceslices":         func() error { _, err := res.ResourceSlices().List(ctx, probe); return err },
		"resourceclaims":         func() error { _, err := res.ResourceClaims(metav1.NamespaceAll).List(ctx, probe); return err },
		"resourceclaimtemplates": func() error { _, err := res.ResourceClaimTemplates(metav1.NamespaceAll).List(ctx, probe); return err },
	}
	served := true
	for _, resource := range draResources {
		if err := probes[resource](); err != nil {
			le := &listError{verb: "list", resource: resource, err: err}
			if notServed(le) {
				served = false
				continue
			}
			errs = append(errs, le)
		}
	}
	if len(errs) > 0 {
		return explain(errors.Join(errs...), server(w.client))
	}
	if err := w.startupInformers(ctx, probe); err != nil {
		return explain(err, server(w.client))
	}
	if err := w.quotaInformers(ctx, probe); err != nil {
		return explain(err, server(w.client))
	}
	if err := w.schedulerInformers(ctx); err != nil {
		return explain(err, server(w.client))
	}
	if err := w.kueueInformers(ctx, probe); err != nil {
		return explain(err, server(w.client))
	}
	if served {
		r := w.factory.Resource().V1()
		w.dra = &draListers{
			classes:   r.DeviceClasses().Lister(),
			slices:    r.ResourceSlices().Lister(),
			claims:    r.ResourceClaims().Lister(),
			templates: r.ResourceClaimTemplates().Lister(),
		}
		// DeviceTaintRules are served since Kubernetes 1.37; without them
		// the other DRA objects still read.
		if _, err := res.DeviceTaintRules().List(ctx, probe); err == nil {
			w.dra.rules = r.DeviceTaintRules().Lister()
		} else if le := (&listError{verb: "list", resource: "devicetaintrules", err: err}); !notServed(le) {
			return explain(le, server(w.client))
		}
	}
	w.factory.Start(ctx.Done())
	for informer, synced := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return fmt.Errorf("the %v informer did not sync before %w (does gpupack's user have the verb watch on nodes, pods, persistentvolumeclaims and the resource.k8s.io resources %v?)", informer, context.Cause(ctx), draResources)
		}
	}
	if w.kueueFactory != nil {
		w.kueueFactory.Start(ctx.Done())
		for informer, synced := range w.kueueFactory.WaitForCacheSync(ctx.Done()) {
			if !synced {
				return fmt.Errorf("the %v informer did not sync before %w (does gpupack's user have the verb watch on %v of %s?)", informer, context.Cause(ctx), KueueResources, KueueGroup)
			}
		}
	}
	for _, f := range append([]informers.SharedInformerFactory{w.pulledFactory, w.failedFactory}, w.schedulerFactories...) {
		if f == nil {
			continue
		}
		f.Start(ctx.Done())
		for informer, synced := range f.WaitForCacheSync(ctx.Done()) {
			if !synced {
				return fmt.Errorf("the %v informer did not sync before %w (does gpupack's user have the verb watch on events and leases?)", informer, context.Cause(ctx))
			}
		}
	}
	return nil
}

// quotaInformers prepares the informers of the ResourceQuotas and of the
// controllers' FailedCreate events (an informer of their own, selected at
// the apiserver by reason). A reader that may not list the quotas gets a
// warning, as for Load, and no refusals: without the quota they cannot be
// checked.
func (w *Watcher) quotaInformers(ctx context.Context, probe metav1.ListOptions) error {
	core := w.client.CoreV1()
	_, err := core.ResourceQuotas(metav1.NamespaceAll).List(ctx, probe)
	switch {
	case apierrors.IsForbidden(err):
		w.quotaWarnings = append(w.quotaWarnings, fmt.Sprintf("cannot list resourcequotas: grant verbs \"list\" and \"watch\" on resource \"resourcequotas\" (API group \"\", cluster scope), as deploy/rbac.yaml does; without it gpupack names no workload that a GPU quota keeps from creating pods: %v", err))
		return nil
	case err != nil:
		return &listError{verb: "list", resource: "resourcequotas", err: err}
	}
	_, err = core.Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: failedCreateSelector})
	switch {
	case apierrors.IsForbidden(err):
		w.quotaWarnings = append(w.quotaWarnings, fmt.Sprintf("cannot list events, so no workload that a GPU quota keeps from creating pods is named: grant verbs \"list\" and \"watch\" on resource \"events\", as deploy/rbac.yaml does: %v", err))
		return nil
	case err != nil:
		return &listError{verb: "list", resource: "events", err: err}
	}
	w.quotas = w.factory.Core().V1().ResourceQuotas().Lister()
	w.failedFactory = w.selectedFactory(failedCreateSelector)
	w.failedCreate = w.failedFactory.Core().V1().Events().Lister()
	return nil
}

// schedulerInformers prepares the informers of what tells which schedulers
// run, as Load reads it: the Leases outside kube-node-lease and the
// FailedScheduling events (each an informer of its own, selected at the
// apiserver). A reader that may not list them gets Load's warning, and the
// schedulers stay unknown (no pod is called no-scheduler).
func (w *Watcher) schedulerInformers(ctx context.Context) error {
	notNodeLease := "metadata.namespace!=" + corev1.NamespaceNodeLease
	_, err := w.client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: notNodeLease})
	switch {
	case apierrors.IsForbidden(err):
		w.schedulerWarnings = append(w.schedulerWarnings, fmt.Sprintf("cannot list leases (coordination.k8s.io), so gpupack cannot tell which schedulers run and calls no pod no-scheduler: %v", err))
		return nil
	case err != nil:
		return &listError{verb: "list", resource: "leases", err: err}
	}
	_, err = w.client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: failedSchedulingSelector})
	switch {
	case apierrors.IsForbidden(err):
		w.schedulerWarnings = append(w.schedulerWarnings, fmt.Sprintf("cannot list events, so gpupack cannot tell which schedulers run and calls no pod no-scheduler: %v", err))
		return nil
	case err != nil:
		return &listError{verb: "list", resource: "events", err: err}
	}
	leases := w.selectedFactory(notNodeLease)
	events := w.selectedFactory(failedSchedulingSelector)
	w.leases = leases.Coordination().V1().Leases().Lister()
	w.failedScheduling = events.Core().V1().Events().Lister()
	w.schedulerFactories = []informers.SharedInformerFactory{leases, events}
	return nil
}

// addSchedulers names the schedulers seen serving the cluster in the
// state's snapshot, as Load does, from the informers' caches.
func (w *Watcher) addSchedulers(st *State, events []*corev1.Event) error {
	st.Warnings = append(st.Warnings, w.schedulerWarnings...)
	if w.leases == nil {
		return nil
	}
	leases, err := w.leases.List(labels.Everything())
	if err != nil {
		return err
	}
	st.Snapshot.Schedulers = servingSchedulers(leases, events, time.Now())
	return nil
}

// addQuotas puts the quotas on GPUs and the workloads they refused into
// the state's snapshot, as Load does, from the informers' caches.
func (w *Watcher) addQuotas(st *State) error {
	st.Warnings = append(st.Warnings, w.quotaWarnings...)
	if w.quotas == nil {
		return nil
	}
	quotas, err := w.quotas.List(labels.Everything())
	if err != nil {
		return err
	}
	all, err := w.failedCreate.List(labels.Everything())
	if err != nil {
		return err
	}
	var events []*corev1.Event
	for _, e := range all {
		if strings.Contains(e.Message, "exceeded quota: ") {
			events = append(events, e)
		}
	}
	slices.SortFunc(quotas, func(a, b *corev1.ResourceQuota) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	qs := ConvertQuotas(quotas)
	st.Snapshot.Quotas, st.Snapshot.QuotaRefusals = qs, QuotaRefusals(events, qs)
	return nil
}

// startupInformers prepares the informers of what Startup reads besides
// pods: the kubelet's Pulled events (an informer of their own, selected at
// the apiserver by reason, so that no other event is cached; the apiserver
// keeps events an hour by default, which bounds them) and the
// PersistentVolumeClaims. A forbidden list of either is a warning, as for
// LoadStartup; any other failure is an error.
func (w *Watcher) startupInformers(ctx context.Context, probe metav1.ListOptions) error {
	core := w.client.CoreV1()
	_, err := core.Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: pulledSelector})
	if warning, err := startupListWarning(err, "events", "image pulls are left out of the start-up phases"); err != nil {
		return &listError{verb: "list", resource: "events", err: err}
	} else if warning != "" {
		w.startupWarnings = append(w.startupWarnings, warning)
	} else {
		w.pulledFactory = w.selectedFactory(pulledSelector)
		w.pulled = w.pulledFactory.Core().V1().Events().Lister()
	}
	_, err = core.PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, probe)
	if warning, err := startupListWarning(err, "persistentvolumeclaims", "the storage classes of claims that hold model weights are not known"); err != nil {
		return &listError{verb: "list", resource: "persistentvolumeclaims", err: err}
	} else if warning != "" {
		w.startupWarnings = append(w.startupWarnings, warning)
	} else {
		w.claims = w.factory.Core().V1().PersistentVolumeClaims().Lister()
	}
	return nil
}

// Startup is LoadStartup from the informers' caches: the start-up of each
// bound GPU pod, with the kubelet's Pulled events about it and the storage
// classes of its claims, and the warnings of what gpupack may not read. It
// is safe to call from several goroutines once Start has returned.
func (w *Watcher) Startup() ([]usage.PodEvents, []string, error) {
	all, err := w.pods.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range all {
		if p.Spec.NodeName != "" && podWantsGPU(p) {
			pods[p.Namespace+"/"+p.Name] = p
		}
	}
	events := map[string][]corev1.Event{}
	if w.pulled != nil {
		evs, err := w.pulled.List(labels.Everything())
		if err != nil {
			return nil, nil, err
		}
		for _, e := range evs {
			key := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
			if pulledOf(e, pods[key]) {
				events[key] = append(events[key], *e)
			}
		}
	}
	class := func(namespace, claim string) string {
		if w.claims == nil {
			return ""
		}
		c, err := w.claims.PersistentVolumeClaims(namespace).Get(claim)
		if err != nil {
			return ""
		}
		return storageClass(c)
	}
	return startups(pods, events, class), w.startupWarnings, nil
}

// State builds a State from the informers' caches as they are now. It is
// safe to call from several goroutines once Start has returned.
func (w *Watcher) State() (*State, error) {
	nodes, err := w.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := w.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	// Listers return objects in no particular order; a snapshot lists them
	// as the apiserver does, by name.
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	// The scheduler's FailedScheduling events, as Load reads them, beside
	// the pods' conditions.
	var events []*corev1.Event
	if w.failedScheduling != nil {
		if events, err = w.failedScheduling.List(labels.Everything()); err != nil {
			return nil, err
		}
		slices.SortFunc(events, func(a, b *corev1.Event) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
	}
	var st *State
	if w.dra == nil {
		if st, err = Build(w.catalogue, nodes, pods, events); err != nil {
			return nil, err
		}
		st.Warnings = append(st.Warnings, draNotServed)
	} else {
		dra, err := w.dra.objects()
		if err != nil {
			return nil, err
		}
		if st, err = BuildDRA(w.catalogue, nodes, pods, events, dra); err != nil {
			return nil, err
		}
	}
	if err := w.addSchedulers(st, events); err != nil {
		return nil, err
	}
	if err := w.addQuotas(st); err != nil {
		return nil, err
	}
	return st, w.addKueue(st)
}

// kueueInformers prepares the informers of Kueue's objects when the
// cluster serves them; a reader that may not list them gets a warning, as
// for Load.
func (w *Watcher) kueueInformers(ctx context.Context, probe metav1.ListOptions) error {
	dyn, warnings := kueueClient(w.client)
	w.kueueWarnings = warnings
	if dyn == nil {
		return nil
	}
	var forbidden []string
	for _, res := range KueueResources {
		_, err := dyn.Resource(kueueResource(res)).List(ctx, probe)
		switch {
		case apierrors.IsForbidden(err):
			forbidden = append(forbidden, res)
		case err != nil:
			return &listError{verb: "list", resource: res, err: err}
		}
	}
	if len(forbidden) > 0 {
		w.kueueWarnings = append(w.kueueWarnings, kueueForbidden(forbidden))
		return nil
	}
	w.kueueFactory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	w.kueue = map[string]cache.GenericLister{}
	for _, res := range KueueResources {
		w.kueue[res] = w.kueueFactory.ForResource(kueueResource(res)).Lister()
	}
	return nil
}

// addKueue puts Kueue's objects into the state's snapshot, as Load does,
// from the informers' caches.
func (w *Watcher) addKueue(st *State) error {
	st.Warnings = append(st.Warnings, w.kueueWarnings...)
	if w.kueue == nil {
		return nil
	}
	var objs KueueObjects
	var err error
	if objs.workloads, err = cached[kueueWorkload](w.kueue["workloads"]); err != nil {
		return err
	}
	if objs.localQueues, err = cached[kueueLocalQueue](w.kueue["localqueues"]); err != nil {
		return err
	}
	if objs.clusterQueues, err = cached[kueueClusterQueue](w.kueue["clusterqueues"]); err != nil {
		return err
	}
	if objs.flavors, err = cached[kueueObject](w.kueue["resourceflavors"]); err != nil {
		return err
	}
	k, warnings := ConvertKueue(&objs)
	st.Snapshot.Kueue = k
	st.Warnings = append(st.Warnings, warnings...)
	return nil
}

// cached reads a dynamic informer's objects into gpupack's mirror of
// their fields, sorted by namespace and name as the apiserver lists them.
func cached[T any](l cache.GenericLister) ([]T, error) {
	all, err := l.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var us []*unstructured.Unstructured
	for _, o := range all {
		if u, ok := o.(*unstructured.Unstructured); ok {
			us = append(us, u)
		}
	}
	slices.SortFunc(us, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	out := make([]T, 0, len(us))
	for _, u := range us {
		obj, err := fromUnstructured[T](u)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// objects reads the DRA caches, sorted by namespace and name as the
// apiserver lists them.
func (l *draListers) objects() (*DRAObjects, error) {
	var o DRAObjects
	var err error
	if o.Classes, err = l.classes.List(labels.Everything()); err != nil {
		return nil, err
	}
	if o.Slices, err = l.slices.List(labels.Everything()); err != nil {
		return nil, err
	}
	if o.Claims, err = l.claims.List(labels.Everything()); err != nil {
		return nil, err
	}
	if o.Templates, err = l.templates.List(labels.Everything()); err != nil {
		return nil, err
	}
	if l.rules == nil {
		o.TaintRulesUnserved = true
	} else if o.TaintRules, err = l.rules.List(labels.Everything()); err != nil {
		return nil, err
	}
	byName := func(a, b metav1.Object) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	}
	slices.SortFunc(o.Classes, func(a, b *resourcev1.DeviceClass) int { return byName(a, b) })
	slices.SortFunc(o.Slices, func(a, b *resourcev1.ResourceSlice) int { return byName(a, b) })
	slices.SortFunc(o.Claims, func(a, b *resourcev1.ResourceClaim) int { return byName(a, b) })
	slices.SortFunc(o.Templates, func(a, b *resourcev1.ResourceClaimTemplate) int { return byName(a, b) })
	slices.SortFunc(o.TaintRules, func(a, b *resourcev1.DeviceTaintRule) int { return byName(a, b) })
	return &o, nil
}

// selectedFactory is an informer factory of its own whose lists and
// watches the apiserver narrows by the field selector, so that only the
// objects it selects (events of one reason, Leases outside
// kube-node-lease) are cached.
func (w *Watcher) selectedFactory(fieldSelector string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(w.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = fieldSelector }))
}
