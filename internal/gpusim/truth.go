package gpusim

import (
	"sort"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// Truth is what really happened between a scenario's start and an end:
// the GPU-seconds each pod held and used, computed in closed form from the
// script, not sampled.
type Truth struct {
	Start time.Time  `json:"start"`
	End   time.Time  `json:"end"`
	Pods  []PodTruth `json:"pods"`
}

// PodTruth is one pod's true GPU-seconds. A pod sharing a GPU by
// time-slicing with n others holds 1/n of it; its activity is its own.
type PodTruth struct {
	Namespace           string        `json:"namespace"`
	Pod                 string        `json:"pod"`
	AllocatedGPUSeconds usage.Seconds `json:"allocatedGPUSeconds"`
	ActiveGPUSeconds    usage.Seconds `json:"activeGPUSeconds"`
}

// Truth computes the ground truth over [0, upTo) of the scenario, which
// started at start.
func (s *Scenario) Truth(start time.Time, upTo time.Duration) Truth {
	tr := Truth{Start: start.UTC(), End: start.Add(upTo).UTC()}
	for _, d := range s.devices() {
		share := s.share(d)
		var on []*Pod
		cuts := []time.Duration{0, upTo}
		for pi := range s.Pods {
			p := &s.Pods[pi]
			if s.holds(p, d, p.From.D()) {
				on = append(on, p)
				cuts = append(cuts, min(p.From.D(), upTo), min(p.To.D(), upTo))
			}
		}
		if len(on) == 0 {
			continue
		}
		sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
		for _, p := range on {
			pt := PodTruth{Namespace: p.Namespace, Pod: p.Name}
			for i := 0; i+1 < len(cuts); i++ {
				a, b := cuts[i], cuts[i+1]
				if b <= a || !s.holds(p, d, a) {
					continue
				}
				n := 0
				for _, q := range on {
					if s.holds(q, d, a) {
						n++
					}
				}
				pt.AllocatedGPUSeconds += usage.Seconds((b - a).Seconds() * share / float64(n))
				act := p.Activity.integral(b-p.From.D()) - p.Activity.integral(a-p.From.D())
				pt.ActiveGPUSeconds += usage.Seconds(act * share)
			}
			tr.Pods = append(tr.Pods, pt)
		}
	}
	sort.Slice(tr.Pods, func(i, j int) bool {
		return tr.Pods[i].Namespace+"/"+tr.Pods[i].Pod < tr.Pods[j].Namespace+"/"+tr.Pods[j].Pod
	})
	return tr
}

// share is the fraction of a whole GPU that device d stands for.
func (s *Scenario) share(d usage.Device) float64 {
	m := s.models[d.Node]
	if d.MIGProfile == "" || m.MIG == nil {
		return 1
	}
	p, _ := m.MIG.Profile(d.MIGProfile)
	return float64(p.Compute) / float64(m.MIG.ComputeSlices)
}

// Events are the scripted Kubernetes life-cycle times of the pods, for
// start-up phases, with the scenario started at start: what
// kube-state-metrics and the kubelet's Pulled events would say, and the
// storage that the pod's spec shows.
func (s *Scenario) Events(start time.Time) []usage.PodEvents {
	var out []usage.PodEvents
	for _, p := range s.Pods {
		at := func(d *Duration) time.Time {
			if d == nil {
				return time.Time{}
			}
			return start.Add(p.From.D() + d.D()).UTC()
		}
		st := p.Startup
		if st.Created == nil && st.Scheduled == nil && st.ContainersStarted == nil && st.ContainersReady == nil && st.Ready == nil && len(st.Pulls) == 0 && st.Storage == nil {
			continue
		}
		e := usage.PodEvents{Namespace: p.Namespace, Pod: p.Name, Workload: st.Workload,
			Created: at(st.Created), Scheduled: at(st.Scheduled), ContainersStarted: at(st.ContainersStarted), ContainersReady: at(st.ContainersReady), Ready: at(st.Ready)}
		for _, pl := range st.Pulls {
			e.ImagePulls = append(e.ImagePulls, usage.ImagePull{Container: pl.Container, Image: pl.Image, At: at(&pl.At), Present: pl.Present,
				PullSeconds: pl.Seconds, WaitSeconds: pl.Seconds, SizeBytes: pl.SizeBytes})
		}
		if st.Storage != nil {
			e.Storage = usage.ClassifyModelStorage(*st.Storage)
		}
		out = append(out, e)
	}
	return out
}

// AppSeries samples the scripted application metrics on the window's steps.
func (s *Scenario) AppSeries(start time.Time, w usage.Window) []usage.AppSeries {
	var out []usage.AppSeries
	for _, p := range s.Pods {
		if p.App == nil {
			continue
		}
		as := usage.AppSeries{Name: p.App.Name, Namespace: p.Namespace, Pod: p.Name}
		for k := range min(w.Slots(), usage.MaxSteps) { // as in Series
			ts := w.Start.Add(time.Duration(k) * w.Step)
			t := ts.Sub(start)
			if t >= p.From.D() && t < p.To.D() {
				as.Samples = append(as.Samples, usage.Sample{TimeMs: ts.UnixMilli(), Value: p.Activity.level(t-p.From.D()) * p.App.PerActiveSecond})
			}
		}
		out = append(out, as)
	}
	return out
}

// Evidence is what cAdvisor and DCGM would say of the pods that script
// their CPU or input and run in the window (start is the scenario's
// start): the figures usage.Judge reads, exact where LoadEvidence reads
// them from the series that WriteCAdvisorMetrics and WriteMetrics serve.
// A figure the pod does not script stays unknown.
func (s *Scenario) Evidence(start time.Time, w usage.Window) []usage.Evidence {
	var out []usage.Evidence
	for i := range s.Pods {
		p := &s.Pods[i]
		from, to := start.Add(p.From.D()), start.Add(p.To.D())
		if (p.CPU == nil && p.Input == nil) || !to.After(w.Start) || !from.Before(w.End) {
			continue
		}
		e := usage.Evidence{Namespace: p.Namespace, Pod: p.Name}
		if c := p.CPU; c != nil && c.LimitCores > 0 {
			e.CPULimitCores = usage.Known(c.LimitCores)
			e.CPUThrottledRatio = usage.Known(c.ThrottledRatio)
			e.CPUUsedCores = usage.Known(c.UsedCores)
		}
		if in := p.Input; in != nil {
			e.DiskReadBytesPerSecond = usage.Known(in.DiskReadBytesPerSecond)
			e.NetworkReceiveBytesPerSecond = usage.Known(in.NetworkReceiveBytesPerSecond)
			e.PCIeRxBytesPerSecond, e.PCIeTxBytesPerSecond = usage.Known(in.PCIeRxBytesPerSecond), usage.Known(in.PCIeTxBytesPerSecond)
			e.NVLinkRxBytesPerSecond, e.NVLinkTxBytesPerSecond = usage.Known(in.NVLinkRxBytesPerSecond), usage.Known(in.NVLinkTxBytesPerSecond)
		}
		out = append(out, e)
	}
	return out
}
