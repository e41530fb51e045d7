package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
)

// Budgets reads the PodDisruptionBudgets of the pods bound to nodes, as
// the disruption controller last counted them (status.disruptionsAllowed),
// by pod. A pod that several budgets select gets the one that allows the
// fewest disruptions, and a warning: the Eviction API refuses to evict
// such a pod at all.
func Budgets(ctx context.Context, client kubernetes.Interface) (map[cluster.PodKey]change.Budget, []string, error) {
	pdbs, err := client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing PodDisruptionBudgets (policy/v1), which apply needs to honour them: %w", err)
	}
	if len(pdbs.Items) == 0 {
		return map[cluster.PodKey]change.Budget{}, nil, nil
	}
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	out := map[cluster.PodKey]change.Budget{}
	count := map[cluster.PodKey]int{}
	var warnings []string
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("PodDisruptionBudget %s/%s: its selector does not parse (%v); the pods it means are taken as unprotected", pdb.Namespace, pdb.Name, err))
			continue
		}
		if sel.Empty() && pdb.Spec.Selector == nil {
			sel = labels.Nothing() // a nil selector selects no pod
		}
		b := change.Budget{Namespace: pdb.Namespace, Name: pdb.Name, DisruptionsAllowed: int(pdb.Status.DisruptionsAllowed)}
		for j := range pods.Items {
			p := &pods.Items[j]
			if p.Namespace != pdb.Namespace || finished(p) || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			key := cluster.PodKey{Namespace: p.Namespace, Name: p.Name}
			count[key]++
			if old, ok := out[key]; !ok || b.DisruptionsAllowed < old.DisruptionsAllowed {
				out[key] = b
			}
		}
	}
	var several []string
	for key, n := range count {
		if n > 1 {
			several = append(several, fmt.Sprintf("pod %s is selected by %d PodDisruptionBudgets; the Eviction API refuses to evict it until one is left", key, n))
		}
	}
	slices.Sort(several)
	return out, append(warnings, several...), nil
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
