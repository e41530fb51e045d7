package usage

import (
	"math"
	"sort"
	"time"
)

// Account integrates the series over the window. It never fails on bad
// samples: NaN, out-of-window samples, gaps and counter resets are counted
// in Quality. It fails only on a window it cannot divide into steps or
// that has more than MaxSteps, before it allocates anything.
//
// Its steps: group the series by device (groupByDevice), then per device
// put its samples into the window's slots (load), choose its activity
// metric (activitySource) and integrate its slots, crediting the owners
// present at each (integrate, hold); account the compute slices that MIG
// layouts leave uninstantiated (flushUninstantiated); total the cluster and
// the pods' percentiles (finish); and assemble the report.
func Account(in Input) (*Report, error) {
	w := in.Window
	if err := w.Check(); err != nil {
		return nil, err
	}
	r := &Report{Accounting: RawAccounting, Start: w.Start.UTC(), End: w.End.UTC(), StepSecond: Seconds(w.Step.Seconds()), Currency: in.Pricing.Currency()}
	r.Quality.ActivitySources = map[string]int{}
	devs, seenMetric := groupByDevice(in.Series)
	r.Quality.MissingMetrics = missingMetrics(seenMetric)
	if err := in.Pricing.checkPriced(deviceList(devs)); err != nil {
		return nil, err
	}
	a := newRawAccount(w, in.Pricing, r)
	for _, d := range devs {
		if d.device.MIGInstance == "" || !a.mig.same(d.device) {
			a.flushUninstantiated()
		}
		a.device(d)
	}
	a.flushUninstantiated()
	a.finish()
	r.Quality.Warnings = append(r.Quality.Warnings, a.ranges.finish()...)
	r.Health = health(in.Series, w)
	assemble(r, a.pods, a.nodes, in.App, in.Pods, func(tMs int64) float64 { return a.slotSeconds(a.slotOf(tMs)) })
	return r, nil
}

// ownerSeries is one owner of a device: the slots at which it was
// present.
type ownerSeries struct {
	owner   Owner
	dra     DRAHold
	present []bool
	// pod and container are resolved at the owner's first held slot on
	// the device, so the slot loop does no map lookups.
	pod       *podState
	container *acc
	// own is the owner's activity and framebuffer from the agent's
	// series; nil without them.
	own *ownFigures
}

// deviceInput is one device's series.
type deviceInput struct {
	device Device
	series []*Series
	// agent are the agent's per-pod series of the device.
	agent []*Series
}

// groupByDevice groups the series of known metrics by device, in the order
// of the devices' keys, and says which metrics had any series. The agent's
// series join the devices DCGM reports; they make none of their own.
func groupByDevice(series []Series) ([]*deviceInput, []bool) {
	byKey := map[string]*deviceInput{}
	var devs []*deviceInput
	seenMetric := make([]bool, nMetrics)
	for i := range series {
		s := &series[i]
		mi, ok := metricIndex[s.Metric]
		if !ok {
			continue
		}
		seenMetric[mi] = true
		k := s.Device.Key()
		d := byKey[k]
		if d == nil {
			d = &deviceInput{device: s.Device}
			byKey[k] = d
			devs = append(devs, d)
		}
		if d.device.Model == "" {
			d.device.Model = s.Device.Model
		}
		d.series = append(d.series, s)
	}
	for i := range series {
		if s := &series[i]; agentMetric(s.Metric) >= 0 {
			if d := byKey[s.Device.Key()]; d != nil {
				d.agent = append(d.agent, s)
			}
		}
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].device.Key() < devs[j].device.Key() })
	return devs, seenMetric
}

// rawAccount is Account's state while it goes through the devices: the
// window's slots, the accumulators of pods, nodes and the cluster, and
// per-device buffers reused from one device to the next.
type rawAccount struct {
	deviceTotals
	w                      Window
	slots                  int
	startMs, stepMs, endMs int64
	pricing                Pricing
	q                      *Quality
	pods                   map[podRef]*podState
	vals                   [][]float64
	sampled                []bool
	owners, present        []*ownerSeries
	shares                 []slotShare
	hasMetric              []bool
	vram, vramFree         []float64
	mig                    migGPU
	// hours is the window's hours; levels the GPUs per model and hour.
	hours  int
	levels modelLevels
	// oor are the device's values outside their metric's range; ranges
	// the warnings of the devices accounted.
	oor    outOfRange
	ranges rangeWarnings
}

