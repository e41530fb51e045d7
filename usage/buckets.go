package usage

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/internal/util/mempolicy"
)

// Bucket is the pushed-down accounting of one device held by one owner (or
// by nobody: zero Owner) over one bucket [Start, Start+Length) of time: held
// time, activity sums, VRAM max/p95/p50, power, energy, as the query engine
// computed them from the samples at the evaluation step Step (step counts,
// sums, quantiles): a few numbers per device-hour instead of Length/Step
// samples per metric.
//
// The bucket with the zero Owner carries the device's own figures (how many
// steps had any sample and how many had an owner, VRAM used and free, power,
// energy, data quality); a bucket with an Owner carries that owner's share
// of the device in that hour. A step count is the number of evaluation steps
// at which the figure had a value.
type Bucket struct {
	Start  time.Time     `json:"start"`
	Length time.Duration `json:"length"`
	Step   time.Duration `json:"step"`
	Device Device        `json:"device"`
	Owner  Owner         `json:"owner"`

	// HeldSteps counts the steps at which the owner held the device; for
	// the device's own bucket, the steps at which anybody did.
	HeldSteps float64 `json:"heldSteps"`
	// SampledSteps counts the steps with any sample of the device (device
	// bucket only).
	SampledSteps float64 `json:"sampledSteps,omitempty"`

	// HeldShareSteps sums the owner's share of the device over the held
	// steps: 1/n with the n owners present (time-slicing splits a device
	// equally), or at a per-process step (PerProcessSteps) its processes'
	// activity plus 1/n of the device's unused time;
	// ActivityKnownShareSteps sums it over the held steps with a known
	// activity, and ActiveShareSteps sums activity/n over them (at a
	// per-process step, the owner's own activity). Times the
	// device's share of a GPU and the step they give allocated, activity-known
	// and active GPU-seconds (owner buckets only).
	HeldShareSteps          float64 `json:"heldShareSteps,omitempty"`
	ActivityKnownShareSteps float64 `json:"activityKnownShareSteps,omitempty"`
	ActiveShareSteps        float64 `json:"activeShareSteps,omitempty"`

	// Activity summarises the device's activity at the owner's held steps
	// (owner buckets only): counts, sum, P95 in Activity, and its P50 and
	// Max; unknown percentiles where no step had a known activity.
	Activity    ActivityStats `json:"activity"`
	ActivityP50 Amount        `json:"activityP50"`
	ActivityMax Amount        `json:"activityMax"`
	// ActivitySource is the most preferred activity metric with a known
	// value in the bucket (device bucket only), "" if none.
	ActivitySource string `json:"activitySource,omitempty"`

	// VRAMUsedMiB is over the owner's held steps (owner bucket) or every
	// step (device bucket); VRAMFreeMiB only for the device.
	VRAMUsedMiB Percentiles `json:"vramUsedMiB"`
	VRAMFreeMiB Percentiles `json:"vramFreeMiB"`
	// DRAMSum and PowerSum add up the known values over DRAMSteps and
	// PowerSteps steps, for means.
	DRAMSum    float64 `json:"dramSum,omitempty"`
	DRAMSteps  float64 `json:"dramSteps,omitempty"`
	PowerSum   float64 `json:"powerSum,omitempty"`
	PowerSteps float64 `json:"powerSteps,omitempty"`
	// EnergyJoules is the device's energy (device bucket) or the owner's
	// share of it (1/n at each step): from the counter's increase between
	// adjacent steps (all of it after a reset), else power x step.
	EnergyJoules Amount `json:"energyJoules"`

	// FirstHeld and FirstUse are the first step at which the owner held the
	// device and at which it used it (activity or framebuffer above the idle
	// floors); zero if none (owner buckets only).
	FirstHeld time.Time `json:"firstHeld"`
	FirstUse  time.Time `json:"firstUse"`

	// Data quality (device bucket only): samples of every series of the
	// device at the steps, those that were NaN or infinite, counter resets,
	// steps sampled after an unsampled one, and the metrics seen.
	Samples         float64  `json:"samples,omitempty"`
	NaNSamples      float64  `json:"nanSamples,omitempty"`
	CounterResets   float64  `json:"counterResets,omitempty"`
	SampledAfterGap float64  `json:"sampledAfterGap,omitempty"`
	Metrics         []string `json:"metrics,omitempty"`

	// SharedSteps counts the steps at which two or more pods held the
	// device (device bucket), or at which the owner held it while two or
	// more pods did (owner bucket).
	SharedSteps float64 `json:"sharedSteps,omitempty"`
	// PerProcessSteps counts the shared steps that were split by what
	// each pod's processes used (AttributionPerProcess): those at which
	// every owner present had `gpupack agent`'s activity; the device's
	// (device bucket) or the owner's (owner bucket). The others of
	// SharedSteps were split evenly.
	PerProcessSteps float64 `json:"perProcessSteps,omitempty"`
	// DRA is what the owner's series' DRA labels say (owner buckets only).
	DRA DRAHold `json:"dra,omitzero"`
	// OutOfRange are the metrics with a sample outside their range
	// (MetricRange) in the bucket, each with the sample furthest beyond
	// it on that side (device bucket only; a metric may be listed below
	// and above).
	OutOfRange []MetricValue `json:"outOfRange,omitempty"`
}

