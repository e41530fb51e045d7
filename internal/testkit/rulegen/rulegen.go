// Package rulegen writes, as OpenMetrics for promtool tsdb
// create-blocks-from openmetrics, what a Prometheus holding gpupack's two
// levels of recording rules holds for a synthetic fleet: the rules' output
// series, computed here from the fleet's activity instead of recorded by
// promtool over its raw series (a month of 1,000 GPUs takes hours to
// record, minutes to write), with kube-state-metrics' pod series beside
// them. WriteRaw writes the raw series the rules would read, so that a
// test can record the real rules over a few GPUs and compare.
//
// The fleet is that of the synthetic month of docs/benchmarks.md: each GPU
// is held by six pods of four hours in turn every day, scraped every 30 s,
// one pod at a time (nothing shared), dcgm-exporter's GR engine activity
// cycling through seven values from 0 to 1 over the steps, 20,000 MiB of VRAM used and
// 60,000 free, DRAM activity 0.25, 300 W, and an XID gauge of 0.
package rulegen

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Version is the version of what the generator writes: a cache of its
// output is keyed by it, and it changes whenever the output does.
const Version = 4

// Step is the scrape interval of the fleet's raw series, and the
// gpupack_step label of the rules' output.
const Step = 30 * time.Second

const (
	window     = 5 * time.Minute // the first level's span and interval
	hourLag    = 5 * time.Minute // how far behind its evaluation an hourly window ends
	day        = 24 * time.Hour
	podsPerDay = 6
	podSpan    = day / podsPerDay
	// ksmEvery is how often kube-state-metrics' pod series have a sample:
	// every 5 minutes, not at the 30 s scrape, to keep a month's backfill
	// within an hour; the report reads them over whole hours.
	ksmEvery = 5 * time.Minute
	// checkLead is how far before each hour's middle the raw check metric
	// has samples outside the first and last day: the span the report's
	// check reads at a 5-minute lookback.
	checkLead = 5 * time.Minute

	vramMiB   = 20000
	freeMiB   = 60000
	dramRatio = 0.25
	watts     = 300
	idleFloor = 0.05 // usage.ActivityIdleFloor
	burstAt   = 0.3  // usage.BurstLevelActivity
)

// activityCycle is the GR engine activity at successive steps: binary
// fractions, so that sums are exact in any order, over seven steps, so
// that each pod of a GPU (480 steps) starts at another point of it, and a
// window that holds a few steps of a pod holds none idle for some pods and
// some for others.
var activityCycle = [7]float64{0, 0.5, 0.875, 0.25, 0.75, 0.0625, 1}

// Metric names of the raw series (dcgm-exporter's).
const (
	grEngine = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
	fbUsed   = "DCGM_FI_DEV_FB_USED"
	fbFree   = "DCGM_FI_DEV_FB_FREE"
	dram     = "DCGM_FI_PROF_DRAM_ACTIVE"
	power    = "DCGM_FI_DEV_POWER_USAGE"
	xid      = "DCGM_FI_DEV_XID_ERRORS"
)

// rawMetrics are the fleet's DCGM series in gpupack's order, with the
// value each has at a step.
var rawMetrics = []struct {
	name  string
	value func(s int64) float64
}{
	{grEngine, activityAt},
	{fbUsed, func(int64) float64 { return vramMiB }},
	{fbFree, func(int64) float64 { return freeMiB }},
	{dram, func(int64) float64 { return dramRatio }},
	{power, func(int64) float64 { return watts }},
}

func activityAt(s int64) float64 {
	return activityCycle[(s/Step.Milliseconds())%int64(len(activityCycle))]
}

// Fleet is a synthetic fleet of GPUs over Days days from Start (a UTC
// midnight), and the evaluation offsets of the rules' two groups within
// their intervals (Prometheus derives them from the group's name and file;
// a test sets them to those promtool used).
type Fleet struct {
	GPUs, Days         int
	Start              time.Time
	Offset5m, Offset1h time.Duration
}

// Shard is the GPUs [From, To) of a fleet: one Prometheus' share of it.
type Shard struct{ From, To int }

// All is the whole fleet as one shard.
func (f Fleet) All() Shard { return Shard{0, f.GPUs} }

