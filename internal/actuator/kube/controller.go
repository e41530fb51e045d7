package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
)

// Approvals reads the approvals ConfigMap: each key of its data is an
// approved change set hash, its value who approved it. Only the approver
// role may write that ConfigMap (the chart's gpupack-apply-approver Role);
// the controller only reads it. A missing ConfigMap approves nothing.
func (a *Actuator) Approvals(ctx context.Context, namespace, name string) (map[string]string, error) {
	return readApprovals(ctx, a.Client, namespace, name)
}

// Approvals reads reclaim's approvals ConfigMap: each key of its data is
// an approved candidate ID, its value who approved it. Only the approver
// role may write it (the chart's gpupack-reclaim-approver Role); the
// controller only reads it. A missing ConfigMap approves nothing.
func (a *Reclaimer) Approvals(ctx context.Context, namespace, name string) (map[string]string, error) {
	return readApprovals(ctx, a.Client, namespace, name)
}

func readApprovals(ctx context.Context, client kubernetes.Interface, namespace, name string) (map[string]string, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the approvals ConfigMap %s/%s: %w", namespace, name, err)
	}
	return cm.Data, nil
}

// ReleaseStartupTaints removes the mig-pending startup taint from every
// node whose mig-manager state is success, and names those nodes.
func (a *Actuator) ReleaseStartupTaints(ctx context.Context) ([]string, error) {
	nodes, err := a.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var released []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !hasMIGPending(n) || n.Labels[gpuoperator.MIGConfigStateLabel] != gpuoperator.MIGStateSuccess {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := a.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Taints = slices.DeleteFunc(cur.Spec.Taints, func(t corev1.Taint) bool { return t.Key == wellknown.TaintMIGPending })
			_, err = a.Client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{FieldManager: a.Component})
			return err
		})
		if err != nil {
			return released, fmt.Errorf("removing the %s taint of node %s: %w", wellknown.TaintMIGPending, n.Name, err)
		}
		released = append(released, n.Name)
		a.Event(ctx, n.Name, false, "GPUPackMIGReady", fmt.Sprintf("mig-manager applied %s=%s: startup taint %s removed", gpuoperator.MIGConfigLabel, n.Labels[gpuoperator.MIGConfigLabel], wellknown.TaintMIGPending))
	}
	return released, nil
}

func hasMIGPending(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == wellknown.TaintMIGPending })
}
