package app

import (
	"context"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/usage"
)

// RunningRequest names where running pods are measured: a PromQL store
// (Measurement's Prometheus, MaxAnswer, Access and Selector) over the
// Window that ends now ("7d" when ""), or the demo week without one.
type RunningRequest struct {
	From   Measurement
	Window string
}

// Running is the application step of the diagnosis: what limits each
// running GPU pod over the window, and what to change instead of adding
// GPUs.
func Running(ctx context.Context, req RunningRequest, c *gpu.Catalogue, now time.Time) (usage.Running, error) {
	var r *usage.Report
	var err error
	if req.From.Prometheus == "" {
		r, err = demo.Week(c)
	} else {
		r, err = MeasureLatest(ctx, req.From, req.Window, c, now)
	}
	if err != nil {
		return usage.Running{}, err
	}
	return r.Running(), nil
}
