package testcluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/internal/gpusim/operator"
)

// StartGPUOperator runs the stand-in for the GPU operator's mig-manager and
// device plugin (internal/gpusim/operator) on the cluster's nodes until the
// test ends, logging to the test unless opts says otherwise, and creates
// the namespace of its ConfigMaps when missing. It returns once the
// stand-in has seen every node that exists now; it acts only on label
// changes it sees after that (WaitGPUOperatorSeen for a node added later).
func (c *Cluster) StartGPUOperator(opts operator.Options) *operator.Operator {
	c.t.Helper()
	if opts.Logf == nil {
		opts.Logf = c.t.Logf
	}
	ns := opts.Namespace
	if ns == "" {
		ns = gpuoperator.OperatorNamespace
	}
	c.ensureNamespace(ns)
	op := operator.New(c.client, opts)
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.t.Context()))
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	c.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			c.t.Errorf("testcluster: GPU operator stand-in: %v", err)
		}
	})
	select {
	case <-op.Started():
	case err := <-done:
		c.t.Fatalf("testcluster: GPU operator stand-in stopped before it listed the nodes: %v", err)
	case <-c.t.Context().Done():
		c.t.Fatalf("testcluster: GPU operator stand-in: the test ended before it listed the nodes")
	}
	return op
}

// WaitGPUOperatorSeen waits until op has seen the GPU node name, so that
// the node's label changes from now on are acted on.
func (c *Cluster) WaitGPUOperatorSeen(op *operator.Operator, name string) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(c.t.Context(), pollInterval, c.timeout, true, func(context.Context) (bool, error) {
		return op.Seen(name), nil
	})
	if err != nil {
		c.t.Fatalf("testcluster: the GPU operator stand-in has not seen node %q after %v (a GPU node has the %s label): %v", name, c.timeout, LabelGPUCount, err)
	}
}

// SetConfigMap creates the ConfigMap namespace/name with data, or replaces
// the data of the one there: the GPU operator's and device plugin's
// configurations that a test writes.
func (c *Cluster) SetConfigMap(namespace, name string, data map[string]string) {
	c.t.Helper()
	ctx := c.t.Context()
	cms := c.client.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}, metav1.CreateOptions{})
	case err == nil:
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		c.t.Fatalf("testcluster: set ConfigMap %s/%s: %v", namespace, name, err)
	}
}

// ensureNamespace creates the namespace unless it exists.
func (c *Cluster) ensureNamespace(name string) {
	c.t.Helper()
	_, err := c.client.CoreV1().Namespaces().Get(c.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.CreateNamespace(name)
		return
	}
	if err != nil {
		c.t.Fatalf("testcluster: read namespace %q: %v", name, err)
	}
}
