package usage

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
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

	// HeldShareSteps sums 1/n over the held steps, n the owners present at
	// that step (time-slicing splits a device equally);
	// ActivityKnownShareSteps sums it over the held steps with a known
	// activity, and ActiveShareSteps sums activity/n over them. Times the
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
	step, err := checkBuckets(in)
	if err != nil {
		return nil, err
	}
	sec := step.Seconds()
	windowSeconds := in.End.Sub(in.Start).Seconds()
	windowSteps := windowSeconds / sec

	r := &Report{Start: in.Start.UTC(), End: in.End.UTC(), StepSecond: Seconds(sec), Currency: in.Pricing.Currency()}
	q := &r.Quality
	q.ActivitySources = map[string]int{}

	type deviceBuckets struct {
		device Device
		own    []*Bucket
		owners []*Bucket
	}
	byKey := map[string]*deviceBuckets{}
	for i := range in.Buckets {
		b := &in.Buckets[i]
		k := b.Device.Key()
		d := byKey[k]
		if d == nil {
			d = &deviceBuckets{device: b.Device}
			byKey[k] = d
		}
		if d.device.Model == "" {
			d.device.Model = b.Device.Model
		}
		if b.Owner.IsZero() {
			d.own = append(d.own, b)
		} else {
			d.owners = append(d.owners, b)
		}
	}
	keys := slices.Sorted(maps.Keys(byKey))
	devs := make([]Device, len(keys))
	for i, k := range keys {
		devs[i] = byKey[k].device
	}
	if err := in.Pricing.checkPriced(devs); err != nil {
		return nil, err
	}

	seenMetric := make([]bool, nMetrics)
	pods := map[string]*podState{}
	nodes := map[string]*acc{}
	nodePods := map[string]map[string]bool{}
	var cluster acc
	var coveredDeviceSeconds, windowDeviceSeconds float64
	type podAgg struct {
		vram, activity quantileSet
		dramSum, dramN float64
		powSum, powN   float64
	}
	podAggs := map[string]*podAgg{}

	addDevice := func(du DeviceUsage, dev *acc) {
		r.Devices = append(r.Devices, du)
		cluster.add(dev)
		na := nodes[du.Node]
		if na == nil {
			na = &acc{}
			nodes[du.Node] = na
		}
		na.add(dev)
	}
	// The instances of the MIG GPU being accounted, with the most steps any
	// of them was sampled in each bucket.
	var mig struct {
		device    Device
		instances int
		shares    float64
		price     Amount
		sampled   map[int64]float64
	}
	flushUninstantiated := func() {
		rest := 1 - mig.shares
		if mig.instances > 0 && rest > 1e-9 {
			price := math.NaN()
			if mig.price.Known {
				price = mig.price.Value
			}
			var sampled float64
			for _, s := range mig.sampled {
				sampled += s
			}
			var dev acc
			dev.unseen((windowSteps - sampled) * sec * rest)
			dev.free(sampled*sec*rest, price)
			du := DeviceUsage{Device: Device{Node: mig.device.Node, GPU: mig.device.GPU, UUID: mig.device.UUID, Model: mig.device.Model},
				Uninstantiated: true, Share: rest, PricePerHour: mig.price, Coverage: Known(sampled * sec / windowSeconds),
				Totals: dev.totals(), Capacity: dev.capacityTotals()}
			addDevice(du, &dev)
		}
		mig.instances, mig.shares, mig.sampled = 0, 0, map[int64]float64{}
	}
	mig.sampled = map[int64]float64{}

	for _, key := range keys {
		d := byKey[key]
		if d.device.MIGInstance == "" || mig.instances == 0 || mig.device.Node != d.device.Node || mig.device.GPU != d.device.GPU || mig.device.UUID != d.device.UUID {
			flushUninstantiated()
		}
		share, shareKnown := in.Pricing.Share(d.device)
		if !shareKnown {
			q.Warnings = append(q.Warnings, fmt.Sprintf("device %s: MIG profile %q is not in the catalogue; its share was read from the name as %.3g of a GPU", d.device.Key(), d.device.MIGProfile, share))
		}
		price := math.NaN()
		pa := in.Pricing.PerHour(d.device)
		if pa.Known {
			price = pa.Value
		}
		du := DeviceUsage{Device: d.device, Share: share, PricePerHour: pa}

		var dev acc
		var sampled, held, powSum, powN float64
		var vram, vramFree quantileSet
		sourceRank := len(ActivitySources)
		firstSeen := false
		for _, b := range d.own {
			sampled += b.SampledSteps
			held += b.HeldSteps
			powSum += b.PowerSum
			powN += b.PowerSteps
			vram.add(b.VRAMUsedMiB, b.SampledSteps)
			vramFree.add(b.VRAMFreeMiB, b.SampledSteps)
			if b.EnergyJoules.Known {
				dev.energy += b.EnergyJoules.Value
				dev.energyKnown = true
			}
			if i := slices.Index(ActivitySources, b.ActivitySource); i >= 0 && i < sourceRank {
				sourceRank = i
			}
			q.Samples += int(b.Samples)
			q.NaNSamples += int(b.NaNSamples)
			q.CounterResets += int(b.CounterResets)
			q.Gaps += int(b.SampledAfterGap)
			if b.SampledAfterGap > 0 {
				firstSeen = true
			}
			for _, m := range b.Metrics {
				if mi, ok := metricIndex[m]; ok {
					seenMetric[mi] = true
				}
			}
			if d.device.MIGInstance != "" {
				t := b.Start.UnixMilli()
				mig.sampled[t] = max(mig.sampled[t], b.SampledSteps)
			}
		}
		if firstSeen {
			q.Gaps-- // the device's first appearance is no gap
		}
		if sourceRank < len(ActivitySources) {
			du.ActivitySource = ActivitySources[sourceRank]
			q.ActivitySources[du.ActivitySource]++
		} else {
			q.ActivitySources["none"]++
		}
		held = min(held, sampled)
		dev.unseen((windowSteps - sampled) * sec * share)
		dev.free((sampled-held)*sec*share, price)
		dev.capacity += held * sec * share
		windowDeviceSeconds += windowSeconds * share
		coveredDeviceSeconds += sampled * sec * share

		for _, b := range d.owners {
			gs := sec * share
			allocated, known, active := b.HeldShareSteps*gs, b.ActivityKnownShareSteps*gs, b.ActiveShareSteps*gs
			dev.holdSums(allocated, known, active, price)
			ps, ca := resolveOwner(pods, b.Owner, d.device, du.ActivitySource, 0, 0)
			if nodePods[d.device.Node] == nil {
				nodePods[d.device.Node] = map[string]bool{}
			}
			nodePods[d.device.Node][b.Owner.PodKey()] = true
			ps.acc.holdSums(allocated, known, active, price)
			ca.holdSums(allocated, known, active, price)
			if b.EnergyJoules.Known {
				ps.acc.energy += b.EnergyJoules.Value
				ps.acc.energyKnown = true
				ca.energy += b.EnergyJoules.Value
				ca.energyKnown = true
			}
			pa := podAggs[b.Owner.PodKey()]
			if pa == nil {
				pa = &podAgg{}
				podAggs[b.Owner.PodKey()] = pa
			}
			pa.vram.add(b.VRAMUsedMiB, b.HeldSteps)
			pa.activity.add(Percentiles{P50: b.ActivityP50, P95: quantileAmount(b.Activity), Max: b.ActivityMax}, b.Activity.Samples)
			st := &ps.stats
			st.Samples += b.Activity.Samples
			st.Sum += b.Activity.Sum
			st.BelowIdle += b.Activity.BelowIdle
			st.AtOrAboveBurst += b.Activity.AtOrAboveBurst
			pa.dramSum += b.DRAMSum
			pa.dramN += b.DRAMSteps
			pa.powSum += b.PowerSum
			pa.powN += b.PowerSteps
			if !b.FirstHeld.IsZero() && (ps.attached.IsZero() || b.FirstHeld.Before(ps.attached)) {
				ps.attached = b.FirstHeld.UTC()
			}
			if !b.FirstUse.IsZero() && (ps.firstUseAt.IsZero() || b.FirstUse.Before(ps.firstUseAt)) {
				ps.firstUseAt = b.FirstUse.UTC()
			}
		}
		du.Coverage = Known(sampled * sec / windowSeconds)
		du.VRAMUsedMiB = vram.percentiles()
		du.VRAMFreeMiB = vramFree.percentiles()
		if powN > 0 {
			du.PowerWatts = Known(powSum / powN)
		}
		du.Totals, du.Capacity = dev.totals(), dev.capacityTotals()
		addDevice(du, &dev)
		if d.device.MIGInstance != "" {
			if mig.instances == 0 {
				mig.device, mig.price = d.device, pa
			}
			mig.instances++
			mig.shares += share
		}
	}
	flushUninstantiated()
	q.Gaps = max(q.Gaps, 0)
	q.MissingMetrics = missingMetrics(seenMetric)
	if windowDeviceSeconds > 0 {
		q.Coverage = Known(coveredDeviceSeconds / windowDeviceSeconds)
	}
	r.Cluster = ClusterUsage{Totals: cluster.totals(), Capacity: cluster.capacityTotals()}

	for key, ps := range pods {
		pa := podAggs[key]
		ps.usage.VRAMUsedMiB = pa.vram.percentiles()
		ps.usage.Activity = pa.activity.percentiles()
		ps.stats.P95 = ps.usage.Activity.P95.Value
		if pa.dramN > 0 {
			ps.usage.DRAMActive = Known(pa.dramSum / pa.dramN)
		}
		if pa.powN > 0 {
			ps.usage.PowerWatts = Known(pa.powSum / pa.powN)
		}
	}
	appStep := in.AppStep
	if appStep <= 0 {
		appStep = time.Hour
	}
	assemble(r, pods, nodes, nodePods, in.App, in.Pods, func(int64) float64 { return appStep.Seconds() })
	return r, nil
}

