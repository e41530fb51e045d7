package promql

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sync/errgroup"

	"github.com/gpupack/gpupack/usage"
)

// RecordWindow is the span that each of gpupack's recording rules
// computes, and how often Prometheus evaluates them: a rule evaluated at t
// holds its bucket figure over the steps in (t-RecordWindow, t], so that
// consecutive evaluations tile time, each step counted once.
const RecordWindow = 5 * time.Minute

// StepLabel is the label that every recorded series carries: the
// evaluation step (the scrape interval) the rules were generated for, so
// that a report at another step never reads them.
const StepLabel = "gpupack_step"

// recordedGroup is the rule group's name; Prometheus derives the group's
// evaluation offset within RecordWindow from it (and the file's name).
const recordedGroup = "gpupack-buckets"

// HourWindow is the span of the second level of rules, gpupack:<figure>:1h:
// evaluated every hour, each combines the RecordWindow windows that ended in
// the hour before hourLag ago, so that a month reads 24 numbers per figure
// and device-day instead of 288.
const HourWindow = time.Hour

// hourLag is how far behind its evaluation an hourly window ends: the
// 5-minute windows it combines were evaluated at least that long before, so
// a 5-minute group still evaluating (or one evaluated at the same instant)
// is never missed.
const hourLag = RecordWindow

// hourlyGroup is the second level's rule group.
const hourlyGroup = "gpupack-buckets-1h"

// hourlyDevices is the series the second level records at each of its
// evaluations: the devices its window holds. Its timestamps say where the
// hourly windows lie (each ends hourLag before); it is absent where the
// first level held nothing, as when both levels were recorded over the
// past at once (the second must be recorded after the first is loaded).
const hourlyDevices = "gpupack:devices:1h"

// recordedXID is the first level's XID rule: the largest value each
// physical GPU's XID gauge held in the 5-minute window, one series per
// GPU, 0 for a healthy one. LoadHealth's first query reads it instead of
// every raw sample of the gauge, so that its cost follows GPU-hours, not
// the scrape interval.
const recordedXID = "gpupack:xid_max:5m"

// RuleFile is a Prometheus rules file (rule_files: in prometheus.yml, or
// a PrometheusRule's spec).
type RuleFile struct {
	Groups []RuleGroup `json:"groups" yaml:"groups"`
}

// RuleGroup is one group of recording rules, evaluated every Interval.
type RuleGroup struct {
	Name     string `json:"name" yaml:"name"`
	Interval string `json:"interval" yaml:"interval"`
	Rules    []Rule `json:"rules" yaml:"rules"`
}

// Rule is one recording rule: Record is the recorded series' name, Expr
// its PromQL, Labels added to its output.
type Rule struct {
	Record string            `json:"record" yaml:"record"`
	Expr   string            `json:"expr" yaml:"expr"`
	Labels map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
}

// RecordedName is the recorded series of a bucket figure, in the
// level:metric:operations convention: gpupack:<figure>:5m, e.g.
// gpupack:device_held_steps:5m.
func RecordedName(figure string) string {
	return "gpupack:" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(figure), "_"), "_") + ":5m"
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// RecordedHourName is the second level's series of a bucket figure:
// gpupack:<figure>:1h, e.g. gpupack:device_held_steps:1h.
func RecordedHourName(figure string) string {
	return strings.TrimSuffix(RecordedName(figure), ":5m") + ":1h"
}