func newRawAccount(w Window, pricing Pricing, r *Report) *rawAccount {
	slots := w.Slots()
	a := &rawAccount{w: w, slots: slots, startMs: w.Start.UnixMilli(), stepMs: w.Step.Milliseconds(), endMs: w.End.UnixMilli(),
		pricing: pricing, deviceTotals: deviceTotals{r: r, nodes: map[string]*acc{}}, q: &r.Quality,
		pods: map[podRef]*podState{},
		vals: make([][]float64, nMetrics), sampled: make([]bool, slots), present: make([]*ownerSeries, 0, 4),
		hasMetric: make([]bool, nMetrics), mig: migGPU{sampled: make([]bool, slots)},
		hours: hoursOf(w.Start, w.End), levels: modelLevels{}}
	for m := range a.vals {
		a.vals[m] = make([]float64, slots)
	}
	return a
}

// slotSeconds is the length of slot k: a step, or less for the last.
func (a *rawAccount) slotSeconds(k int) float64 {
	t := a.startMs + int64(k)*a.stepMs
	return float64(min(a.stepMs, a.endMs-t)) / 1000
}

func (a *rawAccount) slotOf(tMs int64) int { return int((tMs - a.startMs) / a.stepMs) }

// hourOf is the hour of the window slot k starts in.
func (a *rawAccount) hourOf(k int) int { return int(int64(k) * a.stepMs / hourMs) }

func (a *rawAccount) slotTime(k int) time.Time {
	return time.UnixMilli(a.startMs + int64(k)*a.stepMs).UTC()
}

// flushUninstantiated accounts, once the devices move past a MIG GPU, the
// compute slices its instances leave uncovered as one more device,
// unallocated whenever an instance was sampled.
func (a *rawAccount) flushUninstantiated() {
	mig := &a.mig
	rest := 1 - mig.shares
	if mig.instances == 0 || rest <= 1e-9 {
		mig.reset()
		return
	}
	price := math.NaN()
	if mig.price.Known() {
		price = mig.price.Value()
	}
	var dev acc
	var covered float64
	for k := 0; k < a.slots; k++ {
		sec := a.slotSeconds(k)
		if !mig.sampled[k] {
			dev.unseen(sec * rest)
			continue
		}
		covered += sec
		dev.free(sec*rest, price)
	}
	du := DeviceUsage{Device: Device{Node: mig.device.Node, GPU: mig.device.GPU, UUID: mig.device.UUID, Model: mig.device.Model},
		Uninstantiated: true, Share: rest, PricePerHour: mig.price, Coverage: Known(covered / a.w.End.Sub(a.w.Start).Seconds()),
		Totals: dev.totals(), Capacity: dev.capacityTotals()}
	a.addDevice(du, &dev)
	mig.reset()
}

// device accounts one device: its samples, its activity metric, its slots.
func (a *rawAccount) device(d *deviceInput) {
	a.load(d)
	share, price, pa := shareAndPrice(a.pricing, a.q, d.device)
	source := a.activitySource()
	du := DeviceUsage{Device: d.device, Share: share, PricePerHour: pa}
	for _, o := range a.owners {
		if id := o.dra.DeviceID(); id != "" && du.DRADevice == "" {
			du.DRADevice = id
		}
	}
	if source >= 0 {
		du.ActivitySource = ActivitySources[source]
		a.q.ActivitySources[du.ActivitySource]++
	} else {
		a.q.ActivitySources["none"]++
	}
	dev := a.integrate(d.device, &du, share, price, source)
	du.Totals, du.Capacity = dev.totals(), dev.capacityTotals()
	a.addDevice(du, &dev)
	a.ranges.device(d.device, a.oor)
	a.oor = nil
	if d.device.MIGInstance != "" {
		a.mig.addInstance(d.device, share, pa, a.sampled)
	}
}

