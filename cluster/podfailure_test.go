package cluster

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestPodFailureCause(t *testing.T) {
	one := int64(1)
	cases := map[string]struct {
		failure PodFailure
		want    FailureCause
	}{
		// The kubelet's status.message for NVIDIA's device plugin v0.15 on,
		// time-slicing with failRequestsGreaterThanOne: "Pod was rejected:
		// " + "Allocate failed due to " + the gRPC error + ", which is
		// unexpected".
		"device plugin refuses two replicas": {
			failure: PodFailure{Rejected: true, Reason: ReasonUnexpectedAdmissionError,
				Message: `Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = invalid allocation request for "nvidia.com/gpu": invalid request: maximum request size for shared resources is 1; found 2, which is unexpected`},
			want: FailureCause{Kind: SharedRequestRefused, Evidence: "maximum request size for shared resources is 1; found 2", Requested: 2},
		},
		"device plugin before v0.15 refuses four replicas": {
			failure: PodFailure{Rejected: true, Reason: ReasonUnexpectedAdmissionError,
				Message: `Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = request for 'nvidia.com/gpu: 4' too large: maximum request size for shared resources is 1, which is unexpected`},
			want: FailureCause{Kind: SharedRequestRefused, Evidence: "request for 'nvidia.com/gpu: 4' too large: maximum request size for shared resources is 1", Requested: 4},
		},
		"device manager: too few devices": {
			failure: PodFailure{Rejected: true, Reason: ReasonUnexpectedAdmissionError,
				Message: "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected"},
			want: FailureCause{Kind: DevicesUnavailable, Evidence: "requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1", Requested: 2, Available: &one},
		},
		"device manager: unhealthy devices": {
			failure: PodFailure{Rejected: true, Reason: ReasonUnexpectedAdmissionError,
				Message: "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"},
			want: FailureCause{Kind: DevicesUnavailable, Evidence: "no healthy devices present; cannot allocate unhealthy devices"},
		},
		"another admission error": {
			failure: PodFailure{Rejected: true, Reason: ReasonUnexpectedAdmissionError, Message: "Pod was rejected: Allocate failed due to device plugin PreStartContainer rpc failed with err: boom, which is unexpected"},
			want:    FailureCause{Kind: AdmissionRejected, Evidence: "Allocate failed due to device plugin PreStartContainer rpc failed with err: boom, which is unexpected"},
		},
		"PyTorch out of memory, in the last lines of the log": {
			failure: PodFailure{Reason: "Error", Message: "loading weights\nTraceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.05 GiB of which 1.12 GiB is free.\n"},
			want:    FailureCause{Kind: GPUOutOfMemory, Evidence: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.05 GiB of which 1.12 GiB is free."},
		},
		"JAX out of memory": {
			failure: PodFailure{Reason: "Error", Message: "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 30.85GiB."},
			want:    FailureCause{Kind: GPUOutOfMemory, Evidence: "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 30.85GiB."},
		},
		"vLLM's KV cache does not fit": {
			failure: PodFailure{Reason: "Error", Message: "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."},
			want:    FailureCause{Kind: GPUOutOfMemory, Evidence: "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."},
		},
		"uncorrectable ECC error": {
			failure: PodFailure{Reason: "Error", Message: "RuntimeError: CUDA error: uncorrectable ECC error encountered"},
			want:    FailureCause{Kind: GPUFault, Evidence: "RuntimeError: CUDA error: uncorrectable ECC error encountered"},
		},
		"illegal memory access is the application's": {
			failure: PodFailure{Reason: "Error", Message: "RuntimeError: CUDA error: an illegal memory access was encountered"},
			want:    FailureCause{Kind: GPUFault, Evidence: "RuntimeError: CUDA error: an illegal memory access was encountered", Application: true},
		},
		"an XID the driver logged": {
			failure: PodFailure{Reason: "Error", Message: "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."},
			want:    FailureCause{Kind: GPUFault, Evidence: "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", XID: 79},
		},
		"a crash that says nothing of the GPU": {
			failure: PodFailure{Reason: "Error", Message: "exit status 1"},
			want:    FailureCause{Kind: CrashLoop},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.failure.Cause()); diff != "" {
				t.Errorf("Cause() (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzPodFailureCause: any message, rejected or not, reads without a
// panic as a known kind, with valid UTF-8 evidence of bounded length.
func FuzzPodFailureCause(f *testing.F) {
	f.Add(true, "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 99999999999999999999, Available: 1, which is unexpected")
	f.Add(true, "invalid request: maximum request size for shared resources is 1; found 3")
	f.Add(false, "torch.OutOfMemoryError: CUDA out of memory.\nmore")
	f.Add(false, "Xid 48")
	f.Add(false, "xid (\n")
	f.Fuzz(func(t *testing.T, rejected bool, msg string) {
		c := (&PodFailure{Rejected: rejected, Message: msg}).Cause()
		switch c.Kind {
		case SharedRequestRefused, DevicesUnavailable, AdmissionRejected, GPUOutOfMemory, GPUFault, CrashLoop:
		default:
			t.Fatalf("unknown kind %q", c.Kind)
		}
		if !rejected && (len(c.Evidence) > 240+len("…") || strings.Contains(c.Evidence, "\n")) {
			t.Errorf("evidence %q is not one line of at most 240 bytes", c.Evidence)
		}
		if utf8.ValidString(msg) && !utf8.ValidString(c.Evidence) {
			t.Errorf("evidence %q of a valid message is not valid UTF-8", c.Evidence)
		}
		if c.Requested < 0 || c.XID < 0 {
			t.Errorf("negative figures: %+v", c)
		}
	})
}