// End is the end of the fleet's raw samples.
func (f Fleet) End() time.Time { return f.Start.Add(time.Duration(f.Days) * day) }

// Check says what is wrong with f, if anything.
func (f Fleet) Check() error {
	if f.GPUs < 1 || f.Days < 1 {
		return fmt.Errorf("rulegen: %d GPUs x %d days: want at least one of each", f.GPUs, f.Days)
	}
	if !f.Start.Equal(f.Start.Truncate(day)) {
		return fmt.Errorf("rulegen: start %s: want a UTC midnight", f.Start)
	}
	if f.Offset5m < 0 || f.Offset5m >= window || f.Offset1h < 0 || f.Offset1h >= time.Hour || f.Offset5m%time.Millisecond != 0 || f.Offset1h%time.Millisecond != 0 {
		return fmt.Errorf("rulegen: offsets %s and %s: want whole milliseconds within 5m and 1h", f.Offset5m, f.Offset1h)
	}
	return nil
}

// slot is a pod's place in the fleet's schedule: its day and its turn.
type slot struct{ day, k int }

func (f Fleet) slotAt(s int64) slot {
	i := (s - f.Start.UnixMilli()) / Step.Milliseconds()
	perDay := int64(day / Step)
	return slot{int(i / perDay), int(i % perDay / int64(podSpan/Step))}
}

func (f Fleet) podStart(p slot) time.Time {
	return f.Start.Add(time.Duration(p.day)*day + time.Duration(p.k)*podSpan)
}

// PodName is the name of the pod of GPU g in slot p, as syntheticFleet
// names it.
func (f Fleet) podName(g int, p slot) string {
	return fmt.Sprintf("train-%07d-x7k2p", (p.day*f.GPUs+g)*podsPerDay+p.k)
}

func namespace(g int) string { return fmt.Sprintf("team-%02d", g%20) }

// steps are the raw steps that a rule evaluated at t reads: the multiples
// of Step in [t - 5m + 1 ms, t] that have samples.
func (f Fleet) steps(t int64) []int64 {
	st := Step.Milliseconds()
	lo := t - window.Milliseconds() + 1
	lo = (lo + st - 1) / st * st
	lo = max(lo, f.Start.UnixMilli())
	var out []int64
	for s := lo; s <= t && s < f.End().UnixMilli(); s += st {
		out = append(out, s)
	}
	return out
}

// The figures' indexes: an owner's, then a device's.
const (
	heldSteps = iota
	heldShare
	activityKnownShare
	activeShare
	activitySamples
	activitySum
	activityBelowIdle
	activityBursts
	activityP95
	activityP50
	activityMax
	ownerVRAMP50
	ownerVRAMP95
	ownerVRAMMax
	ownerDRAMSum
	ownerDRAMSteps
	ownerPowerSum
	ownerPowerSteps
	ownerEnergy
	firstHeld
	firstUse
	nOwner
)

const (
	sampledSteps = iota
	deviceHeldSteps
	vramP50
	vramP95
	vramMax
	vramFreeP50
	vramFreeP95
	vramFreeMax
	powerSum
	powerSteps
	energy
	nonFinite
	samples
	activitySource
	sampledAfterGap
	nDevice
)

// combine is how the hourly rule makes an hour of a figure's windows.
type combine int

const (
	sumOf combine = iota
	maxOf
	minOf
	median
	p95
)

type figure struct {
	name    string
	combine combine
}

var ownerFigures = [nOwner]figure{
	{"held_steps", sumOf}, {"held_share", sumOf}, {"activity_known_share", sumOf}, {"active_share", sumOf},
	{"activity_samples", sumOf}, {"activity_sum", sumOf}, {"activity_below_idle", sumOf}, {"activity_bursts", sumOf},
	{"activity_p95", p95}, {"activity_p50", median}, {"activity_max", maxOf},
	{"owner_vram_p50", median}, {"owner_vram_p95", p95}, {"owner_vram_max", maxOf},
	{"owner_dram_sum", sumOf}, {"owner_dram_steps", sumOf}, {"owner_power_sum", sumOf}, {"owner_power_steps", sumOf},
	{"owner_energy", sumOf}, {"first_held", minOf}, {"first_use", minOf},
}

