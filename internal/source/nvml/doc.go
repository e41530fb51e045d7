// Package nvml is the agent's NVML adapter: it reads each GPU and MIG
// instance of the node, their running compute processes and the
// per-process utilisation samples through github.com/NVIDIA/go-nvml,
// which loads libnvidia-ml.so.1 when the agent starts, so the binary
// builds and runs on machines without a GPU and says so (ErrUnavailable).
// go-nvml needs cgo, and its unresolved NVML symbols keep a binary that
// also links Go's plugin package (as helm does, in the chart tests) from
// starting; so the NVML reader is built only with the build tag nvml and
// cgo (the agent image), and any other binary says it has no NVML.
package nvml

import "errors"

// ErrUnavailable is the error Open wraps when NVML cannot be used on this
// machine: no driver library, or a binary built without cgo.
var ErrUnavailable = errors.New("NVML is not available")
