package reclaim

import (
	"time"

	"github.com/gpupack/gpupack/api/wellknown"
)

// Kind is the kind of object a reclaim acts on.
type Kind string

// The owner kinds reclaim knows.
const (
	Deployment  Kind = "Deployment"
	StatefulSet Kind = "StatefulSet"
	ReplicaSet  Kind = "ReplicaSet"
	Job         Kind = "Job"
	// Notebook is a Kubeflow Notebook (kubeflow.org/v1): its controller
	// stops it (StatefulSet at zero, PVCs kept) while it carries the
	// kubeflow-resource-stopped annotation.
	Notebook Kind = "Notebook"
	// Workload is a Kueue Workload (kueue.x-k8s.io/v1beta1 or v1beta2):
	// spec.active false makes Kueue evict and suspend its job.
	Workload Kind = "Workload"
	// Pod is a pod with no controller that reclaim can pause.
	Pod Kind = "Pod"
)

// Scaler kinds: what drives a Deployment's or StatefulSet's replicas.
const (
	ScaledObject            Kind = "ScaledObject" // KEDA (keda.sh/v1alpha1)
	HorizontalPodAutoscaler Kind = "HorizontalPodAutoscaler"
)

// Ref names an object: its kind, API group/version, namespace, name and
// UID (which makes a recreated object of the same name another one).
type Ref struct {
	Kind       Kind   `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// String is "Kind namespace/name".
func (r Ref) String() string { return string(r.Kind) + " " + r.Namespace + "/" + r.Name }

// Owner is the top object that keeps a pod running, as far as reclaim acts
// on it, with what the decision and the restore need of it now.
type Owner struct {
	Ref
	// Replicas is the desired replicas of a scalable owner (nil for
	// others); Suspended a Job's spec.suspend; Active a Kueue Workload's
	// spec.active (nil when unset, which means active).
	Replicas  *int32 `json:"replicas,omitempty"`
	Suspended bool   `json:"suspended,omitempty"`
	Active    *bool  `json:"active,omitempty"`
	// Scaler is the ScaledObject or HorizontalPodAutoscaler that scales a
	// Deployment or StatefulSet; nil when none does.
	Scaler *Ref `json:"scaler,omitempty"`
	// Labels and Annotations are the owner's (for a scaled workload the
	// workload's, and ScalerAnnotations the scaler's).
	Labels            map[string]string `json:"-"`
	Annotations       map[string]string `json:"-"`
	ScalerAnnotations map[string]string `json:"-"`
	// Unsupported says why reclaim cannot pause this owner (a DaemonSet, a
	// custom controller); empty when it can.
	Unsupported string `json:"unsupported,omitempty"`
}

// PodState is what detection needs of a running pod beyond its usage.
type PodState struct {
	Namespace, Name, UID string
	Node                 string
	// GPUs is what the pod holds, a MIG slice or shared replica counted
	// as its share.
	GPUs    float64
	Created time.Time
	// Ready is the pod's Ready condition; a pod never ready is still
	// starting.
	Ready bool
	// Labels and Annotations are the pod's; a bare pod is its own owner,
	// so its notice and snooze live in its annotations.
	Labels      map[string]string
	Annotations map[string]string
	// Owner is the key of the pod's owner in Input.Owners.
	Owner string
}

// Key is "namespace/name".
func (p PodState) Key() string { return p.Namespace + "/" + p.Name }

// Class is a workload class, with its own idle window and grace period.
type Class string

// The classes.
const (
	ClassNotebook  Class = "notebook"
	ClassInference Class = "inference"
	ClassTraining  Class = "training"
)

// Classes lists the classes in the order they are documented.
var Classes = []Class{ClassNotebook, ClassInference, ClassTraining}

// Action is what a reclaim does to an owner.
type Action string

// The actions, one per owner kind.
const (
	// ScaleToZero sets the scale subresource's replicas to 0, the old
	// count saved; a HorizontalPodAutoscaler stops scaling a target at 0
	// replicas (ScalingDisabled) and resumes when it is scaled back.
	ScaleToZero Action = "scale-to-zero"
	// PauseKEDA sets autoscaling.keda.sh/paused-replicas: "0" on the
	// ScaledObject, so that KEDA itself holds the workload at 0.
	PauseKEDA Action = "pause-keda"
	// StopNotebook sets kubeflow-resource-stopped on the Notebook; its
	// PVCs stay.
	StopNotebook Action = "stop-notebook"
	// SuspendJob sets the Job's spec.suspend.
	SuspendJob Action = "suspend-job"
	// DeactivateWorkload sets the Kueue Workload's spec.active to false.
	DeactivateWorkload Action = "deactivate-workload"
	// Evict evicts a bare pod through the Eviction API: nothing recreates
	// it, so it cannot be restored.
	Evict Action = "evict"
)

// ActionFor is the action an owner allows, and whether restore can undo
// it.
func ActionFor(o *Owner) (a Action, restorable bool) {
	switch o.Kind {
	case Notebook:
		return StopNotebook, true
	case Workload:
		return DeactivateWorkload, true
	case Job:
		return SuspendJob, true
	case Deployment, StatefulSet, ReplicaSet:
		if o.Scaler != nil && o.Scaler.Kind == ScaledObject {
			return PauseKEDA, true
		}
		return ScaleToZero, true
	}
	return Evict, false
}

// ClassOf is the owner's class: the gpupack.io/workload-class label of the
// owner or pod when set, else by kind: a Notebook or a bare pod is a
// notebook (interactive), a Job or Kueue Workload training, a Deployment,
// StatefulSet or ReplicaSet inference.
func ClassOf(o *Owner, podLabels map[string]string) Class {
	for _, l := range []map[string]string{o.Labels, podLabels} {
		if c := Class(l[wellknown.LabelWorkloadClass]); c == ClassNotebook || c == ClassInference || c == ClassTraining {
			return c
		}
	}
	switch o.Kind {
	case Notebook, Pod:
		return ClassNotebook
	case Job, Workload:
		return ClassTraining
	}
	return ClassInference
}
