package promsource

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"

	"github.com/gpupack/gpupack/usage"
)

// The labels that name a device and an owner in dcgm-exporter's series, as
// device() and owner() read them; every bucket query groups by them.
const (
	deviceLabels = "Hostname, hostname, node, kubernetes_node, gpu, UUID, uuid, modelName, GPU_I_PROFILE, GPU_I_ID"
	ownerLabels  = "namespace, pod, container, exported_namespace, exported_pod, exported_container"
)

// bucketFigure is one figure of a bucket: the PromQL that computes it for
// every device (or device and owner) over one bucket, evaluated at the
// bucket's last step, and where it goes.
type bucketFigure struct {
	name  string
	query string
	owner bool // results carry owner labels: an owner's bucket
	set   func(b *usage.Bucket, v float64, labels model.Metric)
}

// bucketBlocks are the building blocks of the figures' queries, written as
// usage's raw path reads samples: a step at which any series of a device
// has a sample is sampled ($all); an owner present at a step ($owned) holds
// 1/n of the device with the n owners present ($share); activity ($act) is
// GR engine, else SM, else GPU utilisation/100, clamped to 0..1; a NaN or
// infinite value is present but unknown; energy per step ($energy) is the
// counter's increase from the previous step (all of it after a reset), else
// power x step. $dev and $own are the label lists, $range the bucket's
// subquery range at the step.
func bucketBlocks(step, bucket time.Duration) *strings.Replacer {
	metrics := strings.Join(usage.Metrics, "|")
	finite := func(x string) string { return "(" + x + " > -Inf < +Inf)" }
	byDev := func(metric string) string { return "max by ($dev) (" + metric + ")" }
	s := fmt.Sprintf("%dms", step.Milliseconds())
	counter := "(" + byDev(usage.TotalEnergy) + " - max by ($dev) (" + usage.TotalEnergy + " offset " + s + "))"
	return strings.NewReplacer(
		"$energy", "(((("+counter+" >= 0) or ("+byDev(usage.TotalEnergy)+" and ("+counter+" < 0))) / 1000) or ($power * "+strconv.FormatFloat(step.Seconds(), 'g', -1, 64)+"))",
		"$counter", counter,
		"$share", "($owned / on ($dev) group_left() count by ($dev) ($owned))",
		"$oact", "($owned * on ($dev) group_left() $act)",
		"$ofb", "($owned * on ($dev) group_left() $fb)",
		"$odram", "($owned * on ($dev) group_left() "+finite(byDev(usage.DRAMActive))+")",
		"$opower", "($owned * on ($dev) group_left() $power)",
		"$owned", `(group by ($dev, $own) ({__name__=~"`+metrics+`", pod!=""}) or group by ($dev, $own) ({__name__=~"`+metrics+`", exported_pod!=""}))`,
		"$act", "(clamp("+byDev(usage.GREngineActive)+" or "+byDev(usage.SMActive)+" or "+byDev(usage.GPUUtil)+" / 100, 0, 1) >= 0)",
		"$fbfree", finite(byDev(usage.FBFree)),
		"$fb", finite(byDev(usage.FBUsed)),
		"$power", finite(byDev(usage.PowerUsage)),
		"$all", `{__name__=~"`+metrics+`"}`,
		"$step", s,
		"$dev", deviceLabels,
		"$own", ownerLabels,
		"$range", fmt.Sprintf("[%dms:%s]", bucket.Milliseconds(), s),
	)
}

// expand writes out a figure's query from the blocks.
func expand(q string, step, bucket time.Duration) string {
	r := bucketBlocks(step, bucket)
	for range 6 { // blocks refer to blocks, at most a few deep
		q = r.Replace(q)
	}
	return q
}

func known(v float64) usage.Amount { return usage.Known(v) }

func atTime(v float64) time.Time { return time.UnixMilli(int64(math.Round(v * 1000))).UTC() }