var deviceFigures = [nDevice]figure{
	{"sampled_steps", sumOf}, {"device_held_steps", sumOf},
	{"vram_p50", median}, {"vram_p95", p95}, {"vram_max", maxOf},
	{"vram_free_p50", median}, {"vram_free_p95", p95}, {"vram_free_max", maxOf},
	{"power_sum", sumOf}, {"power_steps", sumOf}, {"energy", sumOf}, {"non_finite_samples", sumOf},
	{"samples", sumOf}, {"activity_source", sumOf}, {"sampled_after_a_gap", sumOf},
}

// quantile is PromQL's quantile_over_time of values (sorted here).
func quantile(q float64, values []float64) float64 {
	v := slices.Clone(values)
	sort.Float64s(v)
	n := float64(len(v))
	rank := q * (n - 1)
	lower := math.Max(0, math.Floor(rank))
	upper := math.Min(n-1, lower+1)
	weight := rank - math.Floor(rank)
	return v[int(lower)]*(1-weight) + v[int(upper)]*weight
}

// ownerValues are an owner's figures over its steps in one window; a
// count of the steps that pass a filter is NaN (no series) where none do,
// as PromQL's count_over_time of nothing is nothing.
func ownerValues(steps []int64) (out [nOwner]float64) {
	acts := make([]float64, len(steps))
	n := float64(len(steps))
	for i, s := range steps {
		a := activityAt(s)
		acts[i] = a
		out[activeShare] += a
		if a < idleFloor {
			out[activityBelowIdle]++
		}
		if a >= burstAt {
			out[activityBursts]++
		}
		out[ownerDRAMSum] += dramRatio
		out[ownerPowerSum] += watts
		out[ownerEnergy] += watts * Step.Seconds()
	}
	out[activitySum] = out[activeShare]
	for _, i := range []int{activityBelowIdle, activityBursts} {
		if out[i] == 0 {
			out[i] = math.NaN()
		}
	}
	for _, i := range []int{heldSteps, heldShare, activityKnownShare, activitySamples, ownerDRAMSteps, ownerPowerSteps} {
		out[i] = n
	}
	out[activityP95], out[activityP50], out[activityMax] = quantile(0.95, acts), quantile(0.5, acts), slices.Max(acts)
	out[ownerVRAMP50], out[ownerVRAMP95], out[ownerVRAMMax] = vramMiB, vramMiB, vramMiB
	// Its first use is its first step: its VRAM is over the idle floor.
	out[firstHeld] = float64(steps[0]) / 1000
	out[firstUse] = out[firstHeld]
	return out
}

// deviceValues are a device's figures over its steps in one window; the
// figure sampledAfterGap is NaN (no series) but at the fleet's first step.
func (f Fleet) deviceValues(steps []int64) (out [nDevice]float64) {
	n := float64(len(steps))
	for _, i := range []int{sampledSteps, deviceHeldSteps, powerSteps, samples, activitySource} {
		out[i] = n
	}
	out[vramP50], out[vramP95], out[vramMax] = vramMiB, vramMiB, vramMiB
	out[vramFreeP50], out[vramFreeP95], out[vramFreeMax] = freeMiB, freeMiB, freeMiB
	for range steps {
		out[powerSum] += watts
		out[energy] += watts * Step.Seconds()
	}
	out[sampledAfterGap] = math.NaN()
	if steps[0] == f.Start.UnixMilli() {
		out[sampledAfterGap] = 1
	}
	return out
}

// combineValues makes an hour of a figure's window values.
func combineValues(c combine, values []float64) float64 {
	switch c {
	case maxOf:
		return slices.Max(values)
	case minOf:
		return slices.Min(values)
	case median:
		return quantile(0.5, values)
	case p95:
		return quantile(0.95, values)
	}
	s := 0.0
	for _, v := range values {
		s += v
	}
	return s
}

// point is a figure's value at an evaluation time (Unix ms).
type point struct {
	t int64
	v float64
}

