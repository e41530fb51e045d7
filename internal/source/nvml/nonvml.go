//go:build !(nvml && cgo)

package nvml

import (
	"fmt"

	"github.com/gpupack/gpupack/agent"
)

// Reader is not available in a binary built without NVML.
type Reader struct{}

// Open says that this binary cannot load NVML.
func Open() (*Reader, error) {
	return nil, fmt.Errorf("%w: this gpupack binary was built without NVML support (it needs the build tag nvml and cgo, CGO_ENABLED=1, to load libnvidia-ml.so.1); run the agent image (ghcr.io/gpupack/gpupack-agent, Dockerfile.agent), which is built with both", ErrUnavailable)
}

// Sample is never reached: Open fails.
func (r *Reader) Sample() ([]agent.DeviceSample, error) { return nil, ErrUnavailable }

// Close does nothing.
func (r *Reader) Close() error { return nil }
