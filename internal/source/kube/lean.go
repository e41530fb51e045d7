package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/gpupack/gpupack/vram"
)

// lastApplied is kubectl's copy of the whole manifest that it applied,
// often the largest annotation of an object; gpupack never reads it.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// leanObject is the informers' transform (informers.WithTransform): it
// drops from each object, before the cache keeps it, what gpupack never
// reads: the managedFields of every object and kubectl's
// last-applied-configuration annotation; of a pod, its containers' probes
// and lifecycle hooks, the commands and arguments of those that ask for no
// GPU, and every environment variable but those of a GPU container that
// vram.Detect reads (a GPU container's command, arguments and those
// variables tell which engine it runs), and its ephemeral containers
// (which request no resources). It changes obj in
// place, which client-go allows since the object is the informer's own,
// and is idempotent, as client-go asks of a transform whose objects may
// pass through it twice (a relist's Replace).
func leanObject(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			if _, ok := a[lastApplied]; ok {
				delete(a, lastApplied)
				m.SetAnnotations(a)
			}
		}
	}
	if p, ok := obj.(*corev1.Pod); ok {
		leanContainers(p.Spec.InitContainers)
		leanContainers(p.Spec.Containers)
		p.Spec.EphemeralContainers = nil
	}
	return obj, nil
}

// leanContainers drops what leanObject drops of each container; names,
// images, resources, ports, volume mounts and restart policies stay.
func leanContainers(cs []corev1.Container) {
	for i := range cs {
		c := &cs[i]
		if _, gpus := containerGPU(c); gpus == 0 {
			c.Command, c.Args, c.Env = nil, nil, nil
		} else {
			c.Env = engineEnv(c.Env)
		}
		c.EnvFrom = nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	}
}

// engineEnv copies the variables vram.Detect reads into a slice of their
// own (nil when there are none), so that the whole environment's array is
// not kept for them.
func engineEnv(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if slices.Contains(vram.EngineVariables, e.Name) {
			out = append(out, e)
		}
	}
	return out
}