// BucketInput is everything AccountBuckets needs: the window [Start, End),
// whose length must be a whole number of the buckets' Step, the buckets of
// every device and owner in it, and what Input has besides series.
type BucketInput struct {
	Start, End time.Time
	Buckets    []Bucket
	Pricing    Pricing
	Pods       []PodEvents
	// App holds the application metrics, each sample standing for AppStep
	// (the mean of the metric over that span, as a rate for totals).
	App     []AppSeries
	AppStep time.Duration
}

// AccountBuckets gives the Report that Account gives on the raw samples of
// the same data, from per-hour buckets: GPU-seconds allocated, active, idle,
// activity-unknown, unallocated and unsampled, costs and energy are sums of
// the buckets' sums and agree with Account's (within rounding) where the
// buckets were computed at Account's step; so do the data-quality counts
// except Gaps.
//
// Approximations, where a figure does not add up over buckets:
//   - window percentiles (VRAM p50/p95, activity p50/p95, and the p95 that
//     the pattern reads) are weighted percentiles of the buckets'
//     percentiles, weighted by their steps; maxima are exact;
//   - Quality.Gaps counts, per device, the steps sampled after an unsampled
//     one less its first appearance;
//   - the compute slices that a MIG layout leaves uninstantiated count as
//     sampled for as many steps per bucket as its most-sampled instance;
//   - the activity source is chosen per step by the query engine (GR engine,
//     else SM, else GPU utilisation), where Account chooses it per device
//     over the window: they differ only where a device's preferred metric
//     comes and goes.
//
// It fails on buckets that do not fit the window or each other (a step
// that differs or does not divide the window), before it accounts anything.
func AccountBuckets(in BucketInput) (*Report, error) {
	a, err := NewBucketAccount(in.Start, in.End)
	if err != nil {
		return nil, err
	}
	if err := a.AddAll(in.Buckets); err != nil {
		return nil, err
	}
	return a.Report(in.Pricing, in.Pods, in.App, in.AppStep)
}

// BucketAccount accumulates buckets as they arrive and keeps only sums per
// device and owner (and a few numbers per bucket for percentiles), so that
// a month of a fleet's buckets need not be held at once. AccountBuckets is
// Add for each bucket, then Report.
type BucketAccount struct {
	start, end time.Time
	step       time.Duration
	devices    map[string]*deviceSums
	// levels are the held, activity-known and active share-steps per GPU
	// model, MIG profile and hour: times a step and the profile's share of
	// a GPU (known only at Report) they are Report.Hourly's GPU-seconds.
	hours  int
	levels map[levelKey]*hourLevels
	// spent says Report has run: it releases the owners' sums as it
	// accounts them, so the account cannot be added to or reported again.
	spent bool
	// key is Add's buffer for a device's key.
	key []byte
	// Memory says whether Report hands memory back to the operating
	// system before it makes the report and after: a one-shot command's
	// (mempolicy.OneShot) does for a large report; the zero value, serve's,
	// does not.
	Memory mempolicy.Policy
}

// levelKey names the devices whose hour levels add up before pricing.
type levelKey struct{ model, migProfile string }

// deviceSums are a device's figures summed over its buckets.
type deviceSums struct {
	device               Device
	sampled, held        float64
	powSum, powN         float64
	vram, vramFree       quantileSet
	energy               float64
	energyKnown          bool
	sourceRank           int
	samples, nan, resets float64
	afterGap             float64
	metrics              [nMetrics]bool
	sampledByBucket      map[int64]float64 // MIG instances only
	owners               map[Owner]*ownerSums
	shared               float64
	// sharedHours are the owners with shared steps, by hour of the window.
	sharedHours map[int][]Owner
	// perProcess are the shared steps split per process.
	perProcess float64
	// oor are the device's values outside their metric's range.
	oor outOfRange
}

// ownerSums are an owner's figures on one device summed over its buckets.
// A month of a fleet's owners is many: the DRA labels, which most owners
// lack, are held apart, and times are kept as instants.
type ownerSums struct {
	dra                      *DRAHold
	heldShare, known, active float64
	energy                   float64
	energyKnown              bool
	vram, activity           quantileSet
	stats                    ActivityStats
	dramSum, dramN           float64
	powSum, powN             float64
	firstHeld, firstUse      instant
	// shared and perProcess are the owner's shared steps and those of
	// them split per process.
	shared, perProcess float64
	// firstHour is the window's hour (from 0) of the first bucket that
	// the owner held the device in, -1 if none; firstHourShare its held
	// share-steps: for the GPUs held at start.
	firstHour      int32
	firstHourShare float64
	// hours are the activity-known and active share-steps per hour.
	hours podHours
}