// checkBuckets refuses buckets that do not fit the window, and returns
// their common step.
func checkBuckets(in BucketInput) (time.Duration, error) {
	if !in.End.After(in.Start) {
		return 0, fmt.Errorf("bucket window %s..%s is empty; give an end after the start", in.Start.Format(time.RFC3339), in.End.Format(time.RFC3339))
	}
	var step time.Duration
	for i := range in.Buckets {
		b := &in.Buckets[i]
		where := fmt.Sprintf("bucket %d (%s at %s)", i, b.Device.Key(), b.Start.Format(time.RFC3339))
		switch {
		case b.Step <= 0 || b.Length <= 0 || b.Length%b.Step != 0:
			return 0, fmt.Errorf("%s: step %s and length %s; want a positive step that divides the length, such as 30s and 1h", where, b.Step, b.Length)
		case step != 0 && b.Step != step:
			return 0, fmt.Errorf("%s: step %s, but other buckets have %s; load every bucket at one step", where, b.Step, step)
		case b.Start.Before(in.Start) || b.Start.Add(b.Length).After(in.End):
			return 0, fmt.Errorf("%s: [%s, %s) is not inside the window %s..%s; load the buckets of this window only", where, b.Start.Format(time.RFC3339), b.Start.Add(b.Length).Format(time.RFC3339), in.Start.Format(time.RFC3339), in.End.Format(time.RFC3339))
		}
		step = b.Step
	}
	if step == 0 {
		// No buckets: nothing was sampled; the window still has a length.
		step = in.End.Sub(in.Start)
	}
	if in.End.Sub(in.Start)%step != 0 {
		return 0, fmt.Errorf("bucket window %s..%s is not a whole number of steps of %s; give a window of whole buckets", in.Start.Format(time.RFC3339), in.End.Format(time.RFC3339), step)
	}
	return step, nil
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

type weighted struct{ value, weight float64 }

func (s *quantileSet) add(p Percentiles, weight float64) {
	if weight <= 0 {
		return
	}
	if p.P50.Known {
		s.p50 = append(s.p50, weighted{p.P50.Value, weight})
	}
	if p.P95.Known {
		s.p95 = append(s.p95, weighted{p.P95.Value, weight})
	}
	if p.Max.Known && (!s.max.Known || p.Max.Value > s.max.Value) {
		s.max = p.Max
	}
}

func (s *quantileSet) percentiles() Percentiles {
	return Percentiles{P50: weightedQuantile(s.p50, 0.5), P95: weightedQuantile(s.p95, 0.95), Max: s.max}
}

// weightedQuantile is the nearest-rank q-quantile of weighted values.
func weightedQuantile(v []weighted, q float64) Amount {
	if len(v) == 0 {
		return Unknown
	}
	sort.Slice(v, func(i, j int) bool { return v[i].value < v[j].value })
	var total float64
	for _, x := range v {
		total += x.weight
	}
	var cum float64
	for _, x := range v {
		cum += x.weight
		if cum >= q*total-1e-9 {
			return Known(x.value)
		}
	}
	return Known(v[len(v)-1].value)
}
