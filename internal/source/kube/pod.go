package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// maxGPUMemory bounds wellknown.AnnotationGPUMemory far above any GPU, so that a
// hostile value cannot overflow the MiB count.
var maxGPUMemory = resource.MustParse("1Pi")

// holdsResources reports whether the pod can hold node resources: every pod
// but those that have finished.
func holdsResources(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// convertPod builds the snapshot pod; warnings say what of its request could
// not be represented.
func convertPod(p *corev1.Pod) (*cluster.Pod, []string) {
	req := podRequests(p)
	out := &cluster.Pod{
		Namespace:    p.Namespace,
		Name:         p.Name,
		NodeSelector: p.Spec.NodeSelector,
		Labels:       p.Labels,
		NodeName:     p.Spec.NodeName,
	}
	if p.Spec.SchedulerName != cluster.DefaultScheduler {
		out.SchedulerName = p.Spec.SchedulerName
	}
	for _, g := range p.Spec.SchedulingGates {
		out.SchedulingGates = append(out.SchedulingGates, g.Name)
	}
	if q, ok := req[corev1.ResourceCPU]; ok {
		out.CPU = gpu.CPUMilli(q.MilliValue())
	}
	if q, ok := req[corev1.ResourceMemory]; ok {
		out.Memory = gpu.MiB((q.Value() + mib - 1) / mib)
	}
	var warnings []string
	warn := podWarn(p, &warnings)
	out.GPU = gpuRequest(req, warn)
	readGPUAnnotations(p, out, warn)
	out.RequiredAffinity = requiredNodeAffinity(p.Spec.Affinity, warn)
	for _, t := range p.Spec.Tolerations {
		out.Tolerations = append(out.Tolerations, cluster.Toleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: cluster.TaintEffect(t.Effect)})
	}
	out.SpreadConstraints = spreadConstraints(p.Spec.TopologySpreadConstraints)
	out.Engine = podEngine(p.Spec.Containers)
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			out.PodAffinity = podAffinityTerms(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAntiAffinity != nil {
			out.PodAntiAffinity = podAffinityTerms(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
		}
	}
	return out, warnings
}

// podWarn returns the function that adds a warning about the pod to
// *warnings, led by "pod namespace/name: ".
func podWarn(p *corev1.Pod, warnings *[]string) func(format string, args ...any) {
	return func(format string, args ...any) {
		*warnings = append(*warnings, fmt.Sprintf("pod %s/%s: ", p.Namespace, p.Name)+fmt.Sprintf(format, args...))
	}
}

// gpuRequest is the GPU request of the pod's resources: whole GPUs
// (nvidia.com/gpu), else shared ones (nvidia.com/gpu.shared), else one MIG
// slice of the first profile asked for; what else it asks for is not
// counted, with a warning.
func gpuRequest(req corev1.ResourceList, warn func(format string, args ...any)) cluster.Request {
	whole, shared := quantity(req, ResourceGPU), quantity(req, ResourceGPUShared)
	mig := map[string]int64{}
	for name, q := range req {
		if profile, ok := strings.CutPrefix(string(name), ResourceMIGPrefix); ok && q.Value() > 0 {
			mig[profile] = q.Value()
		}
	}
	switch {
	case whole > 0:
		if len(mig) > 0 || shared > 0 {
			warn("asks for %s and other GPU resources (%s %d, MIG devices %v); gpupack counts only the %d whole GPUs", ResourceGPU, ResourceGPUShared, shared, mig, whole)
		}
		return cluster.Request{Kind: cluster.WholeGPUs, Count: int(whole)}
	case shared > 0:
		if len(mig) > 0 {
			warn("asks for %s and MIG devices %v; gpupack counts only the %d shared GPUs", ResourceGPUShared, mig, shared)
		}
		return cluster.Request{Kind: cluster.WholeGPUs, Count: int(shared), SharedResource: true}
	case len(mig) > 0:
		profiles := slices.Sorted(maps.Keys(mig))
		if len(profiles) > 1 || mig[profiles[0]] > 1 {
			warn("asks for MIG devices %v; gpupack models one MIG slice per pod and counts one %s", mig, profiles[0])
		}
		return cluster.Request{Kind: cluster.MIGSlice, Profile: profiles[0]}
	}
	return cluster.Request{}
}

// readGPUAnnotations reads gpupack's annotations on the pod: the GPU
// memory a pod of whole GPUs needs on each (wellknown.AnnotationGPUMemory),
// and the devices gpupack-scheduler bound a GPU pod to
// (wellknown.AnnotationGPUDevices). A value that does not parse is
// ignored, with a warning.
func readGPUAnnotations(p *corev1.Pod, out *cluster.Pod, warn func(format string, args ...any)) {
	if text, ok := p.Annotations[wellknown.AnnotationGPUMemory]; ok && out.GPU.Kind == cluster.WholeGPUs {
		if q, err := resource.ParseQuantity(text); err != nil || q.Sign() <= 0 || q.Cmp(maxGPUMemory) > 0 {
			warn("annotation %s=%q is not a quantity between 1 and %s such as 10Gi; it is ignored", wellknown.AnnotationGPUMemory, text, maxGPUMemory.String())
		} else {
			out.GPU.Memory = gpu.MiB((q.Value() + mib - 1) / mib)
		}
	}
	if text, ok := p.Annotations[wellknown.AnnotationGPUDevices]; ok && p.Spec.NodeName != "" && out.WantsGPU() {
		// gpupack-scheduler's record of the devices it bound the pod to;
		// placement.RebuildNode checks it against the node and the other pods.
		if devices, err := wellknown.ParseDevices(text); err != nil {
			warn("%v; the pod is placed as if it had no record", err)
		} else {
			out.Devices = devices
		}
	}
}

// requiredNodeAffinity converts the terms of a required node affinity.
// matchFields are ignored, with a warning.
func requiredNodeAffinity(a *corev1.Affinity, warn func(format string, args ...any)) []cluster.Term {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []cluster.Term
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var t cluster.Term
		for _, r := range term.MatchExpressions {
			t.MatchExpressions = append(t.MatchExpressions, cluster.Requirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
		}
		if len(term.MatchFields) > 0 {
			warn("required node affinity uses matchFields, which gpupack does not evaluate; they are ignored")
		}
		out = append(out, t)
	}
	return out
}

// spreadConstraints converts the pod's topology spread constraints.
func spreadConstraints(in []corev1.TopologySpreadConstraint) []cluster.SpreadConstraint {
	var out []cluster.SpreadConstraint
	for _, c := range in {
		sc := cluster.SpreadConstraint{MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, WhenUnsatisfiable: string(c.WhenUnsatisfiable),
			LabelSelector: labelSelector(c.LabelSelector), MatchLabelKeys: c.MatchLabelKeys, MinDomains: c.MinDomains}
		if c.NodeAffinityPolicy != nil {
			sc.NodeAffinityPolicy = string(*c.NodeAffinityPolicy)
		}
		if c.NodeTaintsPolicy != nil {
			sc.NodeTaintsPolicy = string(*c.NodeTaintsPolicy)
		}
		out = append(out, sc)
	}
	return out
}

// labelSelector converts a label selector; nil stays nil (it selects
// nothing).
func labelSelector(s *metav1.LabelSelector) *cluster.LabelSelector {
	if s == nil {
		return nil
	}
	out := &cluster.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, cluster.Requirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
	}
	return out
}

