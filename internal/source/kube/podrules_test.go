package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
)

func TestConvertPodRules(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "version", Operator: metav1.LabelSelectorOpIn, Values: []string{"v2"}}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}, Spec: corev1.PodSpec{
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: web, MatchLabelKeys: []string{"version"}, MinDomains: ptr.To[int32](2),
			NodeAffinityPolicy: ptr.To(corev1.NodeInclusionPolicyIgnore), NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor)},
			{MaxSkew: 3, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway}},
		Affinity: &corev1.Affinity{
			PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname", LabelSelector: web, Namespaces: []string{"data"}}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "topology.kubernetes.io/zone", LabelSelector: web, NamespaceSelector: &metav1.LabelSelector{}, MismatchLabelKeys: []string{"team"}}}}}}}
	got, _ := convertPod(p)
	sel := &cluster.LabelSelector{MatchLabels: map[string]string{"app": "web"}, MatchExpressions: []cluster.Requirement{{Key: "version", Operator: "In", Values: []string{"v2"}}}}
	want := struct {
		Spread        []cluster.SpreadConstraint
		Affinity, Not []cluster.PodAffinityTerm
	}{
		Spread: []cluster.SpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: cluster.DoNotSchedule, LabelSelector: sel,
			MatchLabelKeys: []string{"version"}, MinDomains: ptr.To[int32](2), NodeAffinityPolicy: cluster.PolicyIgnore, NodeTaintsPolicy: cluster.PolicyHonor},
			{MaxSkew: 3, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: cluster.ScheduleAnyway}},
		Affinity: []cluster.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname", LabelSelector: sel, Namespaces: []string{"data"}}},
		Not:      []cluster.PodAffinityTerm{{TopologyKey: "topology.kubernetes.io/zone", LabelSelector: sel, NamespaceSelector: &cluster.LabelSelector{}, MismatchLabelKeys: []string{"team"}}},
	}
	if diff := cmp.Diff(want.Spread, got.SpreadConstraints); diff != "" {
		t.Errorf("spread (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Affinity, got.PodAffinity); diff != "" {
		t.Errorf("podAffinity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Not, got.PodAntiAffinity); diff != "" {
		t.Errorf("podAntiAffinity (-want +got):\n%s", diff)
	}
}
