// Package admission decides how gpupack's mutating webhook changes a new
// pod, so that users keep their manifests unchanged: it sends GPU pods to
// gpupack-scheduler (schedulerName: gpupack) and rewrites a workload's GPU
// request to what the plan says it should request (workload-requests.yaml:
// nvidia.com/gpu: 1 to nvidia.com/mig-<profile>: 1 or to the shared
// resource, with the VRAM the plan sized it for in gpupack.io/gpu-memory and
// the node selector of the device plugin config that offers it),
// recording what it changed in an annotation so that it is
// visible and reversible. Pods that ask for whole GPUs and MIG slices at once
// are rejected, never silently altered.
//
// Which pods reach it is the MutatingWebhookConfiguration's business (a
// namespace selector on wellknown.LabelPack); Mutate changes every GPU
// pod it is given.
//
// admission is an edge package over corev1 objects; it must not import
// net/http or a CLI library (the webhook verb serves it).
package admission

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/plan"
)

// Path is the URL path on which gpupack's webhook serves Mutate.
const Path = "/mutate-pods"

// SchedulerName is the profile of gpupack-scheduler.
const SchedulerName = "gpupack"

// Changes is what Mutate changed on a pod, recorded on it in the
// annotation wellknown.AnnotationAdmission.
type Changes struct {
	// Workload is the pod's workload key, as the plan names it.
	Workload string `json:"workload"`
	// SchedulerName is the scheduler the pod had before, when it changed.
	SchedulerName *string `json:"schedulerName,omitempty"`
	// Containers are the containers whose GPU resources changed, with the
	// resources before and after (requests and limits alike).
	Containers []ContainerChange `json:"containers,omitempty"`
	// GPUMemory is the annotation gpupack.io/gpu-memory that Mutate added
	// to a pod moved to a shared GPU: the VRAM the plan sized it for, which
	// gpupack-scheduler keeps within each time-sliced GPU.
	GPUMemory string `json:"gpuMemory,omitempty"`
	// NodeSelector is what Mutate added to the pod's node selector: the
	// device plugin config that offers the rewritten resource as the plan
	// sized it (time slices and MPS clients share one resource name).
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// ContainerChange is one container's GPU resources before and after.
type ContainerChange struct {
	Name   string            `json:"name"`
	Before map[string]string `json:"before"`
	After  map[string]string `json:"after"`
}

// ContradictionError is a pod that asks for whole GPUs and MIG slices at
// once: a pod gets one or the other, so the webhook rejects it.
type ContradictionError struct {
	Pod       string
	Resources []string
}

func (e *ContradictionError) Error() string {
	return fmt.Sprintf("pod %s asks for %s together: a pod gets either whole GPUs (%s) or one MIG slice (%s<profile>), not both; remove all but one of them",
		e.Pod, strings.Join(e.Resources, " and "), kube.ResourceGPU, kube.ResourceMIGPrefix)
}

// Mutate changes pod in place for gpupack and returns what it changed; nil
// when the pod asks for no GPU (it is left as it is). requests are the
// plan's, by workload; nil keeps every request and only sets the
// scheduler.
func Mutate(pod *corev1.Pod, requests map[string]plan.WorkloadRequest) (*Changes, error) {
	if err := checkContradiction(pod); err != nil {
		return nil, err
	}
	cp, _ := kube.ConvertPod(podWithName(pod))
	if !cp.WantsGPU() {
		return nil, nil
	}
	ch := &Changes{Workload: plan.WorkloadKey(cp)}
	if s := pod.Spec.SchedulerName; s != SchedulerName {
		ch.SchedulerName = &s
		pod.Spec.SchedulerName = SchedulerName
	}
	if r, ok := requests[ch.Workload]; ok && r.Action != plan.Keep && r.Before == cp.GPU.String() && !pinnedElsewhere(pod, r.After.NodeSelector) {
		after := corev1.ResourceName(r.After.Resource)
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			before := gpuResources(c)
			if len(before) == 0 {
				continue
			}
			for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				if list == nil {
					continue
				}
				for name := range before {
					delete(list, corev1.ResourceName(name))
				}
				list[after] = *resource.NewQuantity(int64(r.After.Count), resource.DecimalSI)
			}
			if c.Resources.Limits == nil { // extended resources must be in limits
				c.Resources.Limits = corev1.ResourceList{after: *resource.NewQuantity(int64(r.After.Count), resource.DecimalSI)}
			}
			ch.Containers = append(ch.Containers, ContainerChange{Name: c.Name, Before: before, After: gpuResources(c)})
		}
		if _, stated := pod.Annotations[wellknown.AnnotationGPUMemory]; len(ch.Containers) > 0 && !stated && after == kube.ResourceGPUShared && r.After.VRAMLimit > 0 {
			ch.GPUMemory = cluster.FormatMemory(r.After.VRAMLimit)
		}
		for k, v := range r.After.NodeSelector {
			if _, set := pod.Spec.NodeSelector[k]; len(ch.Containers) > 0 && !set {
				if pod.Spec.NodeSelector == nil {
					pod.Spec.NodeSelector = map[string]string{}
				}
				if ch.NodeSelector == nil {
					ch.NodeSelector = map[string]string{}
				}
				pod.Spec.NodeSelector[k], ch.NodeSelector[k] = v, v
			}
		}
	}
	record, err := json.Marshal(ch)
	if err != nil {
		return nil, err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[wellknown.AnnotationAdmission] = string(record)
	if ch.GPUMemory != "" {
		pod.Annotations[wellknown.AnnotationGPUMemory] = ch.GPUMemory
	}
	return ch, nil
}

