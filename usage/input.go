package usage

import "time"

// Idle floors: below them a GPU counts as unused. A CUDA context alone
// takes a few hundred MiB, so framebuffer above FBIdleFloorMiB means a
// process has touched the GPU.
const (
	ActivityIdleFloor = 0.05
	FBIdleFloorMiB    = 256
)

// Input is everything Account needs.
type Input struct {
	Window  Window
	Series  []Series
	Pricing Pricing
	// App holds the user's application metrics, optional.
	App []AppSeries
	// Pods holds Kubernetes life-cycle times for start-up phases, optional.
	Pods []PodEvents
}

// AppSeries is one application metric (any PromQL the user names) for one
// pod, or for a whole namespace when Pod is empty. Its values are taken as
// rates per second (tokens/s, requests/s) for totals; a gauge such as queue
// depth or latency is read from Mean.
type AppSeries struct {
	Name      string
	Namespace string
	Pod       string
	Samples   []Sample
}

// PodEvents are a pod's Kubernetes life-cycle times; zero means unknown.
type PodEvents struct {
	Namespace, Pod string
	// Workload names the pod's owner in its namespace (the Deployment,
	// StatefulSet or Job), for per-workload start-up figures; "" groups
	// the pod alone.
	Workload  string
	Created   time.Time
	Scheduled time.Time
	// ContainersStarted is when the last of the pod's app containers
	// started running (kube-state-metrics' kube_pod_container_state_started,
	// the kubelet's state.running.startedAt).
	ContainersStarted time.Time
	ContainersReady   time.Time
	Ready             time.Time
	// ImagePulls are the kubelet's Pulled events of the pod's containers,
	// init containers included.
	ImagePulls []ImagePull
	// Storage is where the pod's model weights come from; Kind "" when the
	// pod's spec was not seen.
	Storage ModelStorage
}

// ImagePull is one of the kubelet's Pulled events: an image pulled for a
// container (with the time and size the kubelet states), or found present.
type ImagePull struct {
	Container string
	Image     string
	// At is when the event was recorded: the pull's end.
	At time.Time
	// Present: the image was already on the node, nothing was pulled.
	Present bool
	// PullSeconds is the pull's time without waiting in the kubelet's pull
	// queue; WaitSeconds includes the wait (both 0 when Present).
	PullSeconds, WaitSeconds float64
	// SizeBytes is the image size the kubelet states; 0 when not stated.
	SizeBytes int64
}