// dayPlan is what one day's evaluations record, the same for every GPU:
// the owners' and the device's figures at each evaluation of each level.
type dayPlan struct {
	slots            []slot // in order of first appearance
	owner5m, owner1h map[slot][nOwner][]point
	device5m         [nDevice][]point
	device1h         [nDevice][]point
	devices1h        []int64 // the hourly evaluations with a device: gpupack:devices:1h
}

// evals are the evaluation times of a group of interval and offset in
// [from, to).
func evals(from, to time.Time, interval, offset time.Duration) []int64 {
	first := from.Truncate(interval).Add(offset)
	if first.Before(from) {
		first = first.Add(interval)
	}
	var out []int64
	for t := first; t.Before(to); t = t.Add(interval) {
		out = append(out, t.UnixMilli())
	}
	return out
}

// window5m is one evaluation of the first level: the device's figures and
// each owner's, where the window holds steps.
type window5m struct {
	t      int64
	device [nDevice]float64
	owners map[slot][nOwner]float64
	slots  []slot
}

func (f Fleet) window5m(t int64) (window5m, bool) {
	steps := f.steps(t)
	if len(steps) == 0 {
		return window5m{}, false
	}
	w := window5m{t: t, device: f.deviceValues(steps), owners: map[slot][nOwner]float64{}}
	for len(steps) > 0 {
		p := f.slotAt(steps[0])
		n := 1
		for n < len(steps) && f.slotAt(steps[n]) == p {
			n++
		}
		w.owners[p] = ownerValues(steps[:n])
		w.slots = append(w.slots, p)
		steps = steps[n:]
	}
	return w, true
}

// dayEvals is the span of evaluation times day d's output holds: the day,
// and on the last day every later evaluation that still reads a sample.
func (f Fleet) dayEvals(d int) (from, to time.Time) {
	from = f.Start.Add(time.Duration(d) * day)
	to = from.Add(day)
	if d == f.Days-1 {
		to = to.Add(time.Hour + hourLag + window)
	}
	return from, to
}

func (f Fleet) plan(d int) *dayPlan {
	from, to := f.dayEvals(d)
	p := &dayPlan{owner5m: map[slot][nOwner][]point{}, owner1h: map[slot][nOwner][]point{}}
	addSlot := func(s slot) {
		if !slices.Contains(p.slots, s) {
			p.slots = append(p.slots, s)
		}
	}
	for _, t := range evals(from, to, window, f.Offset5m) {
		w, ok := f.window5m(t)
		if !ok {
			continue
		}
		for i, v := range w.device {
			if !math.IsNaN(v) {
				p.device5m[i] = append(p.device5m[i], point{t, v})
			}
		}
		for _, s := range w.slots {
			addSlot(s)
			pts := p.owner5m[s]
			for i, v := range w.owners[s] {
				if !math.IsNaN(v) {
					pts[i] = append(pts[i], point{t, v})
				}
			}
			p.owner5m[s] = pts
		}
	}
	for _, e := range evals(from, to, time.Hour, f.Offset1h) {
		f.hour(p, e, addSlot)
	}
	return p
}

