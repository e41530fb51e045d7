package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gpupack/gpupack/internal/cli/diagnose"
	"github.com/gpupack/gpupack/internal/cli/plan"
	"github.com/gpupack/gpupack/internal/cli/report"
	"github.com/gpupack/gpupack/internal/cli/simulate"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/usage"
)

// DemoView builds the view of the embedded demo world (internal/source/demo), each
// part made by its own verb's code: the week's report of
// `gpupack report --demo`, the diagnosis of `gpupack diagnose` with how long
// each pending pod has waited at the week's end, the plan and files of
// `gpupack plan`, and the curve of `gpupack simulate`. It is as of the
// week's end, so that the page is the same at every run.
func DemoView(ctx context.Context) (*serve.View, error) {
	r, err := demoReport(ctx)
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
	results, ceiling, err := simulate.Demo(ctx)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	v := &serve.View{
		Source: "demo (embedded)", AsOf: r.End, Start: r.Start, End: r.End,
		Report: r, Hours: hours, Nodes: diag.Nodes, GPUs: diag.GPUs, Plan: p, QueueWait: r.QueueWait,
		Health:   planout.HealthOf(r.Health, p),
		Warnings: append(append([]string(nil), diag.Warnings...), p.Warnings...),
	}
	if w := bytes.TrimSpace(warnings.Bytes()); len(w) > 0 {
		v.Warnings = append(v.Warnings, string(w))
	}
	for _, f := range diag.Findings {
		p := serve.PendingPod{Finding: f}
		if c, ok := created[f.Pod]; ok {
			p.Created = &c
			p.WaitedSeconds = usage.Known(max(0, r.End.Sub(c).Seconds()))
		}
		v.Pending = append(v.Pending, p)
	}
	for _, f := range files {
		v.PlanFiles = append(v.PlanFiles, serve.PlanFile{Name: f.Name, Data: f.Data})
	}
	for _, res := range results {
		v.Curve = append(v.Curve, serve.CurveRun{Result: res, Points: res.Curve})
	}
	v.Ceiling = &ceiling
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

// demoHours is the demo week hour by hour, at the step and default prices
// of report --demo: the same accounting that the demo's usage facts come
// from, made once per process.
func demoHours(r *usage.Report) ([]serve.Hour, error) {
	m, err := demo.Measure()
	if err != nil {
		return nil, err
	}
	if !m.Week.Start.Equal(r.Start) || !m.Week.End.Equal(r.End) || m.Week.StepSecond != r.StepSecond {
		return nil, fmt.Errorf("report --demo covers %s..%s at %vs, the demo's hours %s..%s at %vs", r.Start, r.End, r.StepSecond, m.Week.Start, m.Week.End, m.Week.StepSecond)
	}
	hours := make([]serve.Hour, len(m.Hours))
	for i, hr := range m.Hours {
		hours[i] = serve.HourOf(hr.Start, hr)
	}
	return hours, nil
}
