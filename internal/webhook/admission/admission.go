// Package admission decides how gpupack's mutating webhook changes a new
// pod, so that users keep their manifests unchanged: it sends GPU pods to
// gpupack-scheduler (schedulerName: gpupack) and rewrites a workload's GPU
// request to what the plan says it should request (workload-requests.yaml:
// nvidia.com/gpu: 1 to nvidia.com/mig-<profile>: 1 or to the shared
// resource, with the VRAM the plan sized it for in gpupack.io/gpu-memory and
// the node selector of the device plugin config that offers it; and, for
// a container whose engine preallocates GPU memory (vLLM, TGI,
// JAX, TensorFlow), the engine's setting that keeps it within the share,
// in its arguments or environment), recording what it changed in an
// annotation so that it is visible and reversible. A command line that
// cannot take the setting keeps the pod's request. Pods that ask for whole GPUs and MIG slices at once
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
	"github.com/gpupack/gpupack/vram"
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
	// Engines are the settings Mutate wrote so that a container's engine
	// that preallocates GPU memory (vLLM, TGI, JAX, TensorFlow) stays
	// within the share the plan moved it to.
	Engines []EngineChange `json:"engines,omitempty"`
	// Kept says why Mutate kept the pod's request although the plan
	// changes it; empty when it did not.
	Kept string `json:"kept,omitempty"`
}

// EngineChange is one engine setting Mutate wrote into a container, with
// what it replaced: the container's command and arguments (a flag), or
// the variable's value (EnvBefore; nil when it was unset).
type EngineChange struct {
	Container string   `json:"container"`
	Setting   string   `json:"setting"`
	Command   []string `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Env       bool     `json:"env,omitempty"`
	EnvBefore *string  `json:"envBefore,omitempty"`
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
	r, ok := requests[ch.Workload]
	var engines []engineEdit
	if ok && r.After.Engine != nil {
		var err error
		if engines, err = engineEdits(pod, *r.After.Engine); err != nil {
			ok, ch.Kept = false, err.Error()
		}
	}
	if ok && r.Action != plan.Keep && r.Before == cp.GPU.String() && !pinnedElsewhere(pod, r.After.NodeSelector) {
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
		if len(ch.Containers) > 0 {
			for _, e := range engines {
				ch.Engines = append(ch.Engines, e.apply(pod))
			}
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
	for _, e := range ch.Engines {
		revertEngine(pod, e)
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

// engineEdit is the setting to write into one container: a new command
// and arguments, or a variable's value.
type engineEdit struct {
	container     int
	setting       vram.Setting
	command, args []string
}

// engineEdits finds the GPU containers that run the setting's engine and
// what writing the setting changes in each; an error when a container's
// command line cannot take it (a shell line that does not give the flag),
// so that the pod is not moved to a share its engine would overrun.
func engineEdits(pod *corev1.Pod, s vram.Setting) ([]engineEdit, error) {
	var out []engineEdit
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		e, ok := vram.Detect(kube.EngineContainer(c))
		if len(gpuResources(c)) == 0 || !ok || e.Engine != s.Engine {
			continue
		}
		edit := engineEdit{container: i, setting: s}
		if !s.Env {
			var err error
			if edit.command, edit.args, err = s.ApplyArgs(c.Command, c.Args); err != nil {
				return nil, fmt.Errorf("container %s: %w; the plan's request, which needs it, is kept", c.Name, err)
			}
		}
		out = append(out, edit)
	}
	return out, nil
}

// apply writes the edit into the pod and returns what it replaced.
func (e engineEdit) apply(pod *corev1.Pod) EngineChange {
	c := &pod.Spec.Containers[e.container]
	ch := EngineChange{Container: c.Name, Setting: e.setting.String(), Env: e.setting.Env}
	if !e.setting.Env {
		ch.Command, ch.Args = c.Command, c.Args
		c.Command, c.Args = e.command, e.args
		return ch
	}
	for i := range c.Env {
		if c.Env[i].Name == e.setting.Name {
			before := c.Env[i].Value
			ch.EnvBefore = &before
			c.Env[i] = corev1.EnvVar{Name: e.setting.Name, Value: e.setting.Value}
			return ch
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: e.setting.Name, Value: e.setting.Value})
	return ch
}

// revertEngine undoes one engine change.
func revertEngine(pod *corev1.Pod, e EngineChange) {
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == e.Container })
	if i < 0 {
		return
	}
	c := &pod.Spec.Containers[i]
	if !e.Env {
		c.Command, c.Args = e.Command, e.Args
		return
	}
	name, _, _ := strings.Cut(e.Setting, "=")
	j := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == name })
	switch {
	case j < 0:
	case e.EnvBefore == nil:
		c.Env = slices.Delete(c.Env, j, j+1)
	default:
		c.Env[j].Value = *e.EnvBefore
	}
}