// Revert undoes what Mutate recorded on the pod spec: the scheduler name and
// each container's GPU resources. It is for tools that want the user's own
// request back; the pod's annotation is removed.
func Revert(pod *corev1.Pod) error {
	text, ok := pod.Annotations[wellknown.AnnotationAdmission]
	if !ok {
		return nil
	}
	var ch Changes
	if err := json.Unmarshal([]byte(text), &ch); err != nil {
		return fmt.Errorf("pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, wellknown.AnnotationAdmission, err)
	}
	if ch.SchedulerName != nil {
		pod.Spec.SchedulerName = *ch.SchedulerName
	}
	for _, cc := range ch.Containers {
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if c.Name != cc.Name {
				continue
			}
			for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				if list == nil {
					continue
				}
				for name := range cc.After {
					delete(list, corev1.ResourceName(name))
				}
				for name, q := range cc.Before {
					list[corev1.ResourceName(name)] = resource.MustParse(q)
				}
			}
		}
	}
	if ch.GPUMemory != "" {
		delete(pod.Annotations, wellknown.AnnotationGPUMemory)
	}
	for k := range ch.NodeSelector {
		delete(pod.Spec.NodeSelector, k)
	}
	delete(pod.Annotations, wellknown.AnnotationAdmission)
	return nil
}

// pinnedElsewhere reports whether the pod's own node selector asks for
// another value of a key the planned request selects by: its request is
// then kept, since the planned resource is not offered where it must run.
func pinnedElsewhere(pod *corev1.Pod, sel map[string]string) bool {
	for k, v := range sel {
		if own, set := pod.Spec.NodeSelector[k]; set && own != v {
			return true
		}
	}
	return false
}

// gpuResources are the container's GPU resources (whole GPUs, MIG slices,
// shared GPUs), from its limits, else its requests.
func gpuResources(c *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		for name, q := range list {
			if kube.IsGPUResource(name) {
				out[string(name)] = q.String()
			}
		}
	}
	return out
}

// checkContradiction rejects a pod whose containers ask for whole GPUs and
// MIG slices together (in one container or across them).
func checkContradiction(pod *corev1.Pod) error {
	asked := map[string]bool{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name, q := range gpuResources(&cs[i]) {
				if quantity := resource.MustParse(q); quantity.Sign() > 0 {
					asked[name] = true
				}
			}
		}
	}
	whole := asked[string(kube.ResourceGPU)]
	mig := 0
	for name := range asked {
		if strings.HasPrefix(name, kube.ResourceMIGPrefix) {
			mig++
		}
	}
	if whole && mig > 0 {
		return &ContradictionError{Pod: PodName(pod), Resources: slices.Sorted(maps.Keys(asked))}
	}
	return nil
}

// podWithName returns the pod with a name to group it by: a pod created
// from a template has only its generateName at admission.
func podWithName(pod *corev1.Pod) *corev1.Pod {
	if pod.Name != "" || pod.GenerateName == "" {
		return pod
	}
	named := *pod
	named.Name = strings.TrimSuffix(pod.GenerateName, "-")
	return &named
}

// PodName names a pod at admission for messages: namespace/name, or
// namespace/generateName* for a pod named when it is created.
func PodName(pod *corev1.Pod) string {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "*"
	}
	return pod.Namespace + "/" + name
}
