package promql

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
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
	ownerLabels  = "namespace, pod, container, exported_namespace, exported_pod, exported_container, " + draLabels
	// draLabels are dcgm-exporter's DRA labels: they come with an owner's
	// series only, so they group with the owner, never the device.
	draLabels = "dra_claim_namespace, dra_claim_name, dra_driver_name, dra_pool_name, dra_device_name"
	// podLabels name a pod, not its container: pods that share a device.
	podLabels = "namespace, pod, exported_namespace, exported_pod"
	// agentKey joins `gpupack agent`'s per-pod series to an owner's
	// series: the device by its GPU, UUID and MIG instance (the two
	// exporters may name the node by other labels) and the container.
	agentKey = "gpu, UUID, uuid, GPU_I_ID, namespace, pod, container, exported_namespace, exported_pod, exported_container"
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
//
// A step of a device that two or more pods share is split per process
// ($ppdev) where every owner present has `gpupack agent`'s activity
// ($agsm), as usage.Account splits it: each owner holds its processes'
// activity ($ppon) plus an equal share of the device's unused time, all
// of it scaled down where the activities add up past 1 ($ppshare, its
// active part $ppactive); its activity and VRAM are its own. Other steps
// are split evenly ($evshare).
func bucketBlocks(step, bucket time.Duration) *strings.Replacer {
	metrics := strings.Join(usage.Metrics, "|")
	finite := func(x string) string { return "(" + x + " > -Inf < +Inf)" }
	byDev := func(metric string) string { return "max by ($dev) (" + metric + "{$sel})" }
	byOwner := func(metric string) string { return "max by ($dev, $own) (" + metric + `{pod!=""$osel})` }
	s := fmt.Sprintf("%dms", step.Milliseconds())
	counter := "(" + byDev(usage.TotalEnergy) + " - max by ($dev) (" + usage.TotalEnergy + "{$sel} offset " + s + "))"
	// agent is an agent series' finite value at the step, else at the
	// step before, else at the step after, as usage.Account bridges the
	// steps at which one exporter was scraped and the other not yet.
	agent := func(metric string) string {
		at := func(offset string) string {
			return "(max by ($akey) (" + metric + `{pod!=""}` + offset + ") > -Inf < +Inf)"
		}
		return "(" + at("") + " or " + at(" offset "+s) + " or " + at(" offset -"+s) + ")"
	}
	return strings.NewReplacer(
		"$energy", "(((("+counter+" >= 0) or ("+byDev(usage.TotalEnergy)+" and ("+counter+" < 0))) / 1000) or ($power * "+strconv.FormatFloat(step.Seconds(), 'g', -1, 64)+"))",
		"$counter", counter,
		"$share", "($ppshare or $evshare)",
		"$evshare", "($owned / on ($dev) group_left() count by ($dev) ($owned))",
		"$ppshare", "(($ppon + on ($dev) group_left() (clamp_min(1 - $pptotal, 0) / count by ($dev) ($owned))) / on ($dev) group_left() clamp_min($pptotal, 1))",
		"$ppactive", "($ppon / on ($dev) group_left() clamp_min($pptotal, 1))",
		"$pptotal", "sum by ($dev) ($ppon)",
		"$ppon", "($ppown and on ($dev) $ppdev)",
		"$ppdev", "($sharing and on ($dev) (count by ($dev) ($owned) == count by ($dev) ($ppown)))",
		"$ppown", "($owned * on ($akey) group_left() $agsm)",
		"$agsm", "clamp_min("+agent(usage.PodSMActive)+", 0)",
		"$agfb", agent(usage.PodFBUsed),
		"$akey", agentKey,
		// An owner's own series carry its device's values while it holds
		// it (dcgm-exporter repeats them per pod), so its activity, VRAM,
		// DRAM and power need no join with the device.
		// At a per-process step, an owner's activity and VRAM are its
		// own where the agent has them.
		"$oact", "($ppon or $odact)",
		"$odact", "(clamp("+byOwner(usage.GREngineActive)+" or "+byOwner(usage.SMActive)+" or "+byOwner(usage.GPUUtil)+" / 100, 0, 1) >= 0)",
		"$ofb", "((($owned * on ($akey) group_left() $agfb) and on ($dev) $ppdev) or $odfb)",
		"$odfb", finite(byOwner(usage.FBUsed)),
		"$odram", finite(byOwner(usage.DRAMActive)),
		"$opower", finite(byOwner(usage.PowerUsage)),
		// A series renamed exported_* keeps the scrape target's pod label,
		// so pod!="" selects every owned series, as owner() reads them.
		// $sharing is 1 for a device at the steps at which two or more
		// pods hold it.
		"$sharing", "(count by ($dev) (group by ($dev, "+podLabels+") ($owned)) > 1)",
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
	for range 12 { // blocks refer to blocks, at most a few deep
		q = r.Replace(q)
	}
	return strings.NewReplacer("$osel", osel, "$sel", sel).Replace(q)
}

func known(v float64) usage.Amount { return usage.Known(v) }

// atTime is the time v seconds after the Unix epoch; 0 is none (the zero
// time), as the hourly rules record a first use an hour does not have
// beside its first held (hourDefaults).
func atTime(v float64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(math.Round(v * 1000))).UTC()
}

