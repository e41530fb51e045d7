// Package usagefacts connects measurement to the verbs that consume it: it
// accounts a window of Prometheus data with package usage, and turns the
// accounting into the per-pod usage facts that diagnose and plan read (the
// usage file of `gpupack diagnose --usage`). It is an edge package.
package usagefacts

import (
	"context"
	"math"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/promsource"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// FromPrometheus reads a window of DCGM (and kube-state-metrics and
// application) series from Prometheus and accounts it. Node labels for price
// rules come from pricing.NodeLabels when set (read from the live cluster),
// else from kube-state-metrics' kube_node_labels.
func FromPrometheus(ctx context.Context, url string, w usage.Window, pricing usage.Pricing, apps map[string]string) (*usage.Report, error) {
	src, err := promsource.New(url)
	if err != nil {
		return nil, err
	}
	d, err := src.Load(ctx, w, apps)
	if err != nil {
		return nil, err
	}
	if pricing.NodeLabels == nil {
		pricing.NodeLabels = d.NodeLabels
	}
	return usage.Account(usage.Input{Window: w, Pricing: pricing, Series: d.Series, App: d.App, Pods: d.Pods})
}

// Bucket is the span that the hourly path reads at once.
const Bucket = time.Hour

// FromPrometheusHourly accounts the window from hourly buckets that
// Prometheus computes (promsource.LoadBuckets), never pulling raw samples:
// for windows of days to months. The window must start and end on whole
// hours.
func FromPrometheusHourly(ctx context.Context, url string, w usage.Window, pricing usage.Pricing, apps map[string]string) (*usage.Report, error) {
	src, err := promsource.New(url)
	if err != nil {
		return nil, err
	}
	acct, err := usage.NewBucketAccount(w.Start, w.End)
	if err != nil {
		return nil, err
	}
	// A day of buckets at a time: a month of a fleet is never held at once.
	if err := src.StreamBuckets(ctx, w, Bucket, acct.Add); err != nil {
		return nil, err
	}
	d, err := src.LoadMeta(ctx, w, apps, Bucket)
	if err != nil {
		return nil, err
	}
	if pricing.NodeLabels == nil {
		pricing.NodeLabels = d.NodeLabels
	}
	return acct.Report(pricing, d.Pods, d.App, Bucket)
}

// Step is the query step for a window: 30 s, or the shortest whole number
// of seconds that keeps the window within usage.MaxSteps.
func Step(window time.Duration) time.Duration {
	return max(30*time.Second, usage.MinStep(window))
}

// File converts an accounting report into the usage file: per pod, its mean
// activity, pattern, VRAM p95 and the share of its held time that its GPU
// sat below the idle floor (idle-held). Pods with nothing measured are left out rather than written as 0.
func File(r *usage.Report) diagnose.UsageFile {
	f := diagnose.UsageFile{APIVersion: diagnose.UsageAPIVersion, Kind: diagnose.UsageKind, Window: r.End.Sub(r.Start).String()}
	for _, p := range r.Pods {
		e := diagnose.UsageFilePod{Pod: p.Key()}
		if m := p.Pattern.MeanActivity; m.Known && p.Pattern.Name != "" && p.Pattern.Name != usage.UnknownPattern {
			v := m.Value
			e.Activity = &v
			e.Pattern = string(p.Pattern.Name)
		}
		// A measured 0 MiB is written as 0Mi; only an unknown p95 is left out.
		if v := p.VRAMUsedMiB.P95; v.Known {
			e.VRAMUsedP95 = cluster.FormatMemory(gpu.MiB(v.Value))
		}
		if idle := p.Pattern.IdleRatio; idle.Known {
			v := math.Round(min(max(idle.Value, 0), 1)*1e4) / 1e4
			e.IdleHeldRatio = &v
		}
		if e.Activity == nil && e.VRAMUsedP95 == "" && e.IdleHeldRatio == nil {
			continue
		}
		f.Pods = append(f.Pods, e)
	}
	return f
}

// PlanUsage converts diagnose's usage facts into the planner's input.
func PlanUsage(du *diagnose.Usage) *plan.Usage {
	u := &plan.Usage{Window: du.Window, Pods: make(map[string]plan.Observation, len(du.Pods))}
	for key, f := range du.Pods {
		u.Pods[key] = plan.Observation{ActiveMeasured: f.Measured, ActiveRatio: f.ActiveRatio, Pattern: f.Pattern, VRAMUsedP95: f.VRAMUsedP95,
			IdleHeldRatio: f.IdleHeldRatio, IdleHeldMeasured: f.IdleHeldMeasured, HourlyActivity: f.HourlyActivity}
	}
	return u
}
