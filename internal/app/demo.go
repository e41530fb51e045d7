package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/usage"
)

// DemoWindow is the demo's whole week at the step that report --demo
// accounts it at.
func DemoWindow() usage.Window {
	return usage.Window{Start: demo.Start, End: demo.End(), Step: demo.Step(demo.Window)}
}

// DemoReport is what `gpupack report --demo` prints: the demo week
// accounted at catalogue prices, with its queue wait.
func DemoReport(ctx context.Context) (*usage.Report, error) {
	r, err := Measure(ctx, Measurement{Window: DemoWindow(), Pricing: usage.Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		return nil, err
	}
	if r.QueueWait, err = ReportQueueWait(ctx, r, false, nil, r.End); err != nil {
		return nil, fmt.Errorf("queue wait: %w", err)
	}
	return r, nil
}

// DemoView is the dashboard's view of the embedded demo world: the week's
// report of `gpupack report --demo`, the diagnosis of `gpupack diagnose`
// with how long each pending pod has waited at the week's end, the plan
// and files of `gpupack plan`, and the curve of `gpupack simulate`. It is
// as of the week's end, so that the page is the same at every run.
func DemoView(ctx context.Context) (*View, error) {
	v, err := DemoViewWithoutCurve(ctx)
	if err != nil {
		return nil, err
	}
	return WithDemoCurve(ctx, v)
}

// DemoViewWithoutCurve is DemoView without the simulator's curve, which
// takes most of DemoView's time (seconds where the rest takes about one):
// its Computing names ComputingCurve, for WithDemoCurve to fill in.
func DemoViewWithoutCurve(ctx context.Context) (*View, error) {
	r, err := DemoReport(ctx)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	hours, err := demoHours(r)
	if err != nil {
		return nil, fmt.Errorf("hourly accounting: %w", err)
	}
	created, err := demo.Created()
	if err != nil {
		return nil, err
	}
	var warnings bytes.Buffer
	diag, err := DemoDiagnosis(ctx, &warnings)
	if err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	p, s, err := DemoPlan(ctx, &warnings)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	files, err := planout.Files(p, s)
	if err != nil {
		return nil, fmt.Errorf("plan files: %w", err)
	}
	v := &View{
		Source: "demo (embedded)", AsOf: r.End, Start: r.Start, End: r.End,
		Report: r, Hours: hours, Nodes: diag.Nodes, GPUs: diag.GPUs, Plan: p, QueueWait: r.QueueWait,
		Health:    planout.HealthOf(r.Health, p),
		Warnings:  append(append([]string(nil), diag.Warnings...), p.Warnings...),
		Pending:   PendingPods(diag.Findings, created, nil, r.End),
		Failed:    diag.Failures,
		Computing: []string{ComputingCurve},
	}
	if w := bytes.TrimSpace(warnings.Bytes()); len(w) > 0 {
		v.Warnings = append(v.Warnings, string(w))
	}
	for _, f := range files {
		v.PlanFiles = append(v.PlanFiles, PlanFile{Name: f.Name, Data: f.Data})
	}
	return v, nil
}

// WithDemoCurve returns a copy of v with the curve of `gpupack simulate`
// (its default simulation) and the bounds of the same arrivals,
// and ComputingCurve gone from its Computing; v itself is not changed.
func WithDemoCurve(ctx context.Context, v *View) (*View, error) {
	s := DefaultSimulation()
	s.Bounds = true
	results, bounds, err := Simulate(ctx, s, io.Discard, nil)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	out := *v
	out.Curve = make([]CurveRun, 0, len(results))
	for _, res := range results {
		out.Curve = append(out.Curve, CurveRun{Result: res, Points: res.Curve})
	}
	out.Bounds = bounds
	out.Computing = slices.DeleteFunc(slices.Clone(v.Computing), func(s string) bool { return s == ComputingCurve })
	if len(out.Computing) == 0 {
		out.Computing = nil
	}
	return &out, nil
}

// demoHours is the demo week hour by hour, at the step and default prices
// of report --demo: the same accounting that the demo's usage facts come
// from, made once per process.
func demoHours(r *usage.Report) ([]Hour, error) {
	m, err := demo.Measure()
	if err != nil {
		return nil, err
	}
	if !m.Week.Start.Equal(r.Start) || !m.Week.End.Equal(r.End) || m.Week.StepSecond != r.StepSecond {
		return nil, fmt.Errorf("report --demo covers %s..%s at %vs, the demo's hours %s..%s at %vs", r.Start, r.End, r.StepSecond, m.Week.Start, m.Week.End, m.Week.StepSecond)
	}
	hours := make([]Hour, len(m.Hours))
	for i, hr := range m.Hours {
		hours[i] = HourOf(hr.Start, hr)
	}
	return hours, nil
}
