package promql

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/usage"
)

// gpuLabels are the labels that name a physical GPU (a MIG instance's
// series count for its GPU).
const gpuLabels = "Hostname, hostname, node, kubernetes_node, gpu, UUID, uuid"

// LoadHealth reads, for the hourly path, the XIDs each GPU reported in the
// window from dcgm-exporter's XID gauge, as the raw path's usage.Account
// does (Report.Health): an instant query at the window's end, whose
// subquery at the window's step sees the gauge's distinct positive values
// (a value held for less than a step may be missed).
//
// A subquery over a month evaluates the gauge of every GPU at every step
// (86,400 steps of 30 s); so a first query (xidFind) finds the GPUs whose
// gauge was ever positive (few: most GPUs never report an XID), and the
// subquery runs on their series alone. It finds what the subquery over
// every GPU finds: a GPU left out had no positive value.
func (s *Source) LoadHealth(ctx context.Context, w usage.Window) ([]usage.DeviceHealth, error) {
	hs, err := s.loadHealth(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("GPU health, the XIDs each GPU reported: %w", err)
	}
	return hs, nil
}

// loadHealth is LoadHealth, its errors not yet saying what was read.
func (s *Source) loadHealth(ctx context.Context, w usage.Window) ([]usage.DeviceHealth, error) {
	at := w.End.Add(-time.Millisecond)
	find, err := s.xidFind(ctx, w, at)
	if err != nil {
		return nil, err
	}
	found, err := s.queryVector(ctx, find, at)
	if err != nil {
		return nil, err
	}
	var vec model.Vector
	for _, sel := range xidSelectors(found) {
		got, err := s.xidsSeen(ctx, w, sel, at)
		if err != nil {
			return nil, err
		}
		vec = append(vec, got...)
	}
	byGPU := map[string]*usage.DeviceHealth{}
	for _, smp := range vec {
		d := device(smp.Metric)
		xid, err := strconv.Atoi(string(smp.Metric["xid"]))
		if err != nil || xid <= 0 {
			continue
		}
		key := d.Node + "/" + d.UUID
		h := byGPU[key]
		if h == nil {
			h = &usage.DeviceHealth{Node: d.Node, UUID: d.UUID, GPU: d.GPU}
			byGPU[key] = h
		}
		if !slices.Contains(h.XIDs, xid) {
			h.XIDs = append(h.XIDs, xid)
		}
	}
	var out []usage.DeviceHealth
	for _, h := range byGPU {
		slices.Sort(h.XIDs)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node+"/"+out[i].UUID < out[j].Node+"/"+out[j].UUID })
	return out, nil
}

// xidMargin is how far before the window LoadHealth's first query looks:
// the subquery's first step looks back up to the lookback delta (5
// minutes unless Prometheus was told otherwise) before the window, and an
// hour's margin finds every sample it may see.
const xidMargin = time.Hour

// xidFind is LoadHealth's first query, evaluated at at: the GPUs whose XID
// gauge held a positive value from xidMargin before w to at. Where
// gpupack's rules recorded recordedXID (at w's step) by the start of that
// span, it reads their 5-minute windows (twelve numbers per GPU-hour), and
// the raw gauge over the last two windows only, which the rules may not
// have evaluated yet; elsewhere, one pass of a plain range function over
// every raw sample.
func (s *Source) xidFind(ctx context.Context, w usage.Window, at time.Time) (string, error) {
	span := w.End.Sub(w.Start) + xidMargin
	raw := func(d time.Duration) string {
		return fmt.Sprintf(`group by (%s) (max_over_time(%s[%dms]) > 0)`, gpuLabels, s.Selector.of(usage.XIDErrors), d.Milliseconds())
	}
	if s.paths().fastest >= pathComputed {
		return raw(span), nil
	}
	sel := fmt.Sprintf("%s{%s}", recordedXID, s.Selector.recorded(stepValue(w.Step)))
	// A window recorded in the span's first two windows: the rule was
	// loaded by then, and Prometheus evaluates it with the buckets' rules
	// every 5 minutes from then on (what it may miss is in the margin's
	// first minutes, which only a lookback delta of most of an hour sees).
	probe := fmt.Sprintf("count(last_over_time(%s[%dms]))", sel, (2 * RecordWindow).Milliseconds())
	v, err := s.queryVector(ctx, probe, at.Add(-span).Add(2*RecordWindow))
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return raw(span), nil
	}
	return fmt.Sprintf(`group by (%s) (max_over_time(%s[%dms]) > 0) or %s`, gpuLabels, sel, span.Milliseconds(), raw(2*RecordWindow)), nil
}

// xidSelectorChunk is how many GPUs one subquery of LoadHealth names.
const xidSelectorChunk = 200

// xidSelectors are the matchers that select the XID series of the GPUs in
// found, by UUID (or dcgm-exporter's older uuid label), a chunk of GPUs
// per matcher; a GPU named by neither makes one matcher that selects every
// series (the subquery then runs over every GPU).
func xidSelectors(found model.Vector) []string {
	byLabel := map[string][]string{}
	for _, smp := range found {
		switch {
		case smp.Metric["UUID"] != "":
			byLabel["UUID"] = append(byLabel["UUID"], regexp.QuoteMeta(string(smp.Metric["UUID"])))
		case smp.Metric["uuid"] != "":
			byLabel["uuid"] = append(byLabel["uuid"], regexp.QuoteMeta(string(smp.Metric["uuid"])))
		default:
			return []string{""}
		}
	}
	var out []string
	for _, name := range []string{"UUID", "uuid"} {
		ids := byLabel[name]
		slices.Sort(ids)
		ids = slices.Compact(ids)
		for lo := 0; lo < len(ids); lo += xidSelectorChunk {
			out = append(out, fmt.Sprintf("%s=~%q", name, strings.Join(ids[lo:min(lo+xidSelectorChunk, len(ids))], "|")))
		}
	}
	return out
}

// xidsSeen is LoadHealth's subquery over the XID series that sel selects:
// each distinct positive value a GPU's gauge held at a step of the window.
func (s *Source) xidsSeen(ctx context.Context, w usage.Window, sel string, at time.Time) (model.Vector, error) {
	step := max(int(w.Step.Seconds()), 1)
	query := fmt.Sprintf(`count by (%s, xid) (count_over_time((count_values by (%s) ("xid", %s{%s} > 0))[%ds:%ds]))`,
		gpuLabels, gpuLabels, usage.XIDErrors, s.Selector.and(sel), int(w.End.Sub(w.Start).Seconds()), step)
	return s.queryVector(ctx, query, at)
}
