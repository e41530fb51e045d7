package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	core "github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/nvml"
)

// TestWithoutGPU: on a machine without the NVIDIA driver (or a binary
// built without cgo) the agent says NVML is not available, not a panic
// or a silent empty /metrics.
func TestWithoutGPU(t *testing.T) {
	if g, err := nvml.Open(); err == nil {
		g.Close()
		t.Skip("this machine has NVML")
	}
	cmd := NewCommand(context.Background())
	var stderr bytes.Buffer
	cmd.SetErr(&stderr)
	cmd.SetOut(io.Discard)
	cmd.SetArgs([]string{"--node", "n1", "--listen", "127.0.0.1:0"})
	err := cmd.Execute()
	if err == nil || !errors.Is(err, nvml.ErrUnavailable) || !strings.Contains(err.Error(), "NVML") {
		t.Errorf("agent without a GPU: error %v, want NVML unavailable", err)
	}
}

func TestNeedsNode(t *testing.T) {
	cmd := NewCommand(context.Background())
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--node", ""})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "NODE_NAME") {
		t.Errorf("agent without a node name: error %v, want one naming NODE_NAME", err)
	}
}

type noGPUs struct{}

func (noGPUs) Sample() ([]core.DeviceSample, error) { return nil, nil }

// TestServeStopsOnSignal: serve returns once its context ends (the
// signal context of main), with the sampling loop stopped.
func TestServeStopsOnSignal(t *testing.T) {
	a := app.NewAgent("n1", app.AgentSources{
		GPUs:    noGPUs{},
		Cgroup:  func(uint32) (core.CgroupRef, bool, error) { return core.CgroupRef{}, false, nil },
		Holders: func(context.Context) (map[string][]core.Holder, error) { return nil, nil },
		Pods:    func(context.Context) (map[string]core.Pod, error) { return nil, nil },
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, &options{listen: "127.0.0.1:0", node: "n1", interval: time.Second}, a, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve after its context ended: %v", err)
	}
}
