package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/cli/diagnose"
	"github.com/gpupack/gpupack/internal/cli/plan"
	"github.com/gpupack/gpupack/internal/cli/report"
	"github.com/gpupack/gpupack/internal/cli/simulate"
	"github.com/gpupack/gpupack/internal/fakedcgm"
	"github.com/gpupack/gpupack/internal/planout"
	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/usage"
)

// DemoView builds the view of the embedded demos, each made by its own
// verb's code: the report of `gpupack report --demo`, the diagnosis of
// `gpupack diagnose`, the plan and files of `gpupack plan`, and the curve
// of `gpupack simulate`.
func DemoView(ctx context.Context) (*serve.View, error) {
	r, err := demoReport(ctx)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	hours, err := demoHours(r)
	if err != nil {
		return nil, fmt.Errorf("hourly accounting: %w", err)
	}
	var warnings bytes.Buffer
	diag, err := diagnose.Demo(ctx, &warnings)
	if err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	p, s, err := plan.Demo(ctx, &warnings)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	files, err := planout.Files(p, s)
	if err != nil {
		return nil, fmt.Errorf("plan files: %w", err)
	}
	results, err := simulate.Demo(ctx)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	v := &serve.View{
		Source: "demo (embedded)", AsOf: time.Now().UTC(), Start: r.Start, End: r.End,
		Report: r, Hours: hours, Nodes: diag.Nodes, GPUs: diag.GPUs, Plan: p,
		Warnings: append(append([]string(nil), diag.Warnings...), p.Warnings...),
	}
	if w := bytes.TrimSpace(warnings.Bytes()); len(w) > 0 {
		v.Warnings = append(v.Warnings, string(w))
	}
	for _, f := range diag.Findings {
		// The demo clusters record no creation times: the wait is unknown.
		v.Pending = append(v.Pending, serve.PendingPod{Finding: f})
	}
	for _, f := range files {
		v.PlanFiles = append(v.PlanFiles, serve.PlanFile{Name: f.Name, Data: f.Data})
	}
	for _, res := range results {
		v.Curve = append(v.Curve, serve.CurveRun{Result: res, Points: res.Curve})
	}
	return v, nil
}

// demoReport is what `gpupack report --demo --format json` prints.
func demoReport(ctx context.Context) (*usage.Report, error) {
	var out bytes.Buffer
	cmd := report.NewCommand(ctx)
	cmd.SetArgs([]string{"--demo", "--format", "json"})
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	if err := cmd.ExecuteContext(ctx); err != nil {
		return nil, err
	}
	var r usage.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("reading report --demo's JSON: %w", err)
	}
	return &r, nil
}

// demoHours accounts the demo scenario hour by hour over the report's
// window, at its step and default prices (those of report --demo).
func demoHours(r *usage.Report) ([]serve.Hour, error) {
	c := gpu.Default()
	s := fakedcgm.Demo(c)
	step := time.Duration(float64(r.StepSecond) * float64(time.Second))
	var hours []serve.Hour
	for h := r.Start; h.Before(r.End); h = h.Add(time.Hour) {
		end := h.Add(time.Hour)
		if end.After(r.End) {
			end = r.End
		}
		w := usage.Window{Start: h, End: end, Step: step}
		hr, err := usage.Account(usage.Input{Window: w, Pricing: usage.Pricing{Catalogue: c},
			Series: s.Series(r.Start, w), App: s.AppSeries(r.Start, w), Pods: s.Events(r.Start)})
		if err != nil {
			return nil, fmt.Errorf("hour %s: %w", h.Format(time.RFC3339), err)
		}
		hours = append(hours, serve.HourOf(h, hr))
	}
	return hours, nil
}