// bucketFigures are every figure LoadBuckets reads: owner figures, then the
// device's own.
var bucketFigures = []bucketFigure{
	{"held steps", "count_over_time($owned$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldSteps = v }},
	{"held share", "sum_over_time($share$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldShareSteps = v }},
	{"activity-known share", "sum_over_time(($share and on ($dev) $act)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActivityKnownShareSteps = v }},
	{"active share", "sum_over_time(($share * on ($dev) group_left() $act)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActiveShareSteps = v }},
	{"activity samples", "count_over_time($oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.Samples = v }},
	{"activity sum", "sum_over_time($oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.Sum = v }},
	{"activity below idle", fmt.Sprintf("count_over_time(($oact < %g)$range)", usage.ActivityIdleFloor), true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.BelowIdle = v }},
	{"activity bursts", fmt.Sprintf("count_over_time(($oact >= %g)$range)", usage.BurstLevelActivity), true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.AtOrAboveBurst = v }},
	{"activity p95", "quantile_over_time(0.95, $oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.P95 = v }},
	{"activity p50", "quantile_over_time(0.5, $oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActivityP50 = known(v) }},
	{"activity max", "max_over_time($oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActivityMax = known(v) }},
	{"owner VRAM p50", "quantile_over_time(0.5, $ofb$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P50 = known(v) }},
	{"owner VRAM p95", "quantile_over_time(0.95, $ofb$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P95 = known(v) }},
	{"owner VRAM max", "max_over_time($ofb$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.Max = known(v) }},
	{"owner DRAM sum", "sum_over_time($odram$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.DRAMSum = v }},
	{"owner DRAM steps", "count_over_time($odram$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.DRAMSteps = v }},
	{"owner power sum", "sum_over_time($opower$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSum = v }},
	{"owner power steps", "count_over_time($opower$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSteps = v }},
	{"owner energy", "sum_over_time(($share * on ($dev) group_left() $energy)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.EnergyJoules = known(v) }},
	{"first held", "min_over_time(timestamp($owned)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.FirstHeld = atTime(v) }},
	{"first use", fmt.Sprintf("min_over_time(timestamp(($oact > %g) or ($ofb > %d))$range)", usage.ActivityIdleFloor, usage.FBIdleFloorMiB), true, func(b *usage.Bucket, v float64, _ model.Metric) { b.FirstUse = atTime(v) }},

	{"sampled steps", "count_over_time(group by ($dev) ($all)$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.SampledSteps = v }},
	{"device held steps", "count_over_time(group by ($dev) ($owned)$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldSteps = v }},
	{"VRAM p50", "quantile_over_time(0.5, $fb$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P50 = known(v) }},
	{"VRAM p95", "quantile_over_time(0.95, $fb$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P95 = known(v) }},
	{"VRAM max", "max_over_time($fb$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.Max = known(v) }},
	{"VRAM free p50", "quantile_over_time(0.5, $fbfree$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMFreeMiB.P50 = known(v) }},
	{"VRAM free p95", "quantile_over_time(0.95, $fbfree$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMFreeMiB.P95 = known(v) }},
	{"VRAM free max", "max_over_time($fbfree$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMFreeMiB.Max = known(v) }},
	{"power sum", "sum_over_time($power$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSum = v }},
	{"power steps", "count_over_time($power$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSteps = v }},
	{"energy", "sum_over_time($energy$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.EnergyJoules = known(v) }},
	{"counter resets", "count_over_time(($counter < 0)$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.CounterResets = v }},
	{"samples", "sum_over_time(count by ($dev) ($all)$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.Samples += v }},
	{"non-finite samples", "sum_over_time(count by ($dev) ($all)$range) - (sum_over_time(count by ($dev) ($all > -Inf < +Inf)$range) or sum_over_time(count by ($dev) ($all)$range) * 0)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.NaNSamples = v }},
	{"sampled after a gap", "count_over_time((group by ($dev) ($all) unless group by ($dev) ($all offset $step))$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.SampledAfterGap = v }},
	{"metrics", `count_over_time(label_replace(count by ($dev, __name__) ($all), "metric", "$1", "__name__", "(.*)")$range)`, false, func(b *usage.Bucket, _ float64, m model.Metric) {
		b.Metrics = append(b.Metrics, string(m["metric"]))
	}},
	{"activity source", activitySourceQuery(), false, func(b *usage.Bucket, _ float64, m model.Metric) {
		// The most preferred source with a known value wins.
		src := string(m["source"])
		if b.ActivitySource == "" || indexOf(usage.ActivitySources, src) < indexOf(usage.ActivitySources, b.ActivitySource) {
			b.ActivitySource = src
		}
	}},
}

func activitySourceQuery() string {
	var parts []string
	for _, m := range usage.ActivitySources {
		parts = append(parts, fmt.Sprintf(`label_replace(count_over_time((max by ($dev) (%s) > -Inf < +Inf)$range), "source", %q, "", "")`, m, m))
	}
	return strings.Join(parts, " or ")
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return len(list)
}

// bucketChunk is the longest span one bucket query covers: a day, within
// Prometheus' default --query.max-samples of 50 million for 1,000 GPUs at
// a 30 s step (each subquery holds a day of steps per series).
const bucketChunk = 24 * time.Hour

// bucketParallel is how many bucket queries are in flight at once.
const bucketParallel = 4

// LoadBuckets reads [w.Start, w.End) (both multiples of bucket) in buckets of
// `bucket` (1h), each figure computed by Prometheus with subqueries at w.Step
// resolution (the same evaluation as query_range at w.Step, so raw and
// pushed-down agree), via query_range at step=bucket, chunked by day so that
// no query exceeds usage.MaxSteps points nor Prometheus' default
// --query.max-samples for 1,000 GPUs. Nothing but the figures crosses the
// wire: a few dozen numbers per device-hour.
func (s *Source) LoadBuckets(ctx context.Context, w usage.Window, bucket time.Duration) ([]usage.Bucket, error) {
	if err := checkBucketWindow(w, bucket); err != nil {
		return nil, err
	}
	type key struct {
		start  int64
		device string
		owner  usage.Owner
	}
	buckets := map[key]*usage.Bucket{}
	var order []key
	type result struct {
		fig *bucketFigure
		m   model.Matrix
	}
	chunk := max(bucket, bucketChunk.Truncate(bucket))
	for from := w.Start; from.Before(w.End); from = from.Add(chunk) {
		to := from.Add(chunk)
		if to.After(w.End) {
			to = w.End
		}
		results := make([]result, len(bucketFigures))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(bucketParallel)
		for i := range bucketFigures {
			fig := &bucketFigures[i]
			g.Go(func() error {
				// The point at t sums the bucket (t-bucket, t]: the steps
				// from the bucket's start to its last step.
				r := v1.Range{Start: from.Add(bucket - time.Millisecond), End: to.Add(-time.Millisecond), Step: bucket}
				m, err := s.queryRange(gctx, expand(fig.query, w.Step, bucket), r)
				if err != nil {
					return fmt.Errorf("bucket figure %q: %w", fig.name, err)
				}
				results[i] = result{fig, m}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		for _, res := range results {
			for _, ss := range res.m {
				d := device(ss.Metric)
				var o usage.Owner
				if res.fig.owner {
					o = owner(ss.Metric)
				}
				for _, p := range ss.Values {
					v := float64(p.Value)
					if math.IsNaN(v) || math.IsInf(v, 0) {
						continue
					}
					start := p.Timestamp.Time().Add(time.Millisecond - bucket).UTC()
					k := key{start.UnixMilli(), d.Key(), o}
					b := buckets[k]
					if b == nil {
						b = &usage.Bucket{Start: start, Length: bucket, Step: w.Step, Device: d, Owner: o}
						buckets[k] = b
						order = append(order, k)
					}
					if b.Device.Model == "" {
						b.Device.Model = d.Model
					}
					res.fig.set(b, v, ss.Metric)
				}
			}
		}
	}
	out := make([]usage.Bucket, 0, len(order))
	for _, k := range order {
		b := buckets[k]
		if (b.Owner.IsZero() && b.SampledSteps == 0) || (!b.Owner.IsZero() && b.HeldSteps == 0) {
			continue // a figure of a step the bucket does not have
		}
		out = append(out, *b)
	}
	return out, nil
}

// checkBucketWindow refuses a window that LoadBuckets cannot divide into
// buckets, before any query.
func checkBucketWindow(w usage.Window, bucket time.Duration) error {
	switch {
	case bucket <= 0 || w.Step <= 0 || bucket%w.Step != 0:
		return fmt.Errorf("bucket %s at step %s: want a positive step that divides the bucket, such as 30s for 1h", bucket, w.Step)
	case !w.End.After(w.Start):
		return fmt.Errorf("window %s..%s is empty; give an end after the start", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339))
	case w.Start.UnixMilli()%bucket.Milliseconds() != 0 || w.End.UnixMilli()%bucket.Milliseconds() != 0:
		return fmt.Errorf("window %s..%s does not start and end on whole buckets of %s; round both to the bucket (the hour)", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), bucket)
	}
	return nil
}
