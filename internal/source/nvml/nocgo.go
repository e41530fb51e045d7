//go:build !cgo

package nvml

import (
	"fmt"

	"github.com/gpupack/gpupack/agent"
)

// Reader is not available without cgo.
type Reader struct{}

// Open says that this binary cannot load NVML.
func Open() (*Reader, error) {
	return nil, fmt.Errorf("%w: this gpupack binary was built without cgo (CGO_ENABLED=0), and go-nvml needs cgo to load libnvidia-ml.so.1; run the agent image (ghcr.io/gpupack/gpupack-agent), which is built with cgo", ErrUnavailable)
}

// Sample is never reached: Open fails.
func (r *Reader) Sample() ([]agent.DeviceSample, error) { return nil, ErrUnavailable }

// Close does nothing.
func (r *Reader) Close() error { return nil }