// hour records the hourly evaluation at e: every figure combined over the
// windows evaluated in [e - hourLag - 1h + 1 ms, e - hourLag].
func (f Fleet) hour(p *dayPlan, e int64, addSlot func(slot)) {
	hi := e - hourLag.Milliseconds()
	lo := hi - time.Hour.Milliseconds() + 1
	var ws []window5m
	for _, t := range evals(time.UnixMilli(lo), time.UnixMilli(hi+1), window, f.Offset5m) {
		if w, ok := f.window5m(t); ok {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return
	}
	p.devices1h = append(p.devices1h, e)
	for i, fig := range deviceFigures {
		var vs []float64
		for _, w := range ws {
			if !math.IsNaN(w.device[i]) {
				vs = append(vs, w.device[i])
			}
		}
		if len(vs) > 0 {
			p.device1h[i] = append(p.device1h[i], point{e, combineValues(fig.combine, vs)})
		}
	}
	var slots []slot
	for _, w := range ws {
		for _, s := range w.slots {
			if !slices.Contains(slots, s) {
				slots = append(slots, s)
			}
		}
	}
	for _, s := range slots {
		addSlot(s)
		var hour [nOwner]float64 // NaN: no series
		for i, fig := range ownerFigures {
			var vs []float64
			for _, w := range ws {
				if v, ok := w.owners[s]; ok && !math.IsNaN(v[i]) {
					vs = append(vs, v[i])
				}
			}
			hour[i] = math.NaN()
			if len(vs) > 0 {
				hour[i] = combineValues(fig.combine, vs)
			}
		}
		pts := p.owner1h[s]
		for i, v := range hourDefaulted(hour) {
			if !math.IsNaN(v) {
				pts[i] = append(pts[i], point{e, v})
			}
		}
		p.owner1h[s] = pts
	}
}

// hourDefaults are the owner figures that the hourly rules record only
// where they differ from another (their default), by index: the figure
// and its default.
var hourDefaults = [][2]int{
	{heldShare, heldSteps}, {activityKnownShare, heldSteps}, {activitySamples, heldSteps},
	{ownerDRAMSteps, heldSteps}, {ownerPowerSteps, heldSteps}, {activeShare, activitySum},
	{ownerVRAMP50, ownerVRAMMax}, {ownerVRAMP95, ownerVRAMMax}, {firstUse, firstHeld},
}

// hourDefaulted is what the hourly rules record of an owner's hour whose
// figures combined are hour (NaN where a figure has no series): a figure
// with a default where it differs from it (or has a value and the
// default none), 0 where it has none and its default has one, nothing
// (NaN) where it equals its default.
func hourDefaulted(hour [nOwner]float64) [nOwner]float64 {
	out := hour
	for _, fd := range hourDefaults {
		x, d := hour[fd[0]], hour[fd[1]]
		switch {
		case math.IsNaN(x) && !math.IsNaN(d):
			out[fd[0]] = 0
		case !math.IsNaN(x) && !math.IsNaN(d) && x == d:
			out[fd[0]] = math.NaN()
		}
	}
	return out
}

// writer writes OpenMetrics lines.
type writer struct {
	*bufio.Writer
	buf []byte
}

func (w *writer) sample(name, labels string, t int64, v float64) {
	b := append(w.buf[:0], name...)
	b = append(b, '{')
	b = append(b, labels...)
	b = append(b, "} "...)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	b = append(b, ' ')
	b = strconv.AppendInt(b, t/1000, 10)
	b = append(b, '.')
	ms := t % 1000
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), '\n')
	w.buf = b
	w.Write(b)
}

func (w *writer) family(name string) { fmt.Fprintf(w, "# TYPE %s gauge\n", name) }

// gpuLabels are the labels of GPU g that name it (those the XID rule
// keeps); deviceLabels add its model.
func gpuLabels(g int) string {
	return fmt.Sprintf(`Hostname="gpu-node-%04d",gpu="%d",UUID="GPU-%08x-1111-2222-3333-%012x"`, g/8, g%8, g, g)
}

func deviceLabels(g int) string {
	return gpuLabels(g) + `,modelName="NVIDIA A100-SXM4-80GB"`
}

func (f Fleet) ownerLabels(g int, p slot) string {
	return fmt.Sprintf(`%s,namespace=%q,pod=%q,container="main"`, deviceLabels(g), namespace(g), f.podName(g, p))
}

// stepLabel is the label that the rules add to their output.
const stepLabel = `,gpupack_step="30s"`

// sampleMetrics are the metrics the "samples" figure counts, one series each.
var sampleMetrics = []string{grEngine, fbUsed, fbFree, dram, power}