// instant is a time as Unix nanoseconds; noInstant is none. It is a
// third of a time.Time.
type instant int64

const noInstant instant = math.MinInt64

func instantOf(t time.Time) instant {
	if t.IsZero() {
		return noInstant
	}
	return instant(t.UnixNano())
}

// time is the instant in UTC; the zero time if none.
func (i instant) time() time.Time {
	if i == noInstant {
		return time.Time{}
	}
	return time.Unix(0, int64(i)).UTC()
}

// reportCollectOwners is how many owners' sums Report releases between
// the collections it asks for (about 14 MB of them): few enough that the
// heap does not reach twice what was live at the last collection before
// the next (docs/benchmarks.md has the measurements behind it).
const reportCollectOwners = 15_000

// errSpent refuses to use an account after its Report.
var errSpent = errors.New("bucket account already reported: it is spent by Report; start a new one with NewBucketAccount")

// NewBucketAccount starts accounting the window [start, end).
func NewBucketAccount(start, end time.Time) (*BucketAccount, error) {
	if !end.After(start) {
		return nil, fmt.Errorf("bucket window %s..%s is empty; give an end after the start", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return &BucketAccount{start: start, end: end, devices: map[string]*deviceSums{}, hours: hoursOf(start, end), levels: map[levelKey]*hourLevels{}}, nil
}

// Owners is how many owners (pods' containers, and pods where the
// container is not known) hold each device, summed over the devices: about
// the pods of the window.
func (a *BucketAccount) Owners() int {
	n := 0
	for _, d := range a.devices {
		n += len(d.owners)
	}
	return n
}

// Clone returns a deep copy of the account over the window [start, end),
// sharing nothing with a: buckets added to either, and Report (which sorts
// the percentile lists), leave the other as it was. end may lie after a's
// end, so that a copy of the complete hours of a window takes the partial
// hour that follows them; Report on the copy then gives what
// AccountBuckets gives over [start, end) with the same buckets added in
// the same order. It fails if end is before a's end (a bucket added might
// not fit) or if the buckets' step does not divide [start, end).
func (a *BucketAccount) Clone(end time.Time) (*BucketAccount, error) {
	switch {
	case end.Before(a.end):
		return nil, fmt.Errorf("bucket window %s..%s: cannot end at %s, before the buckets added; give an end at or after %s", a.start.Format(time.RFC3339), a.end.Format(time.RFC3339), end.Format(time.RFC3339), a.end.Format(time.RFC3339))
	case a.step != 0 && end.Sub(a.start)%a.step != 0:
		return nil, fmt.Errorf("the window %s..%s is not a whole number of steps of %s; give a window of whole buckets", a.start.Format(time.RFC3339), end.Format(time.RFC3339), a.step)
	}
	c := &BucketAccount{start: a.start, end: end, step: a.step, hours: hoursOf(a.start, end), Memory: a.Memory,
		devices: make(map[string]*deviceSums, len(a.devices)), levels: make(map[levelKey]*hourLevels, len(a.levels))}
	for k, d := range a.devices {
		c.devices[k] = d.clone()
	}
	for k, l := range a.levels {
		c.levels[k] = l.clone(c.hours)
	}
	return c, nil
}

// clone is a deep copy of d: the value's fields, then every map and slice.
func (d *deviceSums) clone() *deviceSums {
	c := *d
	c.vram, c.vramFree = d.vram.clone(), d.vramFree.clone()
	if d.sampledByBucket != nil {
		c.sampledByBucket = maps.Clone(d.sampledByBucket)
	}
	c.oor = d.oor.clone()
	c.owners = make(map[Owner]*ownerSums, len(d.owners))
	for o, os := range d.owners {
		c.owners[o] = os.clone()
	}
	if d.sharedHours != nil {
		c.sharedHours = make(map[int][]Owner, len(d.sharedHours))
		for h, os := range d.sharedHours {
			c.sharedHours[h] = slices.Clone(os)
		}
	}
	return &c
}

// clone is a deep copy of o.
func (o *ownerSums) clone() *ownerSums {
	c := *o
	if o.dra != nil {
		dra := *o.dra
		c.dra = &dra
	}
	c.vram, c.activity = o.vram.clone(), o.activity.clone()
	c.hours = podHours{first: o.hours.first, known: slices.Clone(o.hours.known), active: slices.Clone(o.hours.active)}
	return &c
}

// clone is a deep copy of s.
func (s *quantileSet) clone() quantileSet {
	return quantileSet{p50: slices.Clone(s.p50), p95: slices.Clone(s.p95), max: s.max}
}

// clone is a deep copy of l over hours hours (at least l's).
func (l *hourLevels) clone(hours int) *hourLevels {
	c := newHourLevels(hours)
	copy(c.alloc, l.alloc)
	copy(c.known, l.known)
	copy(c.active, l.active)
	return c
}

// AddAll adds buckets in order, as Add each; an error names the bucket
// by its index.
func (a *BucketAccount) AddAll(buckets []Bucket) error {
	for i := range buckets {
		if err := a.Add(&buckets[i]); err != nil {
			return fmt.Errorf("bucket %d: %w", i, err)
		}
	}
	return nil
}

// Add accounts one bucket. It refuses a bucket that does not fit the window
// or the buckets before it (another step), and adds nothing then.
func (a *BucketAccount) Add(b *Bucket) error {
	if a.spent {
		return errSpent
	}
	if err := a.fits(b); err != nil {
		return err
	}
	a.step = b.Step
	d := a.deviceOf(b)
	if b.Owner.IsZero() {
		d.add(b)
		return nil
	}
	o := d.owners[b.Owner]
	if o == nil {
		o = &ownerSums{firstHeld: noInstant, firstUse: noInstant, firstHour: -1}
		d.owners[b.Owner] = o
	}
	a.addHour(d, o, b)
	o.add(b)
	return nil
}

// fits says what is wrong with a bucket that does not fit the window or
// the buckets before it.
func (a *BucketAccount) fits(b *Bucket) error {
	// where names the bucket in an error; made only for one.
	where := func() string { return fmt.Sprintf("%s at %s", b.Device.Key(), b.Start.Format(time.RFC3339)) }
	switch {
	case b.Step <= 0 || b.Length <= 0 || b.Length%b.Step != 0:
		return fmt.Errorf("%s: step %s and length %s; want a positive step that divides the length, such as 30s and 1h", where(), b.Step, b.Length)
	case a.step != 0 && b.Step != a.step:
		return fmt.Errorf("%s: step %s, but other buckets have %s; load every bucket at one step", where(), b.Step, a.step)
	case b.Start.Before(a.start) || b.Start.Add(b.Length).After(a.end):
		return fmt.Errorf("%s: [%s, %s) is not inside the window %s..%s; load the buckets of this window only", where(), b.Start.Format(time.RFC3339), b.Start.Add(b.Length).Format(time.RFC3339), a.start.Format(time.RFC3339), a.end.Format(time.RFC3339))
	case a.end.Sub(a.start)%b.Step != 0:
		return fmt.Errorf("%s: the window %s..%s is not a whole number of steps of %s; give a window of whole buckets", where(), a.start.Format(time.RFC3339), a.end.Format(time.RFC3339), b.Step)
	}
	return nil
}

// deviceOf is the sums of the bucket's device, made at its first bucket.
func (a *BucketAccount) deviceOf(b *Bucket) *deviceSums {
	// Looked up in a buffer of the account's, its string made once per
	// device: a month of a fleet is two million buckets.
	a.key = b.Device.appendKey(a.key[:0])
	d := a.devices[string(a.key)]
	if d == nil {
		d = &deviceSums{device: b.Device, sourceRank: len(ActivitySources), owners: map[Owner]*ownerSums{}}
		a.devices[string(a.key)] = d
	}
	if d.device.Model == "" {
		d.device.Model = b.Device.Model
	}
	return d
}

// addHour accounts an owner's bucket in the hour it starts in: the
// device's shared hours, the owner's first hour and hours, and the hour
// levels of the device's model.
func (a *BucketAccount) addHour(d *deviceSums, o *ownerSums, b *Bucket) {
	h := int(b.Start.Sub(a.start) / time.Hour)
	if b.SharedSteps > 0 {
		if d.sharedHours == nil {
			d.sharedHours = map[int][]Owner{}
		}
		d.sharedHours[h] = append(d.sharedHours[h], b.Owner)
	}
	if b.HeldShareSteps > 0 {
		if o.firstHour < 0 || int32(h) < o.firstHour {
			o.firstHour, o.firstHourShare = int32(h), 0
		}
		if int32(h) == o.firstHour {
			o.firstHourShare += b.HeldShareSteps
		}
	}
	lk := levelKey{d.device.Model, d.device.MIGProfile}
	l := a.levels[lk]
	if l == nil {
		l = newHourLevels(a.hours)
		a.levels[lk] = l
	}
	l.add(h, b.HeldShareSteps, b.ActivityKnownShareSteps, b.ActiveShareSteps)
	o.hours.add(h, b.ActivityKnownShareSteps, b.ActiveShareSteps)
}

// add sums an owner's bucket into the owner's figures on its device.
func (o *ownerSums) add(b *Bucket) {
	o.heldShare += b.HeldShareSteps
	o.known += b.ActivityKnownShareSteps
	o.active += b.ActiveShareSteps
	if o.dra == nil && !b.DRA.IsZero() {
		dra := b.DRA
		o.dra = &dra
	}
	if b.EnergyJoules.Known() {
		o.energy += b.EnergyJoules.Value()
		o.energyKnown = true
	}
	o.vram.add(b.VRAMUsedMiB, b.HeldSteps)
	o.activity.add(Percentiles{P50: b.ActivityP50, P95: quantileAmount(b.Activity), Max: b.ActivityMax}, b.Activity.Samples)
	o.stats.Samples += b.Activity.Samples
	o.stats.Sum += b.Activity.Sum
	o.stats.BelowIdle += b.Activity.BelowIdle
	o.stats.AtOrAboveBurst += b.Activity.AtOrAboveBurst
	o.shared += b.SharedSteps
	o.perProcess += b.PerProcessSteps
	o.dramSum += b.DRAMSum
	o.dramN += b.DRAMSteps
	o.powSum += b.PowerSum
	o.powN += b.PowerSteps
	if t := instantOf(b.FirstHeld); t != noInstant && (o.firstHeld == noInstant || t < o.firstHeld) {
		o.firstHeld = t
	}
	if t := instantOf(b.FirstUse); t != noInstant && (o.firstUse == noInstant || t < o.firstUse) {
		o.firstUse = t
	}
}

// add sums the device's own bucket (the zero Owner's) into its figures.
func (d *deviceSums) add(b *Bucket) {
	d.sampled += b.SampledSteps
	d.held += b.HeldSteps
	d.shared += b.SharedSteps
	d.perProcess += b.PerProcessSteps
	d.powSum += b.PowerSum
	d.powN += b.PowerSteps
	d.vram.add(b.VRAMUsedMiB, b.SampledSteps)
	d.vramFree.add(b.VRAMFreeMiB, b.SampledSteps)
	if b.EnergyJoules.Known() {
		d.energy += b.EnergyJoules.Value()
		d.energyKnown = true
	}
	if i := slices.Index(ActivitySources, b.ActivitySource); i >= 0 && i < d.sourceRank {
		d.sourceRank = i
	}
	d.samples += b.Samples
	d.nan += b.NaNSamples
	d.resets += b.CounterResets
	d.afterGap += b.SampledAfterGap
	for _, m := range b.Metrics {
		if mi, ok := metricIndex[m]; ok {
			d.metrics[mi] = true
		}
	}
	for _, v := range b.OutOfRange {
		d.oor.add(v.Metric, v.Value, b.Start)
	}
	if b.Device.MIGInstance != "" {
		if d.sampledByBucket == nil {
			d.sampledByBucket = map[int64]float64{}
		}
		d.sampledByBucket[b.Start.UnixMilli()] += b.SampledSteps
	}
}

// Report gives the accounting of the buckets added, priced by pricing,
// with the pods' life-cycle times and application metrics (each sample
// standing for appStep; 0 means an hour).
//
// Report spends the account: it releases the owners' sums as it accounts
// them, so that a month's sums and its report are not held at once; a
// second Report or a later Add is refused.
func (a *BucketAccount) Report(pricing Pricing, podEvents []PodEvents, apps []AppSeries, appStep time.Duration) (*Report, error) {
	if a.spent {
		return nil, errSpent
	}
	keys := slices.Sorted(maps.Keys(a.devices))
	devs := make([]Device, len(keys))
	for i, k := range keys {
		devs[i] = a.devices[k].device
	}
	if err := pricing.checkPriced(devs); err != nil {
		return nil, err
	}
	a.spent = true
	br := newBucketReport(a, pricing, keys, podEvents, apps, appStep)
	for i, key := range keys {
		br.device(i, key, a.devices[key])
	}
	return br.finish(), nil
}

// bucketReport is a BucketAccount's report in the making. The devices go
// by in the order of their keys; each owner's sums merge into its pod's
// state, and a pod goes into the report once its last device is
// accounted, so that a month of a fleet's pods is never held both as
// states and as the report.
type bucketReport struct {
	deviceTotals
	a       *BucketAccount
	pricing Pricing
	q       *Quality
	// sec is a step's seconds; windowSeconds and windowSteps the window's.
	sec, windowSeconds, windowSteps float64
	seenMetric                      [nMetrics]bool
	ranges                          rangeWarnings
	// nOwners is the account's owners (Owners), by which the memory
	// policy sizes what it hands back.
	nOwners int
	// last is the index, in the order of keys, of the last device that
	// each pod held.
	last  map[podRef]int
	as    *assembler
	pods  map[podRef]*podState
	pool  podPool
	mig   bucketMIG
	owner []Owner // the device's owners, sorted
	// released counts the owners' sums released since the last
	// collection.
	released int
}

// bucketMIG collects the instances of one MIG GPU, as migGPU does, with
// the most steps any of them was sampled in each bucket (by the bucket's
// start in Unix milliseconds).
type bucketMIG struct {
	migInstances
	sampled map[int64]float64
}

// newBucketReport starts the report of the account's devices, keys in
// order: its head, and its maps and slices made at their whole size.
func newBucketReport(a *BucketAccount, pricing Pricing, keys []string, podEvents []PodEvents, apps []AppSeries, appStep time.Duration) bucketReport {
	step := a.step
	if step == 0 {
		// No buckets: nothing was sampled; the window still has a length.
		step = a.end.Sub(a.start)
	}
	sec := step.Seconds()
	windowSeconds := a.end.Sub(a.start).Seconds()
	r := &Report{Accounting: HourlyAccounting, Start: a.start.UTC(), End: a.end.UTC(), StepSecond: Seconds(sec), Currency: pricing.Currency()}
	r.Quality.ActivitySources = map[string]int{}
	br := bucketReport{a: a, pricing: pricing, deviceTotals: deviceTotals{r: r, nodes: map[string]*acc{}}, q: &r.Quality,
		sec: sec, windowSeconds: windowSeconds, windowSteps: windowSeconds / sec,
		nOwners: a.Owners(), pods: map[podRef]*podState{}}
	// The report's maps and slices are made whole next (a month of a
	// fleet's pods is about 160 MB in two allocations), where the reading
	// before left memory free but resident in pieces too small to hold
	// them: handed back to the OS first, the process does not hold both.
	a.Memory.HandBack(br.nOwners)
	// Made as large as every device's owners at once: grown by inserts,
	// the maps would leave as much garbage again as they hold.
	br.last = make(map[podRef]int, br.nOwners)
	containers := make(map[Owner]bool, br.nOwners)
	for i, key := range keys {
		for o := range a.devices[key].owners {
			br.last[o.podRef()] = i
			containers[o] = true
		}
	}
	if appStep <= 0 {
		appStep = time.Hour
	}
	br.as = newAssembler(r, len(br.last), len(containers), apps, podEvents, func(int64) float64 { return appStep.Seconds() })
	br.mig.sampled = map[int64]float64{}
	return br
}

// device accounts the i-th device, of the key: its data quality and
// capacity, its owners' shares, the pods that end with it, and its own
// figures.
func (br *bucketReport) device(i int, key string, d *deviceSums) {
	if d.device.MIGInstance == "" || !br.mig.same(d.device) {
		br.flushUninstantiated()
	}
	share, price, pa := shareAndPrice(br.pricing, br.q, d.device)
	du := DeviceUsage{Device: d.device, Share: share, PricePerHour: pa, ActivitySource: br.quality(d)}
	br.ranges.device(d.device, d.oor)

	var dev acc
	dev.energy, dev.energyKnown = d.energy, d.energyKnown
	held := min(d.held, d.sampled)
	dev.unseen((br.windowSteps - d.sampled) * br.sec * share)
	dev.free((d.sampled-held)*br.sec*share, price)
	dev.capacity += held * br.sec * share
	br.windowDeviceSeconds += br.windowSeconds * share
	br.coveredDeviceSeconds += d.sampled * br.sec * share

	br.owner = slices.AppendSeq(br.owner[:0], maps.Keys(d.owners))
	slices.SortFunc(br.owner, compareOwnerKeys)
	du.SharedSeconds = Seconds(d.shared * br.sec)
	du.PerProcessSeconds = Seconds(d.perProcess * br.sec)
	du.SharedBy = br.accountOwners(key, d, &du, &dev, share, price)
	br.reportFinalPods(i)
	br.release(d)

	du.Coverage = Known(d.sampled * br.sec / br.windowSeconds)
	du.VRAMUsedMiB = d.vram.percentiles()
	du.VRAMFreeMiB = d.vramFree.percentiles()
	if d.powN > 0 {
		du.PowerWatts = Known(d.powSum / d.powN)
	}
	du.Totals, du.Capacity = dev.totals(), dev.capacityTotals()
	br.addDevice(du, &dev)
	if d.device.MIGInstance != "" {
		br.mig.add(d.device, share, pa)
		for t, s := range d.sampledByBucket {
			br.mig.sampled[t] = max(br.mig.sampled[t], s)
		}
	}
}

// quality adds the device's data-quality counts to the report's and gives
// its activity source ("" if none).
func (br *bucketReport) quality(d *deviceSums) string {
	q, source := br.q, ""
	if d.sourceRank < len(ActivitySources) {
		source = ActivitySources[d.sourceRank]
		q.ActivitySources[source]++
	} else {
		q.ActivitySources["none"]++
	}
	q.Samples += int(d.samples)
	q.NaNSamples += int(d.nan)
	q.CounterResets += int(d.resets)
	if d.afterGap > 0 {
		q.Gaps += int(d.afterGap) - 1 // the device's first appearance is no gap
	}
	for mi, seen := range d.metrics {
		br.seenMetric[mi] = br.seenMetric[mi] || seen
	}
	return source
}

// accountOwners adds each owner's share of the device (of the key) to the
// device's accounting dev, its pod's and its container's, and gives the
// pods that shared the device.
func (br *bucketReport) accountOwners(key string, d *deviceSums, du *DeviceUsage, dev *acc, share, price float64) []string {
	gs := br.sec * share
	var sh sharers
	for _, o := range br.owner {
		os := d.owners[o]
		allocated, known, active := os.heldShare*gs, os.known*gs, os.active*gs
		dev.holdSums(allocated, known, active, price)
		ps, ca := resolveOwner(br.pods, &br.pool, o, d.device, key, du.ActivitySource, 0, 0)
		if os.dra != nil {
			if c := os.dra.Claim(); c != "" {
				ps.claim(c)
			}
			if id := os.dra.DeviceID(); id != "" && du.DRADevice == "" {
				du.DRADevice = id
			}
		}
		for h, sharing := range d.sharedHours {
			if slices.Contains(sharing, o) {
				sh.add(h, ps)
			}
		}
		ps.acc.holdSums(allocated, known, active, price)
		ca.holdSums(allocated, known, active, price)
		if os.energyKnown {
			ca.energy += os.energy
			ca.energyKnown = true
		}
		ps.addOwnerSums(os, gs, br.a.start)
		ps.countShared(os.perProcess*br.sec, true)
		ps.countShared((os.shared-os.perProcess)*br.sec, false)
	}
	return sh.settle()
}

// addOwnerSums merges an owner's sums on one device into its pod's state
// (gs GPU-seconds a share-step; start the window's): its hours, energy,
// percentiles, activity statistics, DRAM and power means, and first
// times.
func (ps *podState) addOwnerSums(os *ownerSums, gs float64, start time.Time) {
	for i, k := range os.hours.known {
		ps.hours.add(os.hours.first+i, k*gs, os.hours.active[i]*gs)
	}
	if os.energyKnown {
		ps.acc.energy += os.energy
		ps.acc.energyKnown = true
	}
	ps.vramQ.merge(&os.vram)
	ps.activityQ.merge(&os.activity)
	st := &ps.stats
	st.Samples += os.stats.Samples
	st.Sum += os.stats.Sum
	st.BelowIdle += os.stats.BelowIdle
	st.AtOrAboveBurst += os.stats.AtOrAboveBurst
	ps.dramSum += os.dramSum
	ps.dramN += os.dramN
	ps.powerSum += os.powSum
	ps.powerN += os.powN
	if os.firstHour >= 0 {
		ps.countHeld(start.Add(time.Duration(os.firstHour)*time.Hour), os.firstHourShare*gs)
	}
	if t := os.firstHeld.time(); !t.IsZero() && (ps.attached.IsZero() || t.Before(ps.attached)) {
		ps.attached = t
	}
	if t := os.firstUse.time(); !t.IsZero() && (ps.firstUseAt.IsZero() || t.Before(ps.firstUseAt)) {
		ps.firstUseAt = t
	}
}

// reportFinalPods puts into the report the pods whose last device is the
// i-th, now accounted: their states are final.
func (br *bucketReport) reportFinalPods(i int) {
	for _, o := range br.owner {
		ref := o.podRef()
		if j, ok := br.last[ref]; !ok || j != i {
			continue
		}
		delete(br.last, ref) // the pod's other containers on this device
		ps := br.pods[ref]
		ps.usage.VRAMUsedMiB = ps.vramQ.percentiles()
		ps.usage.Activity = ps.activityQ.percentiles()
		ps.stats.P95 = ps.usage.Activity.P95.Value()
		if ps.dramN > 0 {
			ps.usage.DRAMActive = Known(ps.dramSum / ps.dramN)
		}
		if ps.powerN > 0 {
			ps.usage.PowerWatts = Known(ps.powerSum / ps.powerN)
		}
		br.as.add(ps)
		delete(br.pods, ref)
		br.pool.put(ps)
	}
}

// release drops the sums of the device's owners, now accounted, and has
// them collected now and then.
func (br *bucketReport) release(d *deviceSums) {
	// The device's owners are accounted: release their sums (most
	// of the account's memory) before the next device's pods are
	// built beside them.
	d.owners, d.sharedHours = nil, nil
	// And have them collected now and then. The collector paces
	// itself by what was live at its last cycle: the whole account
	// and the report's slices, made at their size at the start. It
	// would let the heap grow to twice that before it collects
	// again, and the report would be laid beside the sums it
	// replaces rather than in their memory. Every memory policy
	// collects (serve's too: the collections cost a refresh some CPU
	// and keep its process' peak far lower); a policy that hands
	// memory back collects as it does.
	if br.released += len(br.owner); br.released >= reportCollectOwners {
		if !br.a.Memory.HandBack(br.nOwners) {
			runtime.GC()
		}
		br.released = 0
	}
}

// flushUninstantiated accounts, once the devices move past a MIG GPU, the
// compute slices its instances leave uncovered as one more device,
// unallocated in the steps an instance was sampled in.
func (br *bucketReport) flushUninstantiated() {
	mig := &br.mig
	rest := 1 - mig.shares
	if mig.instances > 0 && rest > 1e-9 {
		price := math.NaN()
		if mig.price.Known() {
			price = mig.price.Value()
		}
		var sampled float64
		for _, s := range mig.sampled {
			sampled += s
		}
		var dev acc
		dev.unseen((br.windowSteps - sampled) * br.sec * rest)
		dev.free(sampled*br.sec*rest, price)
		du := DeviceUsage{Device: Device{Node: mig.device.Node, GPU: mig.device.GPU, UUID: mig.device.UUID, Model: mig.device.Model},
			Uninstantiated: true, Share: rest, PricePerHour: mig.price, Coverage: Known(sampled * br.sec / br.windowSeconds),
			Totals: dev.totals(), Capacity: dev.capacityTotals()}
		br.addDevice(du, &dev)
	}
	mig.instances, mig.shares, mig.sampled = 0, 0, map[int64]float64{}
}

// finish totals the data quality, the cluster and the hours, and
// assembles the report.
func (br *bucketReport) finish() *Report {
	br.flushUninstantiated()
	br.q.Gaps = max(br.q.Gaps, 0)
	br.q.MissingMetrics = missingMetrics(br.seenMetric[:])
	br.q.Warnings = append(br.q.Warnings, br.ranges.finish()...)
	br.total()
	br.r.Hourly = br.a.modelHours(br.pricing, br.sec)
	br.as.finish(br.nodes)
	// The account's sums are released now, but the collector's goal and
	// the process' memory are still those of the sums and the report
	// together: handed back, what the caller does next (the queue waits,
	// the JSON) starts from the report's size.
	br.a.Memory.HandBack(br.nOwners)
	return br.r
}

func quantileAmount(st ActivityStats) Amount {
	if st.Samples <= 0 {
		return Unknown
	}
	return Known(st.P95)
}

// quantileSet combines the percentiles of buckets into the window's: the
// maximum exactly, the p50 and p95 as percentiles of the buckets' own,
// weighted by their steps.
type quantileSet struct {
	p50, p95 []weighted
	max      Amount
}

// weighted is a bucket's percentile and its steps, in float32: a month of
// buckets per device and owner stays small, and MiB and ratios keep their
// precision (integers to 16 million).
type weighted struct{ value, weight float32 }

func (s *quantileSet) add(p Percentiles, weight float64) {
	if weight <= 0 {
		return
	}
	if p.P50.Known() {
		s.p50 = append(s.p50, weighted{float32(p.P50.Value()), float32(weight)})
	}
	if p.P95.Known() {
		s.p95 = append(s.p95, weighted{float32(p.P95.Value()), float32(weight)})
	}
	if p.Max.Known() && (!s.max.Known() || p.Max.Value() > s.max.Value()) {
		s.max = p.Max
	}
}

// merge adds o's percentiles to s. An empty list of s takes o's as it is
// rather than copy it (most pods hold one device: their owner's lists are
// theirs), so o must not be added to after: merging more appends past its
// length only, and the report releases the owners' sums as it merges them.
func (s *quantileSet) merge(o *quantileSet) {
	s.p50 = appendOrTake(s.p50, o.p50)
	s.p95 = appendOrTake(s.p95, o.p95)
	if o.max.Known() && (!s.max.Known() || o.max.Value() > s.max.Value()) {
		s.max = o.max
	}
}

func appendOrTake(s, o []weighted) []weighted {
	if len(s) == 0 {
		return o
	}
	return append(s, o...)
}

func (s *quantileSet) percentiles() Percentiles {
	return Percentiles{P50: weightedQuantile(s.p50, 0.5), P95: weightedQuantile(s.p95, 0.95), Max: s.max}
}

// widen gives the float64 that prints as the float32 does (0.85, not
// 0.8500000238418579).
func widen(x float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return v
}

// weightedQuantile is the nearest-rank q-quantile of weighted values.
func weightedQuantile(v []weighted, q float64) Amount {
	if len(v) == 0 {
		return Unknown
	}
	slices.SortFunc(v, func(a, b weighted) int { return cmp.Compare(a.value, b.value) })
	var total float64
	for _, x := range v {
		total += float64(x.weight)
	}
	var cum float64
	for _, x := range v {
		cum += float64(x.weight)
		if cum >= q*total-1e-9 {
			return Known(widen(x.value))
		}
	}
	return Known(widen(v[len(v)-1].value))
}

// modelHours prices the share-steps of the hour levels into GPUs per model
// and hour: a step is sec seconds, a MIG profile its share of a GPU.
func (a *BucketAccount) modelHours(pricing Pricing, sec float64) []ModelHours {
	levels := modelLevels{}
	keys := slices.SortedFunc(maps.Keys(a.levels), func(x, y levelKey) int {
		return strings.Compare(x.model+"\x00"+x.migProfile, y.model+"\x00"+y.migProfile)
	})
	for _, lk := range keys {
		l := a.levels[lk]
		d := Device{Model: lk.model, MIGProfile: lk.migProfile}
		share, _ := pricing.Share(d)
		levels.of(levelModel(pricing, d), a.hours).addScaled(l, sec*share)
	}
	return levels.modelHours(a.start, a.end)
}
