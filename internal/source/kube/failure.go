package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/vram"
)

// podFailure reads a bound GPU pod that failed after scheduling, as its
// status says: the kubelet's rejection (phase Failed, reason
// UnexpectedAdmissionError, which the device manager and the device
// plugins' Allocate errors get), or an app container that has restarted
// and whose last termination failed. ok is false for any other pod.
func podFailure(p *corev1.Pod) (cluster.PodFailure, bool) {
	if p.Spec.NodeName == "" {
		return cluster.PodFailure{}, false
	}
	f := cluster.PodFailure{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName}
	if p.Status.Phase == corev1.PodFailed {
		if p.Status.Reason != cluster.ReasonUnexpectedAdmissionError {
			return cluster.PodFailure{}, false
		}
		i, ok := largestGPUContainer(p.Spec.Containers)
		if !ok {
			return cluster.PodFailure{}, false
		}
		f.Rejected, f.Reason, f.Message = true, p.Status.Reason, p.Status.Message
		f.ContainerIndex, f.Container = i, p.Spec.Containers[i].Name
		f.Resource, f.Count = containerGPU(&p.Spec.Containers[i])
		return f, true
	}
	if !holdsResources(p) {
		return cluster.PodFailure{}, false
	}
	if _, ok := largestGPUContainer(p.Spec.Containers); !ok {
		return cluster.PodFailure{}, false
	}
	return crashedContainer(p, f)
}

// crashedContainer fills f with the app container that restarted most
// and whose last termination failed (exit code not 0); ok is false when
// none did.
func crashedContainer(p *corev1.Pod, f cluster.PodFailure) (cluster.PodFailure, bool) {
	var worst *corev1.ContainerStatus
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		t := lastTermination(cs)
		if cs.RestartCount == 0 || t == nil || t.ExitCode == 0 {
			continue
		}
		if worst == nil || cs.RestartCount > worst.RestartCount {
			worst = cs
		}
	}
	if worst == nil {
		return cluster.PodFailure{}, false
	}
	t := lastTermination(worst)
	code := t.ExitCode
	f.Container, f.Reason, f.Message, f.Restarts, f.ExitCode = worst.Name, t.Reason, t.Message, worst.RestartCount, &code
	if f.Reason == "" {
		f.Reason = "Error"
	}
	f.ContainerIndex = slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == worst.Name })
	if f.ContainerIndex >= 0 {
		f.Resource, f.Count = containerGPU(&p.Spec.Containers[f.ContainerIndex])
	} else {
		f.ContainerIndex = 0
	}
	return f, true
}

// lastTermination is the container's termination now, or else its last
// one (a container waiting in CrashLoopBackOff keeps it in lastState).
func lastTermination(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if cs.State.Terminated != nil {
		return cs.State.Terminated
	}
	return cs.LastTerminationState.Terminated
}

// largestGPUContainer is the index of the app container that asks for the
// most GPUs; ok is false when none asks for any.
func largestGPUContainer(cs []corev1.Container) (int, bool) {
	best, most := 0, int64(0)
	for i := range cs {
		if _, n := containerGPU(&cs[i]); n > most {
			best, most = i, n
		}
	}
	return best, most > 0
}

// containerGPU is the GPU resource a container asks most of and how many,
// from its limits (which extended resources must set) or requests.
func containerGPU(c *corev1.Container) (string, int64) {
	var name string
	var most int64
	for res, q := range containerRequests(c) {
		if cluster.GPUResource(string(res)) && q.Value() > most {
			name, most = string(res), q.Value()
		}
	}
	return name, most
}

// podEngine is the preallocating engine (vram.Detect) of the first
// container that asks for GPUs and runs one; nil when none does.
func podEngine(cs []corev1.Container) *vram.Preallocation {
	for i := range cs {
		if _, n := containerGPU(&cs[i]); n == 0 {
			continue
		}
		if e, ok := vram.Detect(EngineContainer(&cs[i])); ok {
			return &e
		}
	}
	return nil
}

// EngineContainer is what vram.Detect reads of a container: its image,
// command, arguments and the variables with literal values (one from a
// ConfigMap or Secret is not known here).
func EngineContainer(c *corev1.Container) vram.Container {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return vram.Container{Image: c.Image, Command: c.Command, Args: c.Args, Env: env}
}