// WriteDay writes day d (from 0) of the rules' output for the shard's GPUs:
// both levels of gpupack's rules as `gpupack rules --step 30s` records
// them, evaluated in the day (on the last day, until they read nothing);
// the first level in full on the fleet's first and last day and, on the
// days between, the series that a report reads across a window (the
// devices' sampled steps and their samples of the check metric, for its
// check, and the XID maxima), since the report reads the others only at
// its ends; kube-state-metrics' pod times and owners; and the raw check
// metric (dcgm-exporter's framebuffer used) in the 5 minutes before each
// hour's middle, where the report's check reads it, the only raw series.
func (f Fleet) WriteDay(out io.Writer, sh Shard, d int) error {
	if err := f.Check(); err != nil {
		return err
	}
	if d < 0 || d >= f.Days || sh.From < 0 || sh.To > f.GPUs || sh.From >= sh.To {
		return fmt.Errorf("rulegen: day %d of GPUs [%d, %d): want a day of the %d and GPUs of the %d", d, sh.From, sh.To, f.Days, f.GPUs)
	}
	w := &writer{Writer: bufio.NewWriterSize(out, 1<<20)}
	p := f.plan(d)
	full := d == 0 || d == f.Days-1
	for i, fig := range deviceFigures {
		if full || i == sampledSteps || i == samples {
			f.writeDevice(w, sh, "gpupack:"+fig.name+":5m", i, p.device5m[i], full)
		}
		f.writeDevice(w, sh, "gpupack:"+fig.name+":1h", i, p.device1h[i], true)
	}
	w.family("gpupack:xid_max:5m")
	for g := sh.From; g < sh.To; g++ {
		for _, pt := range p.device5m[sampledSteps] {
			w.sample("gpupack:xid_max:5m", gpuLabels(g)+stepLabel, pt.t, 0)
		}
	}
	w.family("gpupack:devices:1h")
	for _, e := range p.devices1h {
		w.sample("gpupack:devices:1h", stepLabel[1:], e, float64(sh.To-sh.From))
	}
	for i, fig := range ownerFigures {
		if full {
			f.writeOwner(w, sh, "gpupack:"+fig.name+":5m", p.slots, func(s slot) []point { return p.owner5m[s][i] })
		}
		f.writeOwner(w, sh, "gpupack:"+fig.name+":1h", p.slots, func(s slot) []point { return p.owner1h[s][i] })
	}
	f.writeKSM(w, sh, d)
	f.writeCheck(w, sh, d)
	w.WriteString("# EOF\n")
	return w.Flush()
}

// writeDevice writes a device figure's points for the shard's GPUs; of
// the samples per metric, allMetrics false writes the check metric's only.
func (f Fleet) writeDevice(w *writer, sh Shard, name string, i int, pts []point, allMetrics bool) {
	if len(pts) == 0 {
		return
	}
	w.family(name)
	for g := sh.From; g < sh.To; g++ {
		labels := []string{deviceLabels(g) + stepLabel}
		switch i {
		case samples:
			labels = nil
			for _, m := range sampleMetrics {
				if !allMetrics && m != fbUsed {
					continue
				}
				labels = append(labels, deviceLabels(g)+stepLabel+`,metric="`+m+`"`)
			}
		case activitySource:
			labels[0] += `,source="` + grEngine + `"`
		}
		for _, l := range labels {
			for _, pt := range pts {
				w.sample(name, l, pt.t, pt.v)
			}
		}
	}
}

func (f Fleet) writeOwner(w *writer, sh Shard, name string, slots []slot, pts func(slot) []point) {
	w.family(name)
	for g := sh.From; g < sh.To; g++ {
		for _, s := range slots {
			l := f.ownerLabels(g, s) + stepLabel
			for _, pt := range pts(s) {
				w.sample(name, l, pt.t, pt.v)
			}
		}
	}
}

// ksmFamilies are kube-state-metrics' pod series that the report reads,
// each a pod's time less its start (the owner's value is 1).
var ksmFamilies = []struct {
	name   string
	offset time.Duration
}{
	{"kube_pod_created", -60 * time.Second},
	{"kube_pod_status_scheduled_time", -50 * time.Second},
	{"kube_pod_container_state_started", -20 * time.Second},
	{"kube_pod_status_ready_time", -10 * time.Second},
	{"kube_pod_status_container_ready_time", -10 * time.Second},
	{"kube_pod_owner", 0},
}