// bucketFigures are every figure LoadBuckets reads: owner figures, then the
// device's own.
var bucketFigures = []bucketFigure{
	{"held steps", "count_over_time($owned$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldSteps = v }},
	{"held share", "sum_over_time($share$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.HeldShareSteps = v }},
	{"activity-known share", "sum_over_time(($ppshare or ($evshare and on ($dev) $act))$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActivityKnownShareSteps = v }},
	{"active share", "sum_over_time(($ppactive or ($evshare * on ($dev) group_left() $act))$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.ActiveShareSteps = v }},
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
	{"shared steps", "count_over_time(($owned and on ($dev) $sharing)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.SharedSteps = v }},
	{"per-process steps", "count_over_time(($owned and on ($dev) $ppdev)$range)", true, func(b *usage.Bucket, v float64, _ model.Metric) { b.PerProcessSteps = v }},
	{"first use", fmt.Sprintf("min_over_time(timestamp(($oact > %g) or ($ofb > %d))$range)", usage.ActivityIdleFloor, usage.FBIdleFloorMiB), true, func(b *usage.Bucket, v float64, _ model.Metric) { b.FirstUse = atTime(v) }},

	{"device shared steps", "count_over_time($sharing$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.SharedSteps = v }},
	{"device per-process steps", "count_over_time($ppdev$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.PerProcessSteps = v }},
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
	{"non-finite samples", "sum_over_time(count by ($dev) ($all)$range) - (sum_over_time(count by ($dev) ($all > -Inf < +Inf)$range) or sum_over_time(count by ($dev) ($all)$range) * 0)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.NaNSamples = v }},
	{"sampled after a gap", "count_over_time((group by ($dev) ($all) unless group by ($dev) ($all offset $step))$range)", false, func(b *usage.Bucket, v float64, _ model.Metric) { b.SampledAfterGap = v }},
	// Samples per metric need no subquery: each is counted where it is.
	{"samples", samplesQuery(), false, func(b *usage.Bucket, v float64, m model.Metric) {
		b.Samples += v
		b.Metrics = append(b.Metrics, string(m["metric"]))
	}},
	// So are the samples outside their metric's range, each metric's
	// furthest below and above it: few, and none on a healthy fleet.
	{"values below range", rangeQuery("min", "<", func(lo, _ float64) float64 { return lo }), false, outOfRange},
	{"values above range", rangeQuery("max", ">", func(_, hi float64) float64 { return hi }), false, outOfRange},
	{"activity source", activitySourceQuery(), false, func(b *usage.Bucket, _ float64, m model.Metric) {
		// The most preferred source with a known value wins.
		src := string(m["source"])
		if b.ActivitySource == "" || indexOf(usage.ActivitySources, src) < indexOf(usage.ActivitySources, b.ActivitySource) {
			b.ActivitySource = src
		}
	}},
}

func samplesQuery() string {
	var parts []string
	for _, m := range usage.Metrics {
		parts = append(parts, fmt.Sprintf(`label_replace(sum by ($dev) (count_over_time(%s{$sel}$bucket)), "metric", %q, "", "")`, m, m))
	}
	return strings.Join(parts, " or ")
}

// rangeQuery is, per device, each metric's fn ("min" or "max") over the
// bucket where it is op ("<" or ">") the bound of its range (MetricRange)
// that bound gives, labelled with the metric; metrics without such a
// bound are left out.
func rangeQuery(fn, op string, bound func(lo, hi float64) float64) string {
	var parts []string
	for _, m := range usage.Metrics {
		b := bound(usage.MetricRange(m))
		if math.IsInf(b, 0) {
			continue
		}
		parts = append(parts, fmt.Sprintf(`label_replace(%[1]s by ($dev) (%[1]s_over_time(%[2]s{$sel}$bucket)) %[3]s %[4]g, "metric", %[2]q, "", "")`, fn, m, op, b))
	}
	return strings.Join(parts, " or ")
}

// outOfRange files a value outside its metric's range into the device's
// bucket.
func outOfRange(b *usage.Bucket, v float64, m model.Metric) {
	b.OutOfRange = append(b.OutOfRange, usage.MetricValue{Metric: string(m["metric"]), Value: v})
}

// directFigures are the figures that read the stored samples with plain
// range functions, no subquery: exact on every device-hour, plain or not,
// so computed over every device and never as a fallback.
var directFigures = map[string]bool{"samples": true, "values below range": true, "values above range": true}

func activitySourceQuery() string {
	var parts []string
	for _, m := range usage.ActivitySources {
		parts = append(parts, fmt.Sprintf(`label_replace(count_over_time((max by ($dev) (%s{$sel}) > -Inf < +Inf)$range), "source", %q, "", "")`, m, m))
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

// plainFigure is one figure of a plain device-hour (see plainCheckQuery):
// PromQL over the device's one series per metric, grouped by device and
// owner, with plain range selectors; set files it into the device's bucket
// and, where the series is owned, the owner's (own; nil otherwise).
type plainFigure struct {
	name  string
	query string
	set   func(dev, own *usage.Bucket, v float64, labels model.Metric)
}

// plainBlocks are the plain figures' building blocks: $do groups by device
// and owner; $first and $cur/$prev are offsets from the evaluation time (a
// bucket's end less 1 ms) to the bucket's first step, its last step and
// the step before its first, so that an instant selector reads the sample
// that a subquery's step there would read.
func plainBlocks(step, bucket time.Duration) *strings.Replacer {
	return strings.NewReplacer(
		"$do", "$dev, $own",
		"$first", fmt.Sprintf("%dms", (bucket-time.Millisecond).Milliseconds()),
		"$cur", fmt.Sprintf("%dms", (step-time.Millisecond).Milliseconds()),
		"$prev", fmt.Sprintf("%dms", (bucket+step-time.Millisecond).Milliseconds()),
		"$seconds", strconv.FormatFloat(step.Seconds(), 'g', -1, 64),
		"$wide", fmt.Sprintf("[%dms]", (bucket+step).Milliseconds()),
	)
}

func expandPlain(q string, step, bucket time.Duration, sel string) string {
	return expand(plainBlocks(step, bucket).Replace(q), step, bucket, sel)
}

// perMetric joins f(metric) over metrics with op.
func perMetric(metrics []string, op string, f func(m string) string) string {
	var parts []string
	for _, m := range metrics {
		parts = append(parts, f(m))
	}
	return strings.Join(parts, op)
}

// ownedActivity is fn (with @m for a selector of the metric and @scale
// for its scale: 1 for ratios, 100 for GPU_UTIL's percent) over the
// owner's activity source: GR engine, else SM, else GPU utilisation, as
// $oact prefers them at each step; divide scales the result to a ratio. On
// a plain device-hour a source present in the bucket is present at every
// step of it, so the choice per bucket is the choice per step.
func ownedActivity(fn string, divide bool) string {
	var parts []string
	for _, m := range usage.ActivitySources {
		scale := "1"
		if m == usage.GPUUtil {
			scale = "100"
		}
		q := "max by ($do) (" + strings.NewReplacer("@m", m+`{pod!=""$osel}`, "@scale", scale).Replace(fn) + ")"
		if divide && scale != "1" {
			q += " / " + scale
		}
		parts = append(parts, q)
	}
	return "(" + strings.Join(parts, " or ") + ")"
}

func plainOwner(f func(own *usage.Bucket, v float64)) func(dev, own *usage.Bucket, v float64, _ model.Metric) {
	return func(_, own *usage.Bucket, v float64, _ model.Metric) {
		if own != nil {
			f(own, v)
		}
	}
}

// plainFigures are every figure of a plain device-hour. Its counter resets,
// non-finite samples and steps sampled after a gap are 0 (plainCheckQuery
// sends any other device-hour to the subqueries); an owner holds all of the
// device at each of its steps (share 1) and from the bucket's first step.
var plainFigures = []plainFigure{
	{"sampled steps", "max by ($do) (" + perMetric(usage.Metrics, " or ", func(m string) string {
		return fmt.Sprintf(`label_replace(count_over_time(%s{$sel}$bucket), "metric", %q, "", "")`, m, m)
	}) + ")", func(dev, own *usage.Bucket, v float64, _ model.Metric) {
		dev.SampledSteps = v
		if own != nil {
			dev.HeldSteps, own.HeldSteps, own.HeldShareSteps, own.FirstHeld = v, v, v, own.Start
		}
	}},
	{"activity samples", ownedActivity("count_over_time(@m$bucket)", false), plainOwner(func(b *usage.Bucket, v float64) { b.Activity.Samples, b.ActivityKnownShareSteps = v, v })},
	{"activity sum", ownedActivity("sum_over_time(@m$bucket)", true), plainOwner(func(b *usage.Bucket, v float64) { b.Activity.Sum, b.ActiveShareSteps = v, v })},
	// No plain range function counts the samples below a level: these two
	// are subqueries, but over the bare series, without joins.
	{"activity below idle", ownedActivity(fmt.Sprintf("count_over_time((@m < @scale * %g)$range) or count_over_time(@m$bucket) * 0", usage.ActivityIdleFloor), false), plainOwner(func(b *usage.Bucket, v float64) { b.Activity.BelowIdle = v })},
	{"activity bursts", ownedActivity(fmt.Sprintf("count_over_time((@m >= @scale * %g)$range) or count_over_time(@m$bucket) * 0", usage.BurstLevelActivity), false), plainOwner(func(b *usage.Bucket, v float64) { b.Activity.AtOrAboveBurst = v })},
	{"activity p95", ownedActivity("quantile_over_time(0.95, @m$bucket)", true), plainOwner(func(b *usage.Bucket, v float64) { b.Activity.P95 = v })},
	{"activity p50", ownedActivity("quantile_over_time(0.5, @m$bucket)", true), plainOwner(func(b *usage.Bucket, v float64) { b.ActivityP50 = known(v) })},
	{"activity max", ownedActivity("max_over_time(@m$bucket)", true), plainOwner(func(b *usage.Bucket, v float64) { b.ActivityMax = known(v) })},
	{"first use", fmt.Sprintf(`%s > %g or max by ($do) (%s{pod!=""$osel} offset $first) > %d`, ownedActivity("@m offset $first", true), usage.ActivityIdleFloor, usage.FBUsed, usage.FBIdleFloorMiB),
		plainOwner(func(b *usage.Bucket, _ float64) { b.FirstUse = b.Start })},
	{"VRAM p50", "max by ($do) (quantile_over_time(0.5, " + usage.FBUsed + "{$sel}$bucket))", func(dev, own *usage.Bucket, v float64, _ model.Metric) {
		dev.VRAMUsedMiB.P50 = known(v)
		if own != nil {
			own.VRAMUsedMiB.P50 = known(v)
		}
	}},
	{"VRAM p95", "max by ($do) (quantile_over_time(0.95, " + usage.FBUsed + "{$sel}$bucket))", func(dev, own *usage.Bucket, v float64, _ model.Metric) {
		dev.VRAMUsedMiB.P95 = known(v)
		if own != nil {
			own.VRAMUsedMiB.P95 = known(v)
		}
	}},
	{"VRAM max", "max by ($do) (max_over_time(" + usage.FBUsed + "{$sel}$bucket))", func(dev, own *usage.Bucket, v float64, _ model.Metric) {
		dev.VRAMUsedMiB.Max = known(v)
		if own != nil {
			own.VRAMUsedMiB.Max = known(v)
		}
	}},
	{"VRAM free p50", "max by ($do) (quantile_over_time(0.5, " + usage.FBFree + "{$sel}$bucket))", func(dev, _ *usage.Bucket, v float64, _ model.Metric) { dev.VRAMFreeMiB.P50 = known(v) }},
	{"VRAM free p95", "max by ($do) (quantile_over_time(0.95, " + usage.FBFree + "{$sel}$bucket))", func(dev, _ *usage.Bucket, v float64, _ model.Metric) { dev.VRAMFreeMiB.P95 = known(v) }},
	{"VRAM free max", "max by ($do) (max_over_time(" + usage.FBFree + "{$sel}$bucket))", func(dev, _ *usage.Bucket, v float64, _ model.Metric) { dev.VRAMFreeMiB.Max = known(v) }},
	{"DRAM sum", "max by ($do) (sum_over_time(" + usage.DRAMActive + `{pod!=""$osel}$bucket))`, plainOwner(func(b *usage.Bucket, v float64) { b.DRAMSum = v })},
	{"DRAM steps", "max by ($do) (count_over_time(" + usage.DRAMActive + `{pod!=""$osel}$bucket))`, plainOwner(func(b *usage.Bucket, v float64) { b.DRAMSteps = v })},
	{"power sum", "max by ($do) (sum_over_time(" + usage.PowerUsage + "{$sel}$bucket))", func(dev, own *usage.Bucket, v float64, _ model.Metric) {
		dev.PowerSum = v
		if own != nil {
			own.PowerSum = v
		}
	}},
	{"power steps", "max by ($do) (count_over_time(" + usage.PowerUsage + "{$sel}$bucket))", func(dev, own *usage.Bucket, v float64, _ model.Metric) {
		dev.PowerSteps = v
		if own != nil {
			own.PowerSteps = v
		}
	}},
	// With no reset, the counter's increases over the bucket's steps sum
	// to its last step's value less the one before the first.
	{"energy", "(max by ($do) (" + usage.TotalEnergy + "{$sel} offset $cur) - max by ($do) (" + usage.TotalEnergy + "{$sel} offset $prev)) / 1000 or max by ($do) (sum_over_time(" + usage.PowerUsage + "{$sel}$bucket)) * $seconds",
		func(dev, own *usage.Bucket, v float64, _ model.Metric) {
			dev.EnergyJoules = known(v)
			if own != nil {
				own.EnergyJoules = known(v)
			}
		}},
	{"activity source", perMetric(usage.ActivitySources, " or ", func(m string) string {
		return fmt.Sprintf(`label_replace(max by ($do) (count_over_time(%s{$sel}$bucket)), "source", %q, "", "")`, m, m)
	}), func(dev, _ *usage.Bucket, _ float64, m model.Metric) {
		src := string(m["source"])
		if dev.ActivitySource == "" || indexOf(usage.ActivitySources, src) < indexOf(usage.ActivitySources, dev.ActivitySource) {
			dev.ActivitySource = src
		}
	}},
}

// plainCheckQuery finds, per device and bucket, with plain range selectors,
// why the device-hour is not plain (the label "why"; a row with why
// "finite" only where its value is NaN or infinite). A plain device-hour
// has, for each metric, one series over the bucket and the step before it
// (no hand-over, no time-slicing, no owner with several series) with a
// sample at each of those steps (no gap, the scrape interval equal to the
// step), every sample finite, activity within 0..1 (GPU_UTIL 0..100), no
// energy counter reset, and, where its owner used it in the bucket, use at
// the bucket's first step. There the plain figures are what the subqueries
// compute; everywhere else the subqueries run.
func plainCheckQuery(step, bucket time.Duration) string {
	steps := bucket/step + 1
	why := func(q, why string) string { return fmt.Sprintf(`label_replace(%s, "why", %q, "", "")`, q, why) }
	var parts []string
	for _, m := range usage.Metrics {
		parts = append(parts,
			why(fmt.Sprintf("count by ($dev) (count_over_time(%s{$sel}$wide)) > 1", m), "series"),
			why(fmt.Sprintf("count by ($dev) (count_over_time(%s{$sel}$wide) != %d)", m, steps), "coverage"),
			why(fmt.Sprintf("sum by ($dev) (sum_over_time(%s{$sel}$wide))", m), "finite"))
	}
	for _, m := range usage.ActivitySources {
		hi := 1
		if m == usage.GPUUtil {
			hi = 100
		}
		parts = append(parts, why(fmt.Sprintf("count by ($dev) (max_over_time(%[1]s{$sel}$bucket) > %[2]d or min_over_time(%[1]s{$sel}$bucket) < 0)", m, hi), "range"))
	}
	parts = append(parts, why("count by ($dev) (resets("+usage.TotalEnergy+"{$sel}$wide) > 0)", "reset"))
	used := fmt.Sprintf(`max by ($dev) (%s > %g or max by ($do) (max_over_time(%s{pod!=""$osel}$bucket)) > %d)`, ownedActivity("max_over_time(@m$bucket)", true), usage.ActivityIdleFloor, usage.FBUsed, usage.FBIdleFloorMiB)
	first := fmt.Sprintf(`max by ($dev) (%s > %g or max by ($do) (%s{pod!=""$osel} offset $first) > %d)`, ownedActivity("@m offset $first", true), usage.ActivityIdleFloor, usage.FBUsed, usage.FBIdleFloorMiB)
	parts = append(parts, why(used+" unless "+first, "first use"))
	return strings.Join(parts, " or ")
}

// bucketChunk is the longest span one bucket query covers: a day, within
// Prometheus' default --query.max-samples of 50 million for 1,000 GPUs at
// a 30 s step (each subquery holds a day of steps per series).
const bucketChunk = 24 * time.Hour

// bucketParallel is how many bucket queries are in flight at once.
const bucketParallel = 4

// fallbackGroup is how many subquery figures one query of a non-plain hour
// joins (with "or", told apart by a label), so that an hour costs a few
// requests, not one per figure.
const fallbackGroup = 8

// LoadBuckets reads [w.Start, w.End) (both multiples of bucket) in buckets of
// `bucket` (1h), each figure computed by Prometheus at w.Step resolution
// (the same evaluation as query_range at w.Step, so raw and pushed-down
// agree), chunked by day so that no query exceeds usage.MaxSteps points nor
// Prometheus' default --query.max-samples for 1,000 GPUs. Nothing but the
// figures crosses the wire: a few dozen numbers per device-hour.
//
// Most device-hours are plain (see plainCheckQuery): one series per metric
// with a sample at every step. Their figures come from plain range
// selectors (sum_over_time(m[1h]) and the like), which Prometheus computes
// from the stored samples without evaluating anything per step. That is
// exact where the scrape interval equals the step and the samples lie on
// the steps (as backfilled ones do); scraped samples off the steps by a
// fixed offset are read one step later than the subqueries read them (the
// same number of samples, the hour's first traded for the next hour's).
// Any other interval makes every hour fail the check: all subqueries,
// right but as slow as without the plain figures. The other device-hours
// (a pod arriving or leaving within the hour, time-slicing, gaps, NaNs,
// counter resets, a scrape interval other than the step) get subqueries
// ([1h:step]) that join the series at each step, one instant query per
// hour for just those devices, so that their cost grows with the
// device-hours that need them.
func (s *Source) LoadBuckets(ctx context.Context, w usage.Window, bucket time.Duration) ([]usage.Bucket, error) {
	var out []usage.Bucket
	err := s.StreamBuckets(ctx, w, bucket, func(b *usage.Bucket) error {
		out = append(out, *b)
		return nil
	})
	return out, err
}

// hourKey names a device's bucket.
type hourKey struct {
	start  int64
	device string
}

// anyHour keeps every device-hour of an answer: the query's figure is
// right on all of them.
func anyHour(hourKey) bool { return true }

// StreamBuckets reads what LoadBuckets reads and hands each bucket to add
// as soon as its day is read, holding one day of buckets at a time: for a
// month of a fleet, feed a usage.BucketAccount. It stops at add's first
// error.
func (s *Source) StreamBuckets(ctx context.Context, w usage.Window, bucket time.Duration, add func(*usage.Bucket) error) error {
	if err := checkBucketWindow(w, bucket); err != nil {
		return err
	}
	// Where the second level of gpupack's rules holds the window, it is
	// read from it and nothing else runs.
	if read, err := s.streamHourly(ctx, w, bucket, add); read || err != nil {
		return err
	}
	chunk := max(bucket, bucketChunk.Truncate(bucket))
	for from := w.Start; from.Before(w.End); from = from.Add(chunk) {
		to := from.Add(chunk)
		if to.After(w.End) {
			to = w.End
		}
		if err := s.streamChunk(ctx, newChunkRead(w.Step, bucket, from, to), add); err != nil {
			return err
		}
	}
	return nil
}

// chunkRead is one chunk of StreamBuckets' window (a day at most) being
// read: the buckets filed so far, and the range that its queries read.
type chunkRead struct {
	set          *pieceSet
	step, bucket time.Duration
	// r's point at t sums the bucket (t-bucket, t]: the steps from the
	// bucket's start to its last step.
	r v1.Range
	// buckets is how many buckets of a device the chunk spans.
	buckets int
}

// newChunkRead is the chunk [from, to) of a window at step, in buckets of
// bucket.
func newChunkRead(step, bucket time.Duration, from, to time.Time) *chunkRead {
	return &chunkRead{
		set:     newPieceSet(step, bucket),
		step:    step,
		bucket:  bucket,
		r:       v1.Range{Start: from.Add(bucket - time.Millisecond), End: to.Add(-time.Millisecond), Step: bucket},
		buckets: int(to.Sub(from) / bucket),
	}
}

// streamChunk reads the buckets of the chunk c and hands them to add:
// from gpupack's recording rules where they hold the whole chunk (and
// nothing else runs), computed from the series otherwise.
func (s *Source) streamChunk(ctx context.Context, c *chunkRead, add func(*usage.Bucket) error) error {
	recorded, err := s.recordedCovers(ctx, c.r, c.step, c.bucket)
	if err != nil {
		return err
	}
	s.countBuckets(recorded, c.buckets)
	switch {
	case recorded:
		err = s.streamRecorded(ctx, c)
	case s.paths().fastest == pathSubqueries:
		err = s.subqueryChunk(ctx, c)
	default:
		err = s.computeChunk(ctx, c)
	}
	if err != nil {
		return err
	}
	return c.set.emit(add)
}

// computeChunk computes the buckets of the chunk c from the series: the
// plain figures over every device, the samples per metric over every
// device, and the subqueries hour by hour on the device-hours that are
// not plain (see LoadBuckets), bucketParallel queries at a time.
func (s *Source) computeChunk(ctx context.Context, c *chunkRead) error {
	others, err := s.notPlain(ctx, c.r, c.step, c.bucket)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bucketParallel)
	s.goPlainFigures(gctx, g, c, others)
	s.goDirect(gctx, g, c)
	s.goFallbacks(gctx, g, c, others)
	return g.Wait()
}

// subqueryChunk computes every figure of the chunk c as a subquery over
// every device, bucketParallel queries at a time: the reference that
// tests compare the plain figures with.
func (s *Source) subqueryChunk(ctx context.Context, c *chunkRead) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bucketParallel)
	for i := range bucketFigures {
		fig := &bucketFigures[i]
		s.goFigure(gctx, g, c, fig.name, fig.query, expand, anyHour, func(start time.Time, d usage.Device, v float64, labels model.Metric) {
			fig.set(c.ownersBucket(start, d, fig.owner, labels), v, labels)
		})
	}
	return g.Wait()
}

// goPlainFigures runs, in g, the plain figures over every device of the
// chunk c; what they say of a device-hour that is not plain (in others)
// is dropped.
func (s *Source) goPlainFigures(ctx context.Context, g *errgroup.Group, c *chunkRead, others notPlainSet) {
	isPlain := func(k hourKey) bool { return !others.devices[k] }
	for i := range plainFigures {
		fig := &plainFigures[i]
		s.goFigure(ctx, g, c, fig.name, fig.query, expandPlain, isPlain, func(start time.Time, d usage.Device, v float64, labels model.Metric) {
			var own *usage.Bucket
			if o := owner(labels); !o.IsZero() {
				own = c.ownersBucket(start, d, true, labels)
			}
			fig.set(c.bucketOf(start, d, usage.Owner{}), own, v, labels)
		})
	}
}

// goDirect runs, in g, the direct figures (directFigures) over every
// device of the chunk c.
func (s *Source) goDirect(ctx context.Context, g *errgroup.Group, c *chunkRead) {
	for i := range bucketFigures {
		if fig := &bucketFigures[i]; directFigures[fig.name] {
			s.goFigure(ctx, g, c, fig.name, fig.query, expand, anyHour, func(start time.Time, d usage.Device, v float64, labels model.Metric) {
				fig.set(c.bucketOf(start, d, usage.Owner{}), v, labels)
			})
		}
	}
}

// goFallbacks runs, in g, the subqueries of fallbackFigures hour by hour
// of the chunk c on the devices that are not plain in that hour (in
// others), fallbackGroup figures to a query. The devices are selected by
// UUID; the other devices that the selector also matches, such as a MIG
// GPU's other instances, are dropped.
func (s *Source) goFallbacks(ctx context.Context, g *errgroup.Group, c *chunkRead, others notPlainSet) {
	figs := fallbackFigures()
	notPlain := func(k hourKey) bool { return others.devices[k] }
	for _, t := range others.hours() {
		hr := v1.Range{Start: t, End: t, Step: c.bucket}
		sel := others.selector(t)
		for lo := 0; lo < len(figs); lo += fallbackGroup {
			group := figs[lo:min(lo+fallbackGroup, len(figs))]
			g.Go(func() error {
				m, err := s.queryRange(ctx, fallbackQuery(group, c.step, c.bucket, s.Selector.and(sel)), hr)
				if err != nil {
					return fmt.Errorf("bucket figures %s at %s: %w", figureNames(group), t.Add(time.Millisecond-c.bucket).UTC().Format(time.RFC3339), err)
				}
				c.each(m, notPlain, func(start time.Time, d usage.Device, v float64, labels model.Metric) {
					i, err := strconv.Atoi(string(labels["gpupack_figure"]))
					if err != nil || i < 0 || i >= len(bucketFigures) {
						return
					}
					fig := &bucketFigures[i]
					fig.set(c.ownersBucket(start, d, fig.owner, labels), v, labels)
				})
				return nil
			})
		}
	}
}

// goFigure runs, in g, the query of the figure called name over the
// chunk c, written out by write (expand or expandPlain), and hands f the
// points of its answer that keep says are the query's.
func (s *Source) goFigure(ctx context.Context, g *errgroup.Group, c *chunkRead, name, query string, write func(q string, step, bucket time.Duration, sel string) string, keep func(hourKey) bool, f func(start time.Time, d usage.Device, v float64, labels model.Metric)) {
	g.Go(func() error {
		m, err := s.queryRange(ctx, write(query, c.step, c.bucket, s.Selector.String()), c.r)
		if err != nil {
			return fmt.Errorf("bucket figure %q: %w", name, err)
		}
		c.each(m, keep, f)
		return nil
	})
}

// each calls f for every finite point of m, at its bucket's start, for
// the device-hours that keep says are this query's, under the set's lock.
func (c *chunkRead) each(m model.Matrix, keep func(hourKey) bool, f func(start time.Time, d usage.Device, v float64, labels model.Metric)) {
	c.set.mu.Lock()
	defer c.set.mu.Unlock()
	bucket := c.bucket
	for _, ss := range m {
		d := device(ss.Metric)
		for _, p := range ss.Values {
			v := float64(p.Value)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			start := p.Timestamp.Time().Add(time.Millisecond - bucket).UTC()
			if keep(hourKey{start.UnixMilli(), d.Key()}) {
				f(start, d, v, ss.Metric)
			}
		}
	}
}

// bucketOf is the chunk's bucket of d and o that starts at start, made on
// first use; the caller holds c.set.mu (as each's f does).
func (c *chunkRead) bucketOf(start time.Time, d usage.Device, o usage.Owner) *usage.Bucket {
	return c.set.bucket(0, start, d, d.Key(), o)
}

// ownersBucket is the chunk's bucket of the device, or, for a figure of
// owners, of the owner that labels name, with the DRA hold they state;
// the caller holds c.set.mu.
func (c *chunkRead) ownersBucket(start time.Time, d usage.Device, ofOwner bool, labels model.Metric) *usage.Bucket {
	if !ofOwner {
		return c.bucketOf(start, d, usage.Owner{})
	}
	b := c.bucketOf(start, d, owner(labels))
	if b.DRA.IsZero() {
		b.DRA = draHold(labels)
	}
	return b
}

// fallbackQuery joins the subqueries of the figures group (indexes into
// bucketFigures) narrowed by sel, each labelled gpupack_figure with its
// index.
func fallbackQuery(group []int, step, bucket time.Duration, sel string) string {
	var parts []string
	for _, i := range group {
		parts = append(parts, fmt.Sprintf(`label_replace(%s, "gpupack_figure", "%d", "", "")`, expand(bucketFigures[i].query, step, bucket, sel), i))
	}
	return strings.Join(parts, " or ")
}

// fallbackFigures are the figures (indexes into bucketFigures) that an
// hour that is not plain computes as subqueries: all but the direct ones,
// which are exact on every device-hour.
func fallbackFigures() []int {
	var figs []int
	for i, f := range bucketFigures {
		if !directFigures[f.name] {
			figs = append(figs, i)
		}
	}
	return figs
}

// fallbackQueries are the queries of an hour that is not plain for the
// devices sel selects.
func fallbackQueries(step, bucket time.Duration, sel string) []string {
	figs := fallbackFigures()
	var out []string
	for lo := 0; lo < len(figs); lo += fallbackGroup {
		out = append(out, fallbackQuery(figs[lo:min(lo+fallbackGroup, len(figs))], step, bucket, sel))
	}
	return out
}

func figureNames(group []int) string {
	var names []string
	for _, i := range group {
		names = append(names, strconv.Quote(bucketFigures[i].name))
	}
	return strings.Join(names, ", ")
}

// notPlainSet is, for one chunk, the device-hours that are not plain, and
// for each hour the UUIDs that select them.
type notPlainSet struct {
	devices map[hourKey]bool
	uuids   map[int64]map[string]bool // by the hour's evaluation time
	anyone  map[int64]bool            // an hour with a device without a UUID label
}

// hours are the evaluation times (a bucket's end less 1 ms) of the hours
// with a device that is not plain, in order.
func (n notPlainSet) hours() []time.Time {
	var out []time.Time
	for t := range n.uuids {
		out = append(out, time.UnixMilli(t).UTC())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// selector matches the devices that are not plain in the hour ending at t;
// every device where one of them has no UUID label.
func (n notPlainSet) selector(t time.Time) string {
	if n.anyone[t.UnixMilli()] {
		return ""
	}
	var uuids []string
	for u := range n.uuids[t.UnixMilli()] {
		uuids = append(uuids, regexp.QuoteMeta(u))
	}
	sort.Strings(uuids)
	return "UUID=~" + strconv.Quote(strings.Join(uuids, "|"))
}

// notPlain runs plainCheckQuery over the chunk r.
func (s *Source) notPlain(ctx context.Context, r v1.Range, step, bucket time.Duration) (notPlainSet, error) {
	n := notPlainSet{devices: map[hourKey]bool{}, uuids: map[int64]map[string]bool{}, anyone: map[int64]bool{}}
	m, err := s.queryRange(ctx, expandPlain(plainCheckQuery(step, bucket), step, bucket, s.Selector.String()), r)
	if err != nil {
		return n, fmt.Errorf("bucket figures, which device-hours are plain: %w", err)
	}
	for _, ss := range m {
		d := device(ss.Metric)
		for _, p := range ss.Values {
			f := float64(p.Value)
			if ss.Metric["why"] == "finite" && !math.IsNaN(f) && !math.IsInf(f, 0) {
				continue
			}
			if ss.Metric["why"] == "" {
				continue
			}
			t := p.Timestamp.Time()
			n.devices[hourKey{t.Add(time.Millisecond - bucket).UTC().UnixMilli(), d.Key()}] = true
			if n.uuids[t.UnixMilli()] == nil {
				n.uuids[t.UnixMilli()] = map[string]bool{}
			}
			u := string(ss.Metric["UUID"])
			n.uuids[t.UnixMilli()][u] = true
			if u == "" {
				n.anyone[t.UnixMilli()] = true
			}
		}
	}
	return n, nil
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
