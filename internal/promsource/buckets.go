package promsource

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	// On a plain device (see plainDevices), fast is the figure as plain
	// range selectors over the owner's own series, without a subquery;
	// where fast is "" and derive is set, the figure follows from the
	// others there. query then runs only on the other devices.
	fast   string
	derive func(b *usage.Bucket)
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
	byDev := func(metric string) string { return "max by ($dev) (" + metric + "{$sel})" }
	byOwner := func(metric string) string { return "max by ($dev, $own) (" + metric + `{pod!=""$osel})` }
	s := fmt.Sprintf("%dms", step.Milliseconds())
	counter := "(" + byDev(usage.TotalEnergy) + " - max by ($dev) (" + usage.TotalEnergy + "{$sel} offset " + s + "))"
	return strings.NewReplacer(
		"$energy", "(((("+counter+" >= 0) or ("+byDev(usage.TotalEnergy)+" and ("+counter+" < 0))) / 1000) or ($power * "+strconv.FormatFloat(step.Seconds(), 'g', -1, 64)+"))",
		"$counter", counter,
		"$share", "($owned / on ($dev) group_left() count by ($dev) ($owned))",
		// An owner's own series carry its device's values while it holds
		// it (dcgm-exporter repeats them per pod), so its activity, VRAM,
		// DRAM and power need no join with the device.
		"$oact", "(clamp("+byOwner(usage.GREngineActive)+" or "+byOwner(usage.SMActive)+" or "+byOwner(usage.GPUUtil)+" / 100, 0, 1) >= 0)",
		"$ofb", finite(byOwner(usage.FBUsed)),
		"$odram", finite(byOwner(usage.DRAMActive)),
		"$opower", finite(byOwner(usage.PowerUsage)),
		// A series renamed exported_* keeps the scrape target's pod label,
		// so pod!="" selects every owned series, as owner() reads them.
		"$owned", `group by ($dev, $own) ({__name__=~"`+metrics+`", pod!=""$osel})`,
		"$act", "(clamp("+byDev(usage.GREngineActive)+" or "+byDev(usage.SMActive)+" or "+byDev(usage.GPUUtil)+" / 100, 0, 1) >= 0)",
		"$fbfree", finite(byDev(usage.FBFree)),
		"$fb", finite(byDev(usage.FBUsed)),
		"$power", finite(byDev(usage.PowerUsage)),
		"$all", `{__name__=~"`+metrics+`"$osel}`,
		"$step", s,
		"$dev", deviceLabels,
		"$own", ownerLabels,
		"$range", fmt.Sprintf("[%dms:%s]", bucket.Milliseconds(), s),
		"$bucket", fmt.Sprintf("[%dms]", bucket.Milliseconds()),
	)
}

// expand writes out a figure's query from the blocks, every selector
// narrowed by the matcher sel ("" for none).
func expand(q string, step, bucket time.Duration, sel string) string {
	osel := ""
	if sel != "" {
		osel = ", " + sel
	}
	r := bucketBlocks(step, bucket)
	for range 6 { // blocks refer to blocks, at most a few deep
		q = r.Replace(q)
	}
	return strings.NewReplacer("$osel", osel, "$sel", sel).Replace(q)
}

func known(v float64) usage.Amount { return usage.Known(v) }

func atTime(v float64) time.Time { return time.UnixMilli(int64(math.Round(v * 1000))).UTC() }

