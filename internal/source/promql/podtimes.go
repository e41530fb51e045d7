package promql

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/usage"
)

// podTimeFamilies are kube-state-metrics' pod time gauges that LoadMeta
// and LoadPodTimes read, each with the _over_time function that reads it
// over a window: the last value, or for a container's start the first (a
// restart moves it later).
// An array: its length sizes the records loadContext gathers them in.
var podTimeFamilies = [...]struct {
	metric string
	over   string
	set    func(e *usage.PodEvents, t time.Time)
}{
	{"kube_pod_created", "last", func(e *usage.PodEvents, t time.Time) { e.Created = t }},
	{"kube_pod_status_scheduled_time", "last", func(e *usage.PodEvents, t time.Time) { e.Scheduled = t }},
	{"kube_pod_status_container_ready_time", "last", func(e *usage.PodEvents, t time.Time) { e.ContainersReady = t }},
	{"kube_pod_status_ready_time", "last", func(e *usage.PodEvents, t time.Time) { e.Ready = t }},
	// The last of the app containers to start, each at its first start.
	{"kube_pod_container_state_started", "min", func(e *usage.PodEvents, t time.Time) { e.ContainersStarted = t }},
}

// podOwners selects the pods' controlling owners.
const podOwners = `kube_pod_owner{owner_is_controller="true"}`

// unixTime reads a gauge whose value is a Unix time in seconds.
func unixTime(v float64) time.Time { return time.Unix(0, int64(v*1e9)).UTC() }

// PodTimes are kube-state-metrics' pod times as one span of time (one
// bucket) shows them, series by series: MergePodTimes joins the spans of
// a window into what LoadMeta reads over the whole window at once. A
// long-running reader (serve) thus asks Prometheus about each span once,
// instead of about its whole window at every refresh.
type PodTimes struct {
	Start, End time.Time
	// values are, by family (index in podTimeFamilies) and series, the
	// family's _over_time value over the span.
	values []map[model.Fingerprint]podValue
	// owners are the controlling owners' series seen in the span.
	owners map[model.Fingerprint]podOwner
}

type podValue struct {
	key string // namespace/pod
	v   float64
}

type podOwner struct{ key, workload string }

// LoadPodTimes reads kube-state-metrics' pod times over the window, one
// PodTimes per bucket of it, oldest first: a range query per family with
// the bucket as its step, so that a day of hours costs six queries.
func (s *Source) LoadPodTimes(ctx context.Context, w usage.Window, bucket time.Duration) ([]*PodTimes, error) {
	if err := checkBucketWindow(w, bucket); err != nil {
		return nil, err
	}
	n := int(w.End.Sub(w.Start) / bucket)
	out := make([]*PodTimes, n)
	for i := range out {
		start := w.Start.Add(time.Duration(i) * bucket)
		out[i] = &PodTimes{Start: start, End: start.Add(bucket), values: make([]map[model.Fingerprint]podValue, len(podTimeFamilies)), owners: map[model.Fingerprint]podOwner{}}
		for f := range out[i].values {
			out[i].values[f] = map[model.Fingerprint]podValue{}
		}
	}
	// Each point, evaluated at a bucket's end, covers that bucket.
	r := v1.Range{Start: w.Start.Add(bucket), End: w.End, Step: bucket}
	span := func(at model.Time) *PodTimes {
		i := int(at.Time().Sub(w.Start)/bucket) - 1
		if i < 0 || i >= n {
			return nil
		}
		return out[i]
	}
	for f, fam := range podTimeFamilies {
		m, err := s.queryRange(ctx, fmt.Sprintf("%s_over_time(%s[%dms])", fam.over, fam.metric, bucket.Milliseconds()), r)
		if err != nil {
			return nil, fmt.Errorf("pods' %s times from kube-state-metrics: %w", fam.metric, err)
		}
		for _, ss := range m {
			key := string(ss.Metric["namespace"]) + "/" + string(ss.Metric["pod"])
			fp := ss.Metric.Fingerprint()
			for _, p := range ss.Values {
				if pt := span(p.Timestamp); pt != nil {
					pt.values[f][fp] = podValue{key: key, v: float64(p.Value)}
				}
			}
		}
	}
	m, err := s.queryRange(ctx, fmt.Sprintf("last_over_time(%s[%dms])", podOwners, bucket.Milliseconds()), r)
	if err != nil {
		return nil, fmt.Errorf("pods' owners from kube-state-metrics: %w", err)
	}
	for _, ss := range m {
		o := podOwner{key: string(ss.Metric["namespace"]) + "/" + string(ss.Metric["pod"]),
			workload: Workload(string(ss.Metric["owner_kind"]), string(ss.Metric["owner_name"]))}
		fp := ss.Metric.Fingerprint()
		for _, p := range ss.Values {
			if pt := span(p.Timestamp); pt != nil {
				pt.owners[fp] = o
			}
		}
	}
	return out, nil
}

// MergePodTimes joins spans into the pods' times over their union, as
// LoadMeta reads them over it at once: of each series, the last value of
// the latest span that has one (the first for a container's start), then
// the greatest over each pod's series; a pod's workload is its owner in
// the latest span that names one. The result is sorted by namespace and
// pod, and has only pods with at least one time.
func MergePodTimes(spans []*PodTimes) []usage.PodEvents {
	spans = slices.SortedStableFunc(slices.Values(spans), func(a, b *PodTimes) int { return a.Start.Compare(b.Start) })
	events := map[string]*usage.PodEvents{}
	for f, fam := range podTimeFamilies {
		series := map[model.Fingerprint]podValue{}
		for _, pt := range spans {
			for fp, v := range pt.values[f] {
				if prev, ok := series[fp]; ok && fam.over == "min" && prev.v <= v.v {
					continue
				}
				series[fp] = v
			}
		}
		best := map[string]float64{}
		for _, v := range series {
			if prev, ok := best[v.key]; !ok || v.v > prev {
				best[v.key] = v.v
			}
		}
		for key, v := range best {
			e := events[key]
			if e == nil {
				ns, pod, _ := strings.Cut(key, "/")
				e = &usage.PodEvents{Namespace: ns, Pod: pod}
				events[key] = e
			}
			fam.set(e, unixTime(v))
		}
	}
	owner := map[string]string{}
	for _, pt := range spans {
		latest := map[string]string{}
		for _, o := range pt.owners {
			latest[o.key] = max(latest[o.key], o.workload)
		}
		maps.Copy(owner, latest)
	}
	out := make([]usage.PodEvents, 0, len(events))
	for key, e := range events {
		e.Workload = owner[key]
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b usage.PodEvents) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod))
	})
	return out
}
