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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"

	"github.com/gpupack/gpupack/gpu"
)

// Watcher keeps a current view of the cluster's nodes and pods from shared
// informers, for long-running edges. Its State has the scheduler's messages
// from the pods' PodScheduled conditions (it does not watch events). It
// needs the verbs list and watch on nodes and pods at cluster scope.
type Watcher struct {
	client    kubernetes.Interface
	catalogue *gpu.Catalogue
	factory   informers.SharedInformerFactory
	nodes     listersv1.NodeLister
	pods      listersv1.PodLister
}

// NewWatcher prepares the informers; Start runs them.
func NewWatcher(client kubernetes.Interface, c *gpu.Catalogue) *Watcher {
	factory := informers.NewSharedInformerFactory(client, 0)
	return &Watcher{
		client:    client,
		catalogue: c,
		factory:   factory,
		nodes:     factory.Core().V1().Nodes().Lister(),
		pods:      factory.Core().V1().Pods().Lister(),
	}
}

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
	if len(errs) > 0 {
		return explain(errors.Join(errs...), server(w.client))
	}
	w.factory.Start(ctx.Done())
	for informer, synced := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return fmt.Errorf("the %v informer did not sync before %w (does gpupack's user have the verb watch on nodes and pods?)", informer, context.Cause(ctx))
		}
	}
	return nil
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
	return Build(w.catalogue, nodes, pods, nil)
}

// Created returns when each unbound pod that is not finished was created,
// by pod key ("namespace/name"), so that long-running edges can say how
// long a pending pod has waited.
func (w *Watcher) Created() (map[string]time.Time, error) {
	pods, err := w.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[p.Namespace+"/"+p.Name] = p.CreationTimestamp.UTC()
	}
	return out, nil
}