func podAffinityTerms(terms []corev1.PodAffinityTerm) []cluster.PodAffinityTerm {
	var out []cluster.PodAffinityTerm
	for _, t := range terms {
		out = append(out, cluster.PodAffinityTerm{LabelSelector: labelSelector(t.LabelSelector), Namespaces: t.Namespaces,
			NamespaceSelector: labelSelector(t.NamespaceSelector), TopologyKey: t.TopologyKey,
			MatchLabelKeys: t.MatchLabelKeys, MismatchLabelKeys: t.MismatchLabelKeys})
	}
	return out
}

// podRequests is the pod's effective request, as the scheduler computes it:
// each container's requests, with its limits standing in for requests it
// does not state (the apiserver defaults them so); the regular containers
// and restartable init containers (sidecars) summed; the larger of that and
// each other init container with the sidecars started before it; plus the
// pod's overhead.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range p.Spec.Containers {
		addTo(total, containerRequests(&p.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		req := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addTo(sidecars, req)
			continue
		}
		running := sidecars.DeepCopy()
		addTo(running, req)
		maxInto(initMax, running)
	}
	addTo(total, sidecars)
	maxInto(total, initMax)
	addTo(total, p.Spec.Overhead)
	return total
}

// containerRequests is a container's requests, limits filling the gaps.
func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := c.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		sum := dst[name]
		sum.Add(q)
		dst[name] = sum
	}
}

func maxInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}
