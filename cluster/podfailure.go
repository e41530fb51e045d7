package cluster

import (
	"regexp"
	"strconv"
	"strings"
)

// PodFailure is a GPU pod that failed after the scheduler bound it, as the
// kubelet and the pod's containers wrote it in the pod's status: a pod the
// kubelet rejected at admission (status.phase Failed, status.reason and
// status.message), or a container that keeps terminating (its last
// termination's reason, message and exit code, and its restart count).
// The snapshot keeps the words as written; Cause reads them.
type PodFailure struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	// Resource and Count are the GPU request of Container, the container
	// that asks for the most GPUs (a rejection) or the one that
	// terminated (a crash); ContainerIndex is its index in
	// spec.containers.
	Resource       string `json:"resource,omitempty"`
	Count          int64  `json:"count,omitempty"`
	Container      string `json:"container,omitempty"`
	ContainerIndex int    `json:"containerIndex,omitempty"`
	// Rejected says the kubelet refused to admit the pod (Reason and
	// Message are the pod's); otherwise Container crashed (they are its
	// last termination's).
	Rejected bool   `json:"rejected,omitempty"`
	Reason   string `json:"reason"`
	Message  string `json:"message,omitempty"`
	Restarts int32  `json:"restarts,omitempty"`
	ExitCode *int32 `json:"exitCode,omitempty"`
}

// Key is "namespace/name".
func (f *PodFailure) Key() string { return f.Namespace + "/" + f.Name }

// FailureKind is what a failed GPU pod's status words mean.
type FailureKind string

// The kinds of failure after scheduling.
const (
	// SharedRequestRefused: NVIDIA's device plugin shares its GPUs by
	// time-slicing with failRequestsGreaterThanOne (or by MPS), and
	// refuses a container that asks for more than one replica.
	SharedRequestRefused FailureKind = "shared-request-refused"
	// DevicesUnavailable: the kubelet's device manager found too few
	// healthy devices for the request when it admitted the pod (a device
	// went unhealthy, or the node's count changed, after scheduling).
	DevicesUnavailable FailureKind = "devices-unavailable"
	// AdmissionRejected: another admission error of the kubelet.
	AdmissionRejected FailureKind = "admission-rejected"
	// GPUOutOfMemory: the container ran out of GPU memory (CUDA,
	// PyTorch, JAX/XLA, TensorFlow or vLLM said so).
	GPUOutOfMemory FailureKind = "gpu-out-of-memory"
	// GPUFault: the GPU or the container's kernels failed (an ECC error,
	// an illegal memory access, a launch failure, a GPU lost, an XID).
	GPUFault FailureKind = "gpu-fault"
	// CrashLoop: the container keeps terminating and its message does not
	// say why.
	CrashLoop FailureKind = "crash-loop"
)

// FailureCause is what Cause reads from a failure's words.
type FailureCause struct {
	Kind FailureKind `json:"kind"`
	// Evidence is the part of the message that says so.
	Evidence string `json:"evidence,omitempty"`
	// Requested is the replicas the device plugin refused or the devices
	// the kubelet could not find; Available the healthy devices it had
	// (DevicesUnavailable, where the message gives it).
	Requested int64  `json:"requested,omitempty"`
	Available *int64 `json:"available,omitempty"`
	// XID is the XID the message names, 0 when none.
	XID int `json:"xid,omitempty"`
	// Application says a GPUFault is the application's (an illegal memory
	// access or a device-side assert), which leaves the GPU healthy.
	Application bool `json:"application,omitempty"`
}

// The kubelet's words. A rejected pod's status.message is "Pod was
// rejected: " and the admission error (k8s.io/kubernetes
// pkg/kubelet/kubelet.go, rejectPod); a device plugin's failed Allocate
// call is "Allocate failed due to <gRPC error>, which is unexpected" with
// reason UnexpectedAdmissionError (pkg/kubelet/cm/admission/errors.go);
// the device manager's own refusals are in
// pkg/kubelet/cm/devicemanager/manager.go.
const (
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
	rejectedPrefix                 = "Pod was rejected: "
)

var (
	// NVIDIA's k8s-device-plugin, internal/rm/rm.go (ValidateRequest,
	// v0.15 on): "invalid request: maximum request size for shared
	// resources is 1; found 2"; before it, internal/plugin/server.go:
	// "request for 'nvidia.com/gpu: 2' too large: maximum request size
	// for shared resources is 1".
	sharedFound = regexp.MustCompile(`maximum request size for shared resources is 1; found (\d+)`)
	sharedOld   = regexp.MustCompile(`request for '[^':]+: (\d+)' too large: maximum request size for shared resources is 1`)
	// The device manager: "requested number of devices unavailable for
	// nvidia.com/gpu. Requested: 2, Available: 1", and its refusals of
	// unhealthy or unregistered devices.
	devicesShort   = regexp.MustCompile(`requested number of devices unavailable for \S+\. Requested: (\d+), Available: (\d+)`)
	devicesRefused = []string{
		"no healthy devices present; cannot allocate unhealthy devices",
		"previously allocated devices are no longer healthy; cannot allocate unhealthy devices",
		"cannot allocate unregistered device",
	}
	xidWord = regexp.MustCompile(`(?i)\bxid\b(?:\s*\([^)]*\))?[\s:]+(\d+)`)
)