// load puts the device's samples into the slots: one value per metric and
// slot (NaN where none), which slots had any sample, and per owner the
// slots at which it was present, sorted by owner. Out-of-window, NaN and
// infinite samples are counted in Quality; values outside their metric's
// range (MetricRange) are noted for its warnings.
func (a *rawAccount) load(d *deviceInput) {
	for _, v := range a.vals {
		for k := range v {
			v[k] = math.NaN()
		}
	}
	clear(a.sampled)
	clear(a.hasMetric)
	a.owners = a.owners[:0]
	ownerIdx := map[Owner]*ownerSeries{}
	for _, s := range d.series {
		mi := metricIndex[s.Metric]
		var os *ownerSeries
		if !s.Owner.IsZero() {
			os = ownerIdx[s.Owner]
			if os == nil {
				os = &ownerSeries{owner: s.Owner, present: make([]bool, a.slots)}
				ownerIdx[s.Owner] = os
				a.owners = append(a.owners, os)
			}
			if os.dra.IsZero() {
				os.dra = s.DRA
			}
		}
		v := a.vals[mi]
		for _, smp := range s.Samples {
			a.q.Samples++
			if smp.TimeMs < a.startMs || smp.TimeMs >= a.endMs {
				a.q.OutOfWindow++
				continue
			}
			k := a.slotOf(smp.TimeMs)
			a.sampled[k] = true
			if os != nil {
				os.present[k] = true
			}
			if math.IsNaN(smp.Value) || math.IsInf(smp.Value, 0) {
				a.q.NaNSamples++
				continue
			}
			v[k] = smp.Value
			a.hasMetric[mi] = true
			if smp.Value < metricLo[mi] || smp.Value > metricHi[mi] {
				a.oor.add(s.Metric, smp.Value, a.w.Start.Add(time.Duration(a.hourOf(k))*time.Hour))
			}
		}
	}
	sort.Slice(a.owners, func(i, j int) bool {
		return compareOwnerKeys(a.owners[i].owner, a.owners[j].owner) < 0
	})
	a.loadOwn(d, ownerIdx)
}

// loadOwn puts the agent's series of the device into the slots of the
// owners DCGM reports on it; the series of other owners are not read.
func (a *rawAccount) loadOwn(d *deviceInput, owners map[Owner]*ownerSeries) {
	for _, s := range d.agent {
		o := owners[s.Owner]
		if o == nil {
			continue
		}
		if o.own == nil {
			o.own = newOwnFigures(a.slots)
		}
		dst := o.own.sm
		if agentMetric(s.Metric) == 1 {
			dst = o.own.fb
		}
		for _, smp := range s.Samples {
			if smp.TimeMs < a.startMs || smp.TimeMs >= a.endMs || math.IsNaN(smp.Value) || math.IsInf(smp.Value, 0) {
				continue
			}
			dst[a.slotOf(smp.TimeMs)] = smp.Value
		}
	}
	for _, o := range a.owners {
		if o.own != nil {
			bridgeOneStep(o.own.sm)
			bridgeOneStep(o.own.fb)
		}
	}
}

// bridgeOneStep gives a slot without a value that of a neighbour with
// one, the one before first: the agent and dcgm-exporter are scraped at
// different moments, so an owner's first and last samples of each may
// fall one step apart. Only original values are copied, each at most one
// step into a gap: a gap of three or more steps stays one in its middle.
func bridgeOneStep(v []float64) {
	prev := math.NaN() // v[k-1] as it was before bridging
	for k := range v {
		cur := v[k]
		if math.IsNaN(cur) {
			switch {
			case !math.IsNaN(prev):
				v[k] = prev
			case k+1 < len(v):
				v[k] = v[k+1]
			}
		}
		prev = cur
	}
}