// writeKSM writes the pods of day d as kube-state-metrics serves them,
// every ksmEvery while each exists.
func (f Fleet) writeKSM(w *writer, sh Shard, d int) {
	for _, fam := range ksmFamilies {
		w.family(fam.name)
		for g := sh.From; g < sh.To; g++ {
			for k := range podsPerDay {
				p := slot{d, k}
				start := f.podStart(p)
				labels := fmt.Sprintf(`namespace=%q,pod=%q,uid="%08x-0000-4000-8000-%012x"`, namespace(g), f.podName(g, p), g, (d*podsPerDay+k)%(1<<40))
				v := float64(start.Add(fam.offset).Unix())
				switch fam.name {
				case "kube_pod_owner":
					labels += fmt.Sprintf(`,owner_kind="Job",owner_name="train-%07d",owner_is_controller="true"`, (d*f.GPUs+g)*podsPerDay+k)
					v = 1
				case "kube_pod_container_state_started":
					labels += `,container="main"`
				}
				for t := start; t.Before(start.Add(podSpan)); t = t.Add(ksmEvery) {
					w.sample(fam.name, labels, t.UnixMilli(), v)
				}
			}
		}
	}
}

// writeCheck writes the raw check metric of day d in the checkLead before
// each hour's middle.
func (f Fleet) writeCheck(w *writer, sh Shard, d int) {
	var ts []int64
	for h := range 24 {
		mid := f.Start.Add(time.Duration(d)*day + time.Duration(h)*time.Hour + 30*time.Minute)
		for t := mid.Add(Step - checkLead); !t.After(mid); t = t.Add(Step) {
			ts = append(ts, t.UnixMilli())
		}
	}
	f.writeRaw(w, sh, ts, []string{fbUsed})
}

// dayRaw are the raw steps of day d.
func (f Fleet) dayRaw(d int) []int64 {
	var ts []int64
	from := f.Start.Add(time.Duration(d) * day)
	for t := from; t.Before(from.Add(day)); t = t.Add(Step) {
		ts = append(ts, t.UnixMilli())
	}
	return ts
}

// writeRaw writes the metrics (by name; nil for all, with the XID gauge)
// of the shard's GPUs at the steps ts, each sample labelled with the pod
// that holds the GPU then, as dcgm-exporter labels them.
func (f Fleet) writeRaw(w *writer, sh Shard, ts []int64, only []string) {
	type metric struct {
		name  string
		value func(int64) float64
	}
	var ms []metric
	for _, m := range rawMetrics {
		if only == nil || slices.Contains(only, m.name) {
			ms = append(ms, metric{m.name, m.value})
		}
	}
	if only == nil {
		ms = append(ms, metric{xid, func(int64) float64 { return 0 }})
	}
	for _, m := range ms {
		w.family(m.name)
		for g := sh.From; g < sh.To; g++ {
			var labels string
			var cur slot
			for i, t := range ts {
				if s := f.slotAt(t); i == 0 || s != cur {
					cur, labels = s, f.ownerLabels(g, s)
				}
				w.sample(m.name, labels, t, m.value(t))
			}
		}
	}
}

// WriteRaw writes the raw series that the rules read for the shard's GPUs
// over the whole fleet: dcgm-exporter's series at every step.
func (f Fleet) WriteRaw(out io.Writer, sh Shard) error {
	if err := f.Check(); err != nil {
		return err
	}
	w := &writer{Writer: bufio.NewWriterSize(out, 1<<20)}
	var ts []int64
	for d := range f.Days {
		ts = append(ts, f.dayRaw(d)...)
	}
	f.writeRaw(w, sh, ts, nil)
	w.WriteString("# EOF\n")
	return w.Flush()
}

// PodTruth is what the fleet's rules hold for a pod over a span of
// evaluations: the steps it held its GPU, and its activity summed over
// them (active steps).
type PodTruth struct{ HeldSteps, ActiveSteps float64 }

// Truth is each pod's (by namespace/pod) figures over the first level's
// windows evaluated in [from, to), as a report over that window totals
// them.
func (f Fleet) Truth(from, to time.Time) map[string]PodTruth {
	out := map[string]PodTruth{}
	for _, t := range evals(from, to, window, f.Offset5m) {
		w, ok := f.window5m(t)
		if !ok {
			continue
		}
		for _, s := range w.slots {
			v := w.owners[s]
			for g := range f.GPUs {
				k := namespace(g) + "/" + f.podName(g, s)
				pt := out[k]
				pt.HeldSteps += v[heldSteps]
				pt.ActiveSteps += v[activeShare]
				out[k] = pt
			}
		}
	}
	return out
}