// outOfMemory are the words of frameworks that ran out of GPU memory,
// lowercased: the CUDA runtime's cudaErrorMemoryAllocation ("out of
// memory") and driver's CUDA_ERROR_OUT_OF_MEMORY, PyTorch's "CUDA out of
// memory" (torch.OutOfMemoryError), XLA's (JAX) "RESOURCE_EXHAUSTED: Out
// of memory while trying to allocate", TensorFlow's "OOM when allocating
// tensor", and vLLM's "No available memory for the cache blocks" (its
// KV cache does not fit the share of memory it was given).
var outOfMemory = []string{
	"cuda out of memory",
	"cuda error: out of memory",
	"cuda_error_out_of_memory",
	"cudaerrormemoryallocation",
	"outofmemoryerror",
	"resource_exhausted: out of memory",
	"oom when allocating tensor",
	"no available memory for the cache blocks",
}

// gpuFaults are CUDA's words for a failed GPU (cudaErrorECCUncorrectable,
// a GPU that fell off the bus) and for faults of the application's kernels
// (applicationFaults), lowercased.
var (
	gpuFaults = []string{
		"uncorrectable ecc error encountered",
		"cuda_error_ecc_uncorrectable",
		"gpu has fallen off the bus",
		"unspecified launch failure",
	}
	applicationFaults = []string{
		"an illegal memory access was encountered",
		"device-side assert triggered",
		"misaligned address",
	}
)

// Cause reads what the failure's words mean. A rejection whose message
// is not one of the kubelet's or the device plugin's known refusals is
// AdmissionRejected; a crash whose message names neither memory nor a
// fault is CrashLoop.
func (f *PodFailure) Cause() FailureCause {
	if f.Rejected {
		return rejectionCause(strings.TrimPrefix(f.Message, rejectedPrefix))
	}
	return crashCause(f.Message)
}

func rejectionCause(msg string) FailureCause {
	if m := sharedFound.FindStringSubmatch(msg); m != nil {
		return FailureCause{Kind: SharedRequestRefused, Evidence: m[0], Requested: atoi(m[1])}
	}
	if m := sharedOld.FindStringSubmatch(msg); m != nil {
		return FailureCause{Kind: SharedRequestRefused, Evidence: m[0], Requested: atoi(m[1])}
	}
	if m := devicesShort.FindStringSubmatch(msg); m != nil {
		available := atoi(m[2])
		return FailureCause{Kind: DevicesUnavailable, Evidence: m[0], Requested: atoi(m[1]), Available: &available}
	}
	for _, w := range devicesRefused {
		if strings.Contains(msg, w) {
			return FailureCause{Kind: DevicesUnavailable, Evidence: w}
		}
	}
	return FailureCause{Kind: AdmissionRejected, Evidence: msg}
}

func crashCause(msg string) FailureCause {
	lower := strings.ToLower(msg)
	xid := 0
	if m := xidWord.FindStringSubmatch(msg); m != nil {
		xid = int(atoi(m[1]))
	}
	for _, w := range outOfMemory {
		if i := strings.Index(lower, w); i >= 0 {
			return FailureCause{Kind: GPUOutOfMemory, Evidence: lineAt(msg, i), XID: xid}
		}
	}
	for _, w := range applicationFaults {
		if i := strings.Index(lower, w); i >= 0 {
			return FailureCause{Kind: GPUFault, Evidence: lineAt(msg, i), XID: xid, Application: true}
		}
	}
	for _, w := range gpuFaults {
		if i := strings.Index(lower, w); i >= 0 {
			return FailureCause{Kind: GPUFault, Evidence: lineAt(msg, i), XID: xid}
		}
	}
	if xid > 0 {
		m := xidWord.FindStringIndex(msg)
		return FailureCause{Kind: GPUFault, Evidence: lineAt(msg, m[0]), XID: xid}
	}
	return FailureCause{Kind: CrashLoop}
}

// lineAt is the line of msg that holds byte i, trimmed, and cut to 240
// bytes: a container's message may be 80 lines of its log.
func lineAt(msg string, i int) string {
	start := strings.LastIndexByte(msg[:i], '\n') + 1
	end := len(msg)
	if j := strings.IndexByte(msg[i:], '\n'); j >= 0 {
		end = i + j
	}
	line := strings.TrimSpace(msg[start:end])
	if len(line) > 240 {
		line = strings.ToValidUTF8(line[:240], "") + "…"
	}
	return line
}

// atoi reads a number the regular expressions matched as digits; one too
// long for int64 reads as 0.
func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