// RecordingRules are the rules that record every bucket figure of the
// hourly path over RecordWindow at step (the scrape interval, which must
// divide RecordWindow), evaluated every RecordWindow: what `gpupack rules`
// prints and the chart ships. An hour's bucket is then read from the
// windows that end in it (see recordedCombine), a dozen recorded numbers
// per figure instead of the hour's samples.
func RecordingRules(step time.Duration, sel Selector) (RuleFile, error) {
	if step <= 0 || RecordWindow%step != 0 || step%time.Second != 0 {
		return RuleFile{}, fmt.Errorf("step %s: want whole seconds that divide %s, such as 30s (the scrape interval of dcgm-exporter)", step, stepValue(RecordWindow))
	}
	labels := map[string]string{StepLabel: stepValue(step)}
	if !sel.IsZero() {
		labels[SelectorLabel] = sel.String()
	}
	g := RuleGroup{Name: recordedGroup, Interval: model.Duration(RecordWindow).String()}
	for _, fig := range bucketFigures {
		if _, err := recordedCombine(fig); err != nil {
			return RuleFile{}, err
		}
		// The window (t-5m, t]: a range 1 ms short of it, so that a step
		// at t-5m belongs to the window before (Prometheus 2's ranges are
		// closed at both ends).
		g.Rules = append(g.Rules, Rule{
			Record: RecordedName(fig.name),
			Expr:   expand(fig.query, step, RecordWindow-time.Millisecond, sel.String()),
			Labels: labels,
		})
	}
	g.Rules = append(g.Rules, Rule{Record: recordedXID, Labels: labels,
		Expr: fmt.Sprintf("max by (%s) (max_over_time(%s[%dms]))", gpuLabels, sel.of(usage.XIDErrors), (RecordWindow - time.Millisecond).Milliseconds())})
	// The second level: every hour, the hour of 5-minute windows that
	// ended hourLag before, combined as a report combines them; the
	// figures with a default (hourDefaults) only where they differ from it.
	h := RuleGroup{Name: hourlyGroup, Interval: model.Duration(HourWindow).String()}
	hour := fmt.Sprintf("[%dms] offset %s", (HourWindow - time.Millisecond).Milliseconds(), stepValue(hourLag))
	for _, fig := range bucketFigures {
		expr, err := hourRule(fig, func(f bucketFigure) (string, error) { return combineRecorded(f, step, sel, hour) })
		if err != nil {
			return RuleFile{}, err
		}
		h.Rules = append(h.Rules, Rule{Record: RecordedHourName(fig.name), Expr: expr, Labels: labels})
	}
	h.Rules = append(h.Rules, Rule{Record: hourlyDevices, Labels: labels,
		Expr: fmt.Sprintf("count(last_over_time(%s{%s}[%dms] offset %s))", RecordedName("sampled steps"), sel.recorded(stepValue(step)), (HourWindow - time.Millisecond).Milliseconds(), stepValue(hourLag))})
	return RuleFile{Groups: []RuleGroup{g, h}}, nil
}