// activitySource is the most preferred activity metric the device has a
// value of (GR engine, SM, GPU utilisation), -1 if none.
func (a *rawAccount) activitySource() int {
	for _, m := range []int{mGR, mSM, mUtil} {
		if a.hasMetric[m] {
			return m
		}
	}
	return -1
}

// integrate goes through the device's slots: unsampled ones are capacity
// of unknown use; sampled ones are unallocated, or held by the owners
// present, who share the device equally; it sets the device's coverage,
// VRAM and power figures and returns its accumulator.
func (a *rawAccount) integrate(device Device, du *DeviceUsage, share, price float64, source int) acc {
	var dev acc
	var covered float64
	a.vram, a.vramFree = a.vram[:0], a.vramFree[:0]
	var powerSum float64
	var powerN int
	lastEnergy := math.NaN()
	wasPresent, inGap := false, false
	var sharers sharers
	vals := a.vals
	levels := a.levels.of(levelModel(a.pricing, device), a.hours)
	for k := 0; k < a.slots; k++ {
		sec := a.slotSeconds(k)
		a.windowDeviceSeconds += sec * share
		if !a.sampled[k] {
			dev.unseen(sec * share)
			lastEnergy = math.NaN()
			if wasPresent {
				inGap = true
			}
			continue
		}
		if inGap {
			a.q.Gaps++
			inGap = false
		}
		wasPresent = true
		covered += sec

		activity := math.NaN()
		if source >= 0 {
			activity = vals[source][k]
			if source == mUtil {
				activity /= 100
			}
			activity = math.Max(0, math.Min(1, activity))
		}
		fb := vals[mFBUsed][k]
		if !math.IsNaN(fb) {
			a.vram = append(a.vram, fb)
		}
		if free := vals[mFBFree][k]; !math.IsNaN(free) {
			a.vramFree = append(a.vramFree, free)
		}
		power := vals[mPower][k]
		if !math.IsNaN(power) {
			powerSum += power
			powerN++
		}
		energy := a.slotEnergy(k, power, sec, lastEnergy)
		lastEnergy = vals[mEnergy][k]
		if !math.IsNaN(energy) {
			dev.energy += energy
			dev.energyKnown = true
		}

		a.present = a.present[:0]
		for _, o := range a.owners {
			if o.present[k] {
				a.resolve(o, device, du.ActivitySource, k)
				a.present = append(a.present, o)
			}
		}
		if len(a.present) == 0 {
			dev.free(sec*share, price)
			continue
		}
		dev.capacity += sec * share
		h := a.hourOf(k)
		// The owners are sorted by pod: a pod's containers are adjacent.
		shared := a.present[len(a.present)-1].pod != a.present[0].pod
		perProcess := a.split(k, sec, share, activity, fb, energy, shared)
		for i, o := range a.present {
			sh := a.shares[i]
			dev.hold(sh.gs, activity, price)
			known, active := 0.0, 0.0
			if !math.IsNaN(activity) {
				known, active = sh.gs, sh.gs*activity
			}
			levels.add(h, sh.gs, known, active)
			a.hold(o, device, du.ActivitySource, k, sh, price, power)
			if !math.IsNaN(sh.activity) {
				known, active = sh.gs, sh.gs*sh.activity
			}
			o.pod.hours.add(h, known, active)
			if shared {
				o.pod.countShared(sec, perProcess)
			}
		}
		if shared {
			du.SharedSeconds += Seconds(sec)
			if perProcess {
				du.PerProcessSeconds += Seconds(sec)
			}
			for _, o := range a.present {
				sharers.add(h, o.pod)
			}
		}
	}
	du.SharedBy = sharers.settle()
	du.Coverage = Known(covered / a.w.End.Sub(a.w.Start).Seconds())
	a.coveredDeviceSeconds += covered * share
	du.VRAMUsedMiB = percentiles(a.vram)
	du.VRAMFreeMiB = percentiles(a.vramFree)
	if powerN > 0 {
		du.PowerWatts = Known(powerSum / float64(powerN))
	}
	return dev
}

