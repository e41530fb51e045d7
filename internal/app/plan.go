package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// PlanRequest names what a plan reads: the cluster; its usage from a usage
// file (Usage) or measured now from a PromQL store (Prometheus) over
// Window ("7d" by default there; otherwise it must match the file's); the
// autoscaling file ("" for none, the demo's with the demo cluster); and
// the planner's options.
type PlanRequest struct {
	Cluster    Cluster
	Usage      string
	Prometheus string
	// MaxAnswer is Measurement.MaxAnswer.
	MaxAnswer int64
	// Access is Measurement.Access.
	Access promql.Access
	// Selector is Measurement.Selector.
	Selector    promql.Selector
	Window      string
	Autoscaling string
	Options     plan.Options
}

// MakePlan reads what the request names and plans; it returns the
// snapshot planned for too. Warnings go to stderr.
func MakePlan(ctx context.Context, req PlanRequest, stderr io.Writer) (*plan.Plan, *cluster.Snapshot, error) {
	if req.Prometheus != "" && req.Usage != "" {
		return nil, nil, errors.New("--prometheus and --usage exclude each other: measure now, or read a measurement")
	}
	s, _, err := req.Cluster.Load(ctx, demo.Cluster(), demo.ClusterName, stderr)
	if err != nil {
		return nil, nil, err
	}
	var u *usage.Facts
	usageName := req.Usage
	if req.Prometheus != "" {
		from := Measurement{Prometheus: req.Prometheus, MaxAnswer: req.MaxAnswer, Access: req.Access, Selector: req.Selector}
		if u, err = MeasureFacts(ctx, from, req.Window, s.Catalogue, time.Now()); err != nil {
			return nil, nil, err
		}
	} else {
		if req.Usage == "" && req.Cluster.IsDemo() {
			usageName = demo.UsageName
		}
		if u, err = usageFor(req.Cluster, req.Usage, s, stderr); err != nil {
			return nil, nil, err
		}
	}
	if req.Window != "" {
		w, err := usage.ParseWindow(req.Window)
		if err != nil {
			return nil, nil, fmt.Errorf("--window %w", err)
		}
		if u != nil && u.Window != w {
			return nil, nil, fmt.Errorf("--window %s, but %s covers %s; plan over the window that was measured, or measure again over %s", req.Window, usageName, u.Window, req.Window)
		}
		if u == nil {
			u = &usage.Facts{Window: w}
		}
	}
	scaling, err := readAutoscaling(req.Autoscaling, req.Cluster.IsDemo())
	if err != nil {
		return nil, nil, err
	}
	opts := req.Options
	opts.Autoscaling = scaling
	p, err := plan.Make(ctx, s, u, opts)
	if err != nil {
		return nil, nil, err
	}
	return p, s, nil
}

// DemoPlan is the plan that `gpupack plan` prints with no flags: the
// embedded demo cluster and its week of usage, at the default options, and
// the snapshot it is a plan for.
func DemoPlan(ctx context.Context, stderr io.Writer) (*plan.Plan, *cluster.Snapshot, error) {
	return MakePlan(ctx, PlanRequest{Options: plan.DefaultOptions()}, stderr)
}

// MeasureFacts accounts the window of this length ("7d" when "") that ends
// now from the PromQL store that from names (its Prometheus, MaxAnswer,
// Access and Selector), read raw or hourly as Accounting auto chooses,
// and returns the planner's input.
func MeasureFacts(ctx context.Context, from Measurement, window string, c *gpu.Catalogue, now time.Time) (*usage.Facts, error) {
	r, err := MeasureLatest(ctx, from, window, c, now)
	if err != nil {
		return nil, err
	}
	return r.Facts(), nil
}

// MeasureLatest accounts the window of this length ("7d" when "") that
// ends now from the PromQL store that from names, read raw or hourly as
// Accounting auto chooses.
func MeasureLatest(ctx context.Context, from Measurement, window string, c *gpu.Catalogue, now time.Time) (*usage.Report, error) {
	if window == "" {
		window = "7d"
	}
	length, err := usage.ParseWindow(window)
	if err != nil {
		return nil, fmt.Errorf("--window %w", err)
	}
	// The hourly path has no step limit, and its step must divide an
	// hour; a raw read takes the shortest step its window allows.
	hourly, err := AccountingAuto.Hourly(true, length, hourlyStep)
	if err != nil {
		return nil, err
	}
	step := usage.DefaultStep(length)
	if hourly {
		step = hourlyStep
	}
	m := from
	m.Window, m.Hourly, m.Pricing = LatestWindow(now, length, step, hourly), hourly, usage.Pricing{Catalogue: c}
	return Measure(ctx, m)
}

// hourlyStep is the evaluation step of the hourly path's subqueries when
// no step is given.
const hourlyStep = 30 * time.Second

// readAutoscaling reads the autoscaling file, the demo's with the demo
// cluster, or none.
func readAutoscaling(file string, isDemo bool) (*plan.AutoscalingInput, error) {
	if file == "" {
		if isDemo {
			return plan.ParseAutoscaling(demo.Autoscaling(), demo.AutoscalingName, parsePromQL)
		}
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--autoscaling: %w", err)
	}
	return plan.ParseAutoscaling(data, file, parsePromQL)
}

// parsePromQL parses a query that KEDA will send to Prometheus, with the
// MetricsQL parser, which reads all of PromQL.
func parsePromQL(query string) error {
	_, err := metricsql.Parse(query)
	return err
}