// bucketFigures are every figure LoadBuckets reads: owner figures, then the
// device's own.
var bucketFigures = []bucketFigure{
	{"held steps", "count_over_time($owned$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldSteps = v }, ownerMaxOverMetrics("sum by ($dev, $own) (count_over_time(%s{pod!=\"\"$osel}$bucket))"), nil},
	{"held share", "sum_over_time($share$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldShareSteps = v }, "", func(b *usage.Bucket) { b.HeldShareSteps = b.HeldSteps }},
	{"activity-known share", "sum_over_time(($share and on ($dev) $act)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActivityKnownShareSteps = v }, "", func(b *usage.Bucket) { b.ActivityKnownShareSteps = b.Activity.Samples }},
	{"active share", "sum_over_time(($share * on ($dev) group_left() $act)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActiveShareSteps = v }, "", func(b *usage.Bucket) { b.ActiveShareSteps = b.Activity.Sum }},
	{"activity samples", "count_over_time($oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.Samples = v }, "", nil},
	{"activity sum", "sum_over_time($oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.Sum = v }, "", nil},
	{"activity below idle", fmt.Sprintf("count_over_time(($oact < %g)$range)", usage.ActivityIdleFloor), true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.BelowIdle = v }, "", nil},
	{"activity bursts", fmt.Sprintf("count_over_time(($oact >= %g)$range)", usage.BurstLevelActivity), true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.AtOrAboveBurst = v }, "", nil},
	{"activity p95", "quantile_over_time(0.95, $oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.Activity.P95 = v }, "", nil},
	{"activity p50", "quantile_over_time(0.5, $oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActivityP50 = known(v) }, "", nil},
	{"activity max", "max_over_time($oact$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActivityMax = known(v) }, "", nil},
	{"owner VRAM p50", "quantile_over_time(0.5, $ofb$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P50 = known(v) }, ownerPlain("max", "quantile_over_time(0.5, %s)", usage.FBUsed), nil},
	{"owner VRAM p95", "quantile_over_time(0.95, $ofb$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P95 = known(v) }, ownerPlain("max", "quantile_over_time(0.95, %s)", usage.FBUsed), nil},
	{"owner VRAM max", "max_over_time($ofb$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.Max = known(v) }, ownerPlain("max", "max_over_time(%s)", usage.FBUsed), nil},
	{"owner DRAM sum", "sum_over_time($odram$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.DRAMSum = v }, ownerPlain("sum", "sum_over_time(%s)", usage.DRAMActive), nil},
	{"owner DRAM steps", "count_over_time($odram$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.DRAMSteps = v }, ownerPlain("sum", "count_over_time(%s)", usage.DRAMActive), nil},
	{"owner power sum", "sum_over_time($opower$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSum = v }, ownerPlain("sum", "sum_over_time(%s)", usage.PowerUsage), nil},
	{"owner power steps", "count_over_time($opower$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSteps = v }, ownerPlain("sum", "count_over_time(%s)", usage.PowerUsage), nil},
	{"owner energy", "sum_over_time(($share * on ($dev) group_left() $energy)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.EnergyJoules = known(v) }, "", nil},
	{"first held", "min_over_time(timestamp($owned)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.FirstHeld = atTime(v) }, "", nil},
	{"first use", fmt.Sprintf("min_over_time(timestamp(($oact > %g) or ($ofb > %d))$range)", usage.ActivityIdleFloor, usage.FBIdleFloorMiB), true, func(b *usage.Bucket, v float64, _ model.Metric) { b.FirstUse = atTime(v) }, "", nil},

	{"sampled steps", "count_over_time(group by ($dev) ($all)$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.SampledSteps = v }, "", nil},
	{"device held steps", "count_over_time(group by ($dev) ($owned)$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldSteps = v }, "", nil},
	{"VRAM p50", "quantile_over_time(0.5, $fb$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P50 = known(v) }, "", nil},
	{"VRAM p95", "quantile_over_time(0.95, $fb$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.P95 = known(v) }, "", nil},
	{"VRAM max", "max_over_time($fb$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMUsedMiB.Max = known(v) }, "", nil},
	{"VRAM free p50", "quantile_over_time(0.5, $fbfree$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMFreeMiB.P50 = known(v) }, "", nil},
	{"VRAM free p95", "quantile_over_time(0.95, $fbfree$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMFreeMiB.P95 = known(v) }, "", nil},
	{"VRAM free max", "max_over_time($fbfree$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.VRAMFreeMiB.Max = known(v) }, "", nil},
	{"power sum", "sum_over_time($power$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSum = v }, "", nil},
	{"power steps", "count_over_time($power$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.PowerSteps = v }, "", nil},
	{"energy", "sum_over_time($energy$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.EnergyJoules = known(v) }, "", nil},
	{"counter resets", "count_over_time(($counter < 0)$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.CounterResets = v }, "", nil},
	{"non-finite samples", "sum_over_time(count by ($dev) ($all)$range) - (sum_over_time(count by ($dev) ($all > -Inf < +Inf)$range) or sum_over_time(count by ($dev) ($all)$range) * 0)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.NaNSamples = v }, "", func(*usage.Bucket) {}},
	{"sampled after a gap", "count_over_time((group by ($dev) ($all) unless group by ($dev) ($all offset $step))$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.SampledAfterGap = v }, "", nil},
	// Samples per metric need no subquery: each is counted where it is.
	{"samples", samplesQuery(), false, func(b *usage.Bucket, v float64, m model.Metric) {
		b.Samples += v
		b.Metrics = append(b.Metrics, string(m["metric"]))
	}, "", nil},
	{"activity source", activitySourceQuery(), false, func(b *usage.Bucket, _ float64, m model.Metric) {
		// The most preferred source with a known value wins.
		src := string(m["source"])
		if b.ActivitySource == "" || indexOf(usage.ActivitySources, src) < indexOf(usage.ActivitySources, b.ActivitySource) {
			b.ActivitySource = src
		}
	}, "", nil},
}

// ownerMaxOverMetrics is, per device and owner, the largest of q over every
// metric (q a format with %s for the metric): the steps an owner held a
// device are those at which any of its series has a sample, all of them
// when dcgm-exporter writes every field at each scrape.
func ownerMaxOverMetrics(q string) string {
	var parts []string
	for _, m := range usage.Metrics {
		parts = append(parts, fmt.Sprintf(`label_replace(%s, "metric", %q, "", "")`, fmt.Sprintf(q, m), m))
	}
	return "max by ($dev, $own) (" + strings.Join(parts, " or ") + ")"
}

// ownerPlain is fn (a format with %s for a range selector) over the owner's
// own series of metric over the bucket, the series of one owner combined by
// agg (sum or max).
func ownerPlain(agg, fn, metric string) string {
	return agg + " by ($dev, $own) (" + fmt.Sprintf(fn, metric+`{pod!=""$osel}$bucket`) + ")"
}

func samplesQuery() string {
	var parts []string
	for _, m := range usage.Metrics {
		parts = append(parts, fmt.Sprintf(`label_replace(sum by ($dev) (count_over_time(%s$bucket)), "metric", %q, "", "")`, m, m))
	}
	return strings.Join(parts, " or ")
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
	var out []usage.Bucket
	err := s.StreamBuckets(ctx, w, bucket, func(b *usage.Bucket) error {
		out = append(out, *b)
		return nil
	})
	return out, err
}

// StreamBuckets reads what LoadBuckets reads and hands each bucket to add
// as soon as its day is read, holding one day of buckets at a time: for a
// month of a fleet, feed a usage.BucketAccount. It stops at add's first
// error.
func (s *Source) StreamBuckets(ctx context.Context, w usage.Window, bucket time.Duration, add func(*usage.Bucket) error) error {
	if err := checkBucketWindow(w, bucket); err != nil {
		return err
	}
	type key struct {
		start  int64
		device string
		owner  usage.Owner
	}
	chunk := max(bucket, bucketChunk.Truncate(bucket))
	for from := w.Start; from.Before(w.End); from = from.Add(chunk) {
		to := from.Add(chunk)
		if to.After(w.End) {
			to = w.End
		}
		buckets := map[key]*usage.Bucket{}
		var order []key
		var mu sync.Mutex
		// apply files one figure's results into the day's buckets, so that
		// the decoded response is dropped at once.
		apply := func(fig *bucketFigure, m model.Matrix) {
			mu.Lock()
			defer mu.Unlock()
			for _, ss := range m {
				d := device(ss.Metric)
				var o usage.Owner
				if fig.owner {
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
					fig.set(b, v, ss.Metric)
				}
			}
		}
		// The point at t sums the bucket (t-bucket, t]: the steps from the
		// bucket's start to its last step.
		r := v1.Range{Start: from.Add(bucket - time.Millisecond), End: to.Add(-time.Millisecond), Step: bucket}
		plain, err := s.plainDevices(ctx, r, w.Step, bucket)
		if err != nil {
			return err
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(bucketParallel)
		run := func(fig *bucketFigure, query, sel string) {
			g.Go(func() error {
				m, err := s.queryRange(gctx, expand(query, w.Step, bucket, sel), r)
				if err != nil {
					return fmt.Errorf("bucket figure %q: %w", fig.name, err)
				}
				apply(fig, m)
				return nil
			})
		}
		for i := range bucketFigures {
			fig := &bucketFigures[i]
			switch {
			case !plain.ok || fig.fast == "" && fig.derive == nil:
				run(fig, fig.query, "")
			default:
				if fig.fast != "" {
					run(fig, fig.fast, plain.selector(false))
				}
				if len(plain.others) > 0 {
					run(fig, fig.query, plain.selector(true))
				}
			}
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for _, k := range order {
			b := buckets[k]
			if (b.Owner.IsZero() && b.SampledSteps == 0) || (!b.Owner.IsZero() && b.HeldSteps == 0) {
				continue // a figure of a step the bucket does not have
			}
			if plain.ok && !b.Owner.IsZero() && !plain.others[b.Device.UUID] {
				for i := range bucketFigures {
					if d := bucketFigures[i].derive; d != nil {
						d(b)
					}
				}
			}
			if err := add(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// plainSet says, for one chunk, which devices the plain (subquery-free)
// figures hold for: every device whose UUID is not in others. ok is false
// where some series has no UUID label to select by; every figure then runs
// its subquery on every device.
type plainSet struct {
	ok     bool
	others map[string]bool
}

// selector matches the devices that are not plain (other) or the plain
// ones (!other).
func (p plainSet) selector(other bool) string {
	if len(p.others) == 0 {
		if other {
			return `UUID="-"`
		}
		return ""
	}
	var uuids []string
	for u := range p.others {
		uuids = append(uuids, regexp.QuoteMeta(u))
	}
	sort.Strings(uuids)
	op := "!~"
	if other {
		op = "=~"
	}
	return "UUID" + op + strconv.Quote(strings.Join(uuids, "|"))
}

// plainDevices finds, with plain range selectors over the chunk r, the
// devices on which the fast figures agree with the subqueries: those that no
// two owners held in the same bucket (no time-slicing, no hand-over within
// the hour), whose owners have one series per metric in a bucket, and whose
// samples are all finite. There, with the scrape interval equal to the step
// (one sample per series per step), an owner's series are the device's at
// its steps, so that the owner's share is 1 at each held step and its
// figures are plain sums, counts, quantiles and maxima over its own series.
// The other devices, and every device of a chunk with series that carry no
// UUID label, get the subqueries.
func (s *Source) plainDevices(ctx context.Context, r v1.Range, step, bucket time.Duration) (plainSet, error) {
	var owned, finite, unnamed []string
	for _, m := range usage.Metrics {
		owned = append(owned, fmt.Sprintf(`count_over_time(%s{pod!=""}$bucket)`, m))
		unnamed = append(unnamed, fmt.Sprintf(`count_over_time(%s{UUID=""}$bucket)`, m))
		finite = append(finite, fmt.Sprintf(`label_replace(sum by ($dev) (sum_over_time(%s$bucket)), "metric", %q, "", "")`, m, m))
	}
	series := "(" + strings.Join(owned, " or ") + ")"
	query := `label_replace(count by ($dev) (count by ($dev, $own) ` + series + `) > 1, "why", "owners", "", "")` +
		` or label_replace(max by ($dev) (count by ($dev, $own) ` + series + `) > 1, "why", "series", "", "")` +
		` or label_replace(count by ($dev) (` + strings.Join(unnamed, " or ") + `), "why", "no UUID", "", "")`
	p := plainSet{ok: true, others: map[string]bool{}}
	for _, q := range []string{query, strings.Join(finite, " or ")} {
		m, err := s.queryRange(ctx, expand(q, step, bucket, ""), r)
		if err != nil {
			return plainSet{}, fmt.Errorf("bucket figures, which devices are plain: %w", err)
		}
		for _, ss := range m {
			for _, v := range ss.Values {
				f := float64(v.Value)
				switch {
				case ss.Metric["why"] == "no UUID":
					p.ok = false
				case ss.Metric["why"] != "" || math.IsNaN(f) || math.IsInf(f, 0):
					p.others[string(ss.Metric["UUID"])] = true
				}
			}
		}
	}
	return p, nil
}

// checkBucketWindow refuses a window that LoadBuckets cannot divide into
// buckets, before any query.
func checkBucketWindow(w usage.Window, bucket time.Duration) error {
	switch {
	case bucket <= 0 || w.Step <= 0 || bucket%w.Step != 0:
		return fmt.Errorf("bucket %s at step %s: want a positive step that divides the bucket, such as 30s for 1h", bucket, w.Step)
	case !w.End.After(w.Start):
		return fmt.Errorf("window %s..%s is empty; give an end after the start", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339))
	case w.Start.UnixMilli()%w.Step.Milliseconds() != 0 || w.End.Sub(w.Start)%bucket != 0:
		return fmt.Errorf("window %s..%s is not whole buckets of %s from a whole step of %s; start on a step and give a whole number of buckets (serve reads the current hour as one bucket from the hour to the last step)", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), bucket, w.Step)
	}
	return nil
}