// slotEnergy is the device's energy in slot k: the counter's increase
// since the previous step (all of it after a reset), else power x time; a
// counter after a gap or a NaN tells nothing about this step alone. NaN if
// neither is known.
func (a *rawAccount) slotEnergy(k int, power, sec, lastEnergy float64) float64 {
	if e := a.vals[mEnergy][k]; !math.IsNaN(e) && !math.IsNaN(lastEnergy) {
		if e < lastEnergy {
			a.q.CounterResets++
			return e / 1000
		}
		return (e - lastEnergy) / 1000
	}
	if !math.IsNaN(power) {
		return power * sec
	}
	return math.NaN()
}

// resolve finds the pod and container of owner o at its first slot on
// device, k.
func (a *rawAccount) resolve(o *ownerSeries, device Device, source string, k int) {
	if o.pod != nil {
		return
	}
	o.pod, o.container = resolveOwner(a.pods, nil, o.owner, device, device.Key(), source, k, a.slots)
	if c := o.dra.Claim(); c != "" {
		o.pod.claim(c)
	}
}

// hold credits owner o (resolved), present on device at slot k, with its share of
// the slot (GPU-seconds at an activity, its own activity, framebuffer and
// energy, NaN where unknown) at the slot's price, and the slot's DRAM and
// power samples.
func (a *rawAccount) hold(o *ownerSeries, device Device, source string, k int, sh slotShare, price, power float64) {
	gs, activity, energy, fb := sh.gs, sh.activity, sh.energy, sh.fb
	ps, ca := o.pod, o.container
	ps.acc.hold(gs, activity, price)
	ca.hold(gs, activity, price)
	if !math.IsNaN(energy) {
		ps.acc.energy += energy
		ps.acc.energyKnown = true
		ca.energy += energy
		ca.energyKnown = true
	}
	if !math.IsNaN(sh.own) {
		ps.activity = append(ps.activity, sh.own)
	}
	if !math.IsNaN(fb) {
		ps.vram = append(ps.vram, fb)
	}
	if v := a.vals[mDRAM][k]; !math.IsNaN(v) {
		ps.dramSum += v
		ps.dramN++
	}
	if !math.IsNaN(power) {
		ps.powerSum += power
		ps.powerN++
	}
	ps.countHeld(a.w.Start.Add(time.Duration(a.hourOf(k))*time.Hour), gs)
	used := (!math.IsNaN(sh.own) && sh.own > ActivityIdleFloor) || (!math.IsNaN(fb) && fb > FBIdleFloorMiB)
	if used && (ps.firstUse < 0 || k < ps.firstUse) {
		ps.firstUse = k
	}
}

// finish totals the data quality and the cluster, and reads each pod's
// percentiles, means, pattern statistics and first times from its samples.
func (a *rawAccount) finish() {
	a.total()
	a.r.Hourly = a.levels.modelHours(a.w.Start, a.w.End)
	for _, ps := range a.pods {
		ps.usage.VRAMUsedMiB = percentiles(ps.vram)
		ps.usage.Activity = percentiles(ps.activity)
		if ps.dramN > 0 {
			ps.usage.DRAMActive = Known(ps.dramSum / ps.dramN)
		}
		if ps.powerN > 0 {
			ps.usage.PowerWatts = Known(ps.powerSum / ps.powerN)
		}
		ps.stats = activityStats(ps.activity)
		ps.attached = a.slotTime(ps.firstSlot)
		if ps.firstUse >= 0 {
			ps.firstUseAt = a.slotTime(ps.firstUse)
		}
	}
}

// migGPU collects the instances of one MIG GPU and the slots in which any
// of them was sampled.
type migGPU struct {
	migInstances
	sampled []bool
}

func (g *migGPU) addInstance(d Device, share float64, price Amount, sampled []bool) {
	g.add(d, share, price)
	for k, s := range sampled {
		g.sampled[k] = g.sampled[k] || s
	}
}

func (g *migGPU) reset() {
	g.instances, g.shares = 0, 0
	clear(g.sampled)
}

func deviceList(devs []*deviceInput) []Device {
	out := make([]Device, len(devs))
	for i, d := range devs {
		out[i] = d.device
	}
	return out
}
