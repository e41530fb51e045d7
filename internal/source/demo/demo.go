// Package demo is gpupack's one demo world: a cluster snapshot (GPU nodes
// whole, MIG and time-sliced; bound pods; pending GPU pods of every cause,
// with their creation times) and a week of DCGM usage of exactly its bound
// pods. `gpupack report`, `diagnose`, `plan`, `fake-dcgm` and
// `serve --demo` all tell its story. The usage facts that diagnose and plan
// read are the accounting of that week, never a hand-written file.
//
// It is an edge package of embedded data: it imports the pure packages and
// fakedcgm, never client-go, net/http or cobra.
package demo

import (
	_ "embed"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/usage"
)

var (
	//go:embed cluster.yaml
	clusterYAML []byte
	//go:embed scenario.yaml
	scenarioYAML []byte
	//go:embed pending.yaml
	pendingYAML []byte
	//go:embed autoscaling.yaml
	autoscalingYAML []byte
)

// AutoscalingName names the demo's autoscaling file in messages.
const AutoscalingName = "demo/autoscaling.yaml"

// Autoscaling says how the demo world's inference workloads scale (kind
// Autoscaling: the KEDA queries, the Karpenter node class and each
// workload's application metric).
func Autoscaling() []byte { return autoscalingYAML }

// The names of the embedded files in messages.
const (
	ClusterName  = "demo/cluster.yaml"
	ScenarioName = "demo/scenario.yaml"
	UsageName    = "demo usage (accounted from demo/scenario.yaml)"
)

// Start is when the demo week begins, fixed so that every output is stable;
// Window is its length.
var Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// Window is the demo's span: a week.
const Window = 7 * 24 * time.Hour

// End is when the demo week ends: the demo's "now".
func End() time.Time { return Start.Add(Window) }

// Cluster is the demo cluster snapshot (kind ClusterSnapshot).
func Cluster() []byte { return clusterYAML }

// Scenario is the demo week's script of DCGM usage.
func Scenario(c *gpu.Catalogue) (*gpusim.Scenario, error) {
	s, err := gpusim.Parse(scenarioYAML, ScenarioName, c)
	if err != nil {
		return nil, fmt.Errorf("the embedded demo scenario is invalid: %w", err)
	}
	return s, nil
}

// Account accounts the demo scenario over w (a window within the week) at
// the pricing given, from its samples, as report --demo does.
func Account(s *gpusim.Scenario, w usage.Window, pricing usage.Pricing) (*usage.Report, error) {
	r, err := usage.Account(usage.Input{Window: w, Pricing: pricing, Series: s.Series(Start, w), App: s.AppSeries(Start, w), Pods: s.Events(Start)})
	if err != nil {
		return nil, err
	}
	r.JudgeBottlenecks(s.Evidence(Start, w))
	r.CompareWithField()
	return r, nil
}

// Step is the demo's step for a window: the shortest that keeps it within
// usage.MaxSteps (usage.DefaultStep), lengthened to divide an hour, so that
// the hours, each accounted on its own, sample what the window samples and
// add up to it: 60 s for the week.
func Step(window time.Duration) time.Duration {
	s := usage.DefaultStep(window)
	for s < time.Hour && time.Hour%s != 0 {
		s += time.Second
	}
	return s
}

// Week is the accounting of the whole week at catalogue prices and the
// demo's step (Step): what report --demo prints.
func Week(c *gpu.Catalogue) (*usage.Report, error) {
	s, err := Scenario(c)
	if err != nil {
		return nil, err
	}
	return Account(s, usage.Window{Start: Start, End: End(), Step: Step(Window)}, usage.Pricing{Catalogue: c})
}

// Hours accounts each hour of the week on its own, at the step and pricing
// of r (the week's report), so that the hours add up to the week.
func Hours(c *gpu.Catalogue, r *usage.Report, pricing usage.Pricing) ([]*usage.Report, error) {
	s, err := Scenario(c)
	if err != nil {
		return nil, err
	}
	step := time.Duration(float64(r.StepSecond) * float64(time.Second))
	var hours []*usage.Report
	for h := r.Start; h.Before(r.End); h = h.Add(time.Hour) {
		w := usage.Window{Start: h, End: h.Add(time.Hour), Step: step}
		if w.End.After(r.End) {
			w.End = r.End
		}
		hr, err := Account(s, w, pricing)
		if err != nil {
			return nil, fmt.Errorf("hour %s: %w", h.Format(time.RFC3339), err)
		}
		hours = append(hours, hr)
	}
	return hours, nil
}

// Measured is the demo week accounted once per process at catalogue
// prices: the week's report, each hour's, and the usage facts that
// diagnose and plan read (FactsOf).
type Measured struct {
	Week  *usage.Report
	Hours []*usage.Report
	Facts *usage.Facts
}

var measured struct {
	once sync.Once
	m    *Measured
	err  error
}

// Measure accounts the demo week, once per process.
func Measure() (*Measured, error) {
	measured.once.Do(func() {
		c := gpu.Default()
		week, err := Week(c)
		if err != nil {
			measured.err = err
			return
		}
		hours, err := Hours(c, week, usage.Pricing{Catalogue: c})
		if err != nil {
			measured.err = err
			return
		}
		u, err := FactsOf(week)
		if err != nil {
			measured.err = err
			return
		}
		measured.m = &Measured{Week: week, Hours: hours, Facts: u}
	})
	return measured.m, measured.err
}

// FactsOf is what diagnose and plan read of the demo week: the facts of
// its usage file (kind PodUsage), as report --demo --format podusage writes
// it and diagnose --usage reads it back, each pod's mean activity in every
// hour of the week and the GPUs per model and hour included. The file is
// built and read as a structure, never as text.
func FactsOf(week *usage.Report) (*usage.Facts, error) {
	file := week.Facts().File()
	u, err := file.Facts()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", UsageName, err)
	}
	return u, nil
}

// Created is when each pending pod of the demo cluster was created, by
// "namespace/name", as a live cluster's watcher reports it.
func Created() (map[string]time.Time, error) {
	var created map[string]time.Time
	if err := yaml.UnmarshalStrict(pendingYAML, &created); err != nil {
		return nil, fmt.Errorf("demo/pending.yaml: %w; want lines of namespace/name: RFC 3339 time", err)
	}
	return created, nil
}