// RulesYAMLByLevel is RulesYAML one group per file, in the order promtool
// tsdb create-blocks-from rules must record them over the past: each level
// reads the one before, so the blocks of one are loaded before the next is
// recorded.
func RulesYAMLByLevel(step time.Duration, sel Selector) ([][]byte, error) {
	f, err := RecordingRules(step, sel)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, g := range f.Groups {
		b, err := yaml.Marshal(RuleFile{Groups: []RuleGroup{g}})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// RulesYAML is RecordingRules as a rules file, with a comment that says
// what it is for.
func RulesYAML(step time.Duration, sel Selector) ([]byte, error) {
	f, err := RecordingRules(step, sel)
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	flags := "--step " + stepValue(step)
	if !sel.IsZero() {
		flags += " --selector '" + sel.String() + "'"
	}
	head := fmt.Sprintf(`# gpupack's recording rules (gpupack rules %s): every figure of
# report --accounting hourly's buckets over %s windows of dcgm-exporter's
# series at a %s step (the scrape interval), evaluated every %s, and the
# same figures over the hour of those windows that ended %s before each
# hourly evaluation (gpupack:<figure>:1h). With them loaded, report and
# serve read a long window from the hourly ones and its ends from the
# %s ones, and the GPUs with XIDs from %s (each GPU's largest XID
# in the window).
`, flags, stepValue(RecordWindow), stepValue(step), stepValue(RecordWindow), stepValue(hourLag), stepValue(RecordWindow), recordedXID)
	return append([]byte(head), body.Bytes()...), nil
}

func stepValue(step time.Duration) string { return model.Duration(step).String() }

// recordedCombine is the function that makes an hour's figure of the
// recorded windows that end in it: the sum of counts and sums, the
// maximum of maxima, the minimum of minima, and for a quantile the same
// quantile of the windows' quantiles (an approximation: the hour's median
// of the windows' medians). It fails on a figure of another shape, so that
// a new figure is classified before it is recorded.
func recordedCombine(fig bucketFigure) (string, error) {
	q := fig.query
	for _, p := range []struct{ prefix, combine string }{
		{"max_over_time(", "max_over_time"},
		{"min_over_time(", "min_over_time"},
		{"quantile_over_time(0.95,", "quantile_over_time(0.95, "},
		{"quantile_over_time(0.5,", "quantile_over_time(0.5, "},
		{"count_over_time(", "sum_over_time"},
		{"sum_over_time(", "sum_over_time"},
		// The sample counts and the activity source: counts joined by "or".
		{"label_replace(sum by ($dev) (count_over_time(", "sum_over_time"},
		{"label_replace(count_over_time(", "sum_over_time"},
		// The values outside their range: extremes joined by "or".
		{"label_replace(min by ($dev) (min_over_time(", "min_over_time"},
		{"label_replace(max by ($dev) (max_over_time(", "max_over_time"},
	} {
		if strings.HasPrefix(q, p.prefix) {
			return p.combine, nil
		}
	}
	return "", fmt.Errorf("bucket figure %q: no rule says how its recorded windows make an hour (%s)", fig.name, q)
}

// recordedQuery reads figure fig's bucket of length bucket ending at each
// evaluation time (a bucket's end less 1 ms) from its recorded windows:
// those whose evaluation times fall in [end-bucket, end).
func recordedQuery(fig bucketFigure, step, bucket time.Duration, sel Selector) (string, error) {
	return combineRecorded(fig, step, sel, fmt.Sprintf("[%dms]", (bucket-time.Millisecond).Milliseconds()))
}

// combineRecorded combines figure fig's 5-minute windows that the range
// rng (such as "[3599999ms]", with an offset if need be) selects.
func combineRecorded(fig bucketFigure, step time.Duration, sel Selector, rng string) (string, error) {
	return combineSeries(fig, RecordedName(fig.name), step, sel, rng)
}

// combineSeries combines the recorded series name of figure fig (either
// level), recorded at step with sel, over the range rng.
func combineSeries(fig bucketFigure, name string, step time.Duration, sel Selector, rng string) (string, error) {
	combine, err := recordedCombine(fig)
	if err != nil {
		return "", err
	}
	series := fmt.Sprintf("%s{%s}%s", name, sel.recorded(stepValue(step)), rng)
	if strings.HasSuffix(combine, " ") { // a quantile's argument list
		return combine + series + ")", nil
	}
	return combine + "(" + series + ")", nil
}

// recordedCheckQuery counts, at each evaluation time, the devices that the
// recorded windows of the bucket hold (label gpupack_count="recorded"),
// those of them recorded with samples of checkMetric ("recorded_checked"),
// and the devices with a checkMetric sample at the bucket's middle ("raw"):
// the window that ends next after the middle holds every one of those, so
// a bucket with fewer recorded was not (wholly) recorded.
func recordedCheckQuery(step, bucket time.Duration, sel Selector) string {
	recorded, checked, raw := checkCounts(step, bucket, sel)
	return fmt.Sprintf(`label_replace(%s, "gpupack_count", "recorded", "", "") or label_replace(%s, "gpupack_count", "recorded_checked", "", "") or label_replace(%s, "gpupack_count", "raw", "", "")`, recorded, checked, raw)
}

// checkMetric is the series whose devices the check counts in the raw
// data: one metric, for counting the devices of every DCGM series at each
// hour's middle looks up and reads eight series per device and pod, 24
// times a day, and one finds a device the rules missed as well (rules
// that record a device record all its series). It is the framebuffer in
// use, which dcgm-exporter's default counters export for every GPU and
// MIG instance. A fleet that does not export it has no device to count,
// and its check is that of something recorded in every hour.
const checkMetric = usage.FBUsed

// checkCounts are recordedCheckQuery's three counts: the devices recorded,
// those recorded with checkMetric samples, and those with a checkMetric
// sample at the bucket's middle, all with sel.
func checkCounts(step, bucket time.Duration, sel Selector) (recorded, checked, raw string) {
	rng := fmt.Sprintf("[%dms]", (bucket - time.Millisecond).Milliseconds())
	rec := sel.recorded(stepValue(step))
	recorded = fmt.Sprintf(`count(last_over_time(%s{%s}%s))`, RecordedName("sampled steps"), rec, rng)
	checked = fmt.Sprintf(`count(last_over_time(%s{%s, metric=%q}%s))`, RecordedName("samples"), rec, checkMetric, rng)
	raw = fmt.Sprintf(`count(group by ($dev) (%s{$sel} offset %dms))`, checkMetric, (bucket/2 - time.Millisecond).Milliseconds())
	return recorded, checked, expand(raw, step, bucket, sel.String())
}

// recordedCovers says whether every bucket of the chunk r was recorded
// by gpupack's rules at step: some devices recorded in each, and no fewer
// recorded with checkMetric's samples than had one at its middle. Only
// whole hours are read from the rules: serve's current partial hour is
// computed from the series, so that it does not lag by up to a window.
func (s *Source) recordedCovers(ctx context.Context, r v1.Range, step, bucket time.Duration) (bool, error) {
	return s.recordedCoverage(ctx, r, step, bucket, false)
}

// recordedCoverage is recordedCovers, where emptyOK also passes a bucket
// with nothing recorded and no device sampled at its middle: for a window
// that the hourly rules were evaluated over throughout (planHourly), so
// that the 5-minute rules (in the same file) ran too, and an hour without
// a recorded window had nothing to record.
func (s *Source) recordedCoverage(ctx context.Context, r v1.Range, step, bucket time.Duration, emptyOK bool) (bool, error) {
	if s.paths().fastest >= pathComputed || bucket%time.Hour != 0 {
		return false, nil
	}
	m, err := s.queryRange(ctx, recordedCheckQuery(step, bucket, s.Selector), r)
	if err != nil {
		return false, fmt.Errorf("bucket figures, whether gpupack's recording rules hold them: %w", err)
	}
	counts := map[string]map[int64]float64{}
	for _, ss := range m {
		kind := string(ss.Metric["gpupack_count"])
		if counts[kind] == nil {
			counts[kind] = map[int64]float64{}
		}
		for _, p := range ss.Values {
			counts[kind][int64(p.Timestamp)] = float64(p.Value)
		}
	}
	for t := r.Start; !t.After(r.End); t = t.Add(r.Step) {
		at := t.UnixMilli()
		rec, ok := counts["recorded"][at]
		raw := counts["raw"][at] // 0 where no device had a sample
		if emptyOK && rec == 0 && raw == 0 {
			continue
		}
		if !ok || rec == 0 || math.IsNaN(rec) || !(counts["recorded_checked"][at] >= raw) {
			return false, nil
		}
	}
	return true, nil
}

// streamRecorded reads the buckets of the chunk c from the recorded
// windows, one range query per figure, bucketParallel at a time, and
// files them as the subqueries would.
func (s *Source) streamRecorded(ctx context.Context, c *chunkRead) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bucketParallel)
	for i := range bucketFigures {
		fig := &bucketFigures[i]
		q, err := recordedQuery(*fig, c.step, c.bucket, s.Selector)
		if err != nil {
			return err
		}
		g.Go(func() error {
			m, err := s.queryRange(gctx, q, c.r)
			if err != nil {
				return fmt.Errorf("bucket figure %q from its recording rule: %w", fig.name, err)
			}
			c.each(m, anyHour, func(start time.Time, d usage.Device, v float64, labels model.Metric) {
				fig.set(c.ownersBucket(start, d, fig.owner, labels), v, labels)
			})
			return nil
		})
	}
	return g.Wait()
}

// BucketProvenance is how StreamBuckets computed the buckets it read so
// far: RecordedHours from gpupack's recording rules, ComputedHours from
// the series themselves.
type BucketProvenance struct {
	RecordedHours, ComputedHours int
	// HourlyWindows counts the windows of the second level of rules
	// (gpupack:<figure>:1h) that the recorded hours were read from.
	HourlyWindows int
}

type provenanceCounts struct {
	sync.Mutex
	BucketProvenance
}

// BucketProvenance says how the buckets read so far were computed.
func (s *Source) BucketProvenance() BucketProvenance {
	s.provenance.Lock()
	defer s.provenance.Unlock()
	return s.provenance.BucketProvenance
}

func (s *Source) countHourlyWindows(n int) {
	s.provenance.Lock()
	defer s.provenance.Unlock()
	s.provenance.HourlyWindows += n
}

func (s *Source) countBuckets(recorded bool, n int) {
	s.provenance.Lock()
	defer s.provenance.Unlock()
	if recorded {
		s.provenance.RecordedHours += n
	} else {
		s.provenance.ComputedHours += n
	}
}
