package usage

import (
	"fmt"
	"math"
	"sort"
)

// acc accumulates Totals and Capacity.
type acc struct {
	alloc, activeKnownAlloc, active        float64
	cost, costActiveKnown, priceKnownAlloc float64
	allocUnpriced                          float64
	idleCost                               float64
	energy                                 float64
	energyKnown                            bool
	// Capacity: unallocUnpriced is the unallocated time without a price.
	capacity, unalloc, unsampled float64
	unallocCost, unallocUnpriced float64
}

func (a *acc) add(b *acc) {
	a.alloc += b.alloc
	a.activeKnownAlloc += b.activeKnownAlloc
	a.active += b.active
	a.capacity += b.capacity
	a.unalloc += b.unalloc
	a.unsampled += b.unsampled
	a.unallocCost += b.unallocCost
	a.unallocUnpriced += b.unallocUnpriced
	a.cost += b.cost
	a.costActiveKnown += b.costActiveKnown
	a.priceKnownAlloc += b.priceKnownAlloc
	a.allocUnpriced += b.allocUnpriced
	a.idleCost += b.idleCost
	a.energy += b.energy
	a.energyKnown = a.energyKnown || b.energyKnown
}

// hold credits gpuSeconds of allocation with activity a (NaN if unknown)
// and price p per GPU-hour (NaN if unknown).
func (a *acc) hold(gpuSeconds, activity, price float64) {
	if math.IsNaN(activity) {
		a.holdSums(gpuSeconds, 0, 0, price)
		return
	}
	a.holdSums(gpuSeconds, gpuSeconds, gpuSeconds*activity, price)
}

// holdSums credits allocated GPU-seconds, of which activityKnown had an
// activity sample and integrate to active GPU-seconds, at price p per
// GPU-hour (NaN if unknown): hold summed over steps, as buckets give it.
func (a *acc) holdSums(allocated, activityKnown, active, price float64) {
	a.alloc += allocated
	a.activeKnownAlloc += activityKnown
	a.active += active
	if math.IsNaN(price) {
		a.allocUnpriced += allocated
		return
	}
	a.priceKnownAlloc += allocated
	a.cost += allocated * price / 3600
	a.costActiveKnown += activityKnown * price / 3600
	a.idleCost += (activityKnown - active) * price / 3600
}

// free credits gpuSeconds of capacity that was sampled and held by no pod,
// at price p per GPU-hour (NaN if unknown).
func (a *acc) free(gpuSeconds, price float64) {
	a.capacity += gpuSeconds
	a.unalloc += gpuSeconds
	if math.IsNaN(price) {
		a.unallocUnpriced += gpuSeconds
		return
	}
	a.unallocCost += gpuSeconds * price / 3600
}

// unseen credits gpuSeconds of capacity that had no sample.
func (a *acc) unseen(gpuSeconds float64) {
	a.capacity += gpuSeconds
	a.unsampled += gpuSeconds
}

func (a *acc) capacityTotals() Capacity {
	c := Capacity{CapacityGPUSeconds: Seconds(a.capacity), UnallocatedGPUSeconds: Seconds(a.unalloc), UnsampledGPUSeconds: Seconds(a.unsampled)}
	if a.unallocUnpriced == 0 {
		c.UnallocatedCost = Known(a.unallocCost)
	}
	return c
}

func (a *acc) totals() Totals {
	t := Totals{AllocatedGPUSeconds: Seconds(a.alloc), ActivityUnknownGPUSeconds: Seconds(a.alloc - a.activeKnownAlloc)}
	if a.alloc > 0 {
		t.ActivityCoverage = Known(a.activeKnownAlloc / a.alloc)
	}
	if a.activeKnownAlloc > 0 {
		t.ActiveGPUSeconds = Known(a.active)
		t.IdleAllocatedGPUSeconds = Known(a.activeKnownAlloc - a.active)
	} else if a.alloc == 0 {
		t.ActiveGPUSeconds, t.IdleAllocatedGPUSeconds = Known(0), Known(0)
	}
	// Money is known only where every allocated GPU-second has a price: a
	// sum over the priced part alone would pass for the whole.
	if a.allocUnpriced == 0 {
		t.Cost = Known(a.cost)
		if a.priceKnownAlloc > 0 {
			t.CostPerAllocatedGPUHour = Known(a.cost / (a.priceKnownAlloc / 3600))
		}
		if a.activeKnownAlloc > 0 || a.alloc == 0 {
			t.IdleCost = Known(a.idleCost)
		}
		if a.active > 0 {
			t.CostPerActiveGPUHour = Known(a.costActiveKnown / (a.active / 3600))
		}
	}
	if a.energyKnown {
		t.EnergyJoules = Known(a.energy)
	}
	return t
}

// metric indexes into the per-slot value buffers.
const (
	mGR = iota
	mSM
	mUtil
	mFBUsed
	mFBFree
	mDRAM
	mPower
	mEnergy
	nMetrics
)

var metricIndex = map[string]int{
	GREngineActive: mGR, SMActive: mSM, GPUUtil: mUtil, FBUsed: mFBUsed, FBFree: mFBFree,
	DRAMActive: mDRAM, PowerUsage: mPower, TotalEnergy: mEnergy,
}

// deviceTotals is what both accountings total as they go through the
// devices: the report's devices, the nodes' and the cluster's sums, and
// the device-seconds of the window and those sampled, for the coverage.
type deviceTotals struct {
	r                    *Report
	nodes                map[string]*acc
	cluster              acc
	coveredDeviceSeconds float64
	windowDeviceSeconds  float64
}

// addDevice adds a device's accounting to the report, its node and the
// cluster.
func (t *deviceTotals) addDevice(du DeviceUsage, dev *acc) {
	t.r.Devices = append(t.r.Devices, du)
	t.cluster.add(dev)
	na := t.nodes[du.Node]
	if na == nil {
		na = &acc{}
		t.nodes[du.Node] = na
	}
	na.add(dev)
}

// total sets the report's coverage and the cluster's totals.
func (t *deviceTotals) total() {
	if t.windowDeviceSeconds > 0 {
		t.r.Quality.Coverage = Known(t.coveredDeviceSeconds / t.windowDeviceSeconds)
	}
	t.r.Cluster = ClusterUsage{Totals: t.cluster.totals(), Capacity: t.cluster.capacityTotals()}
}

// shareAndPrice is the device's share of a GPU and its price per GPU-hour,
// as a float (NaN if unknown) and as the Amount; it warns in q where a MIG
// profile's share was read from its name.
func shareAndPrice(pricing Pricing, q *Quality, d Device) (share, price float64, perHour Amount) {
	share, shareKnown := pricing.Share(d)
	if !shareKnown {
		q.Warnings = append(q.Warnings, fmt.Sprintf("device %s: MIG profile %q is not in the catalogue; its share was read from the name as %.3g of a GPU", d.Key(), d.MIGProfile, share))
	}
	price = math.NaN()
	perHour = pricing.PerHour(d)
	if perHour.Known() {
		price = perHour.Value()
	}
	return share, price, perHour
}

// migInstances collects the instances of one MIG GPU: the first one's
// device and price, how many there are and their shares of the GPU.
type migInstances struct {
	device    Device
	instances int
	shares    float64
	price     Amount
}

// same reports whether d is an instance of the GPU being collected.
func (g *migInstances) same(d Device) bool {
	return g.instances > 0 && g.device.Node == d.Node && g.device.GPU == d.GPU && g.device.UUID == d.UUID
}

func (g *migInstances) add(d Device, share float64, price Amount) {
	if g.instances == 0 {
		g.device, g.price = d, price
	}
	g.instances++
	g.shares += share
}

func missingMetrics(seen []bool) []MissingMetric {
	var out []MissingMetric
	if !seen[mGR] && !seen[mSM] && !seen[mUtil] {
		out = append(out, MissingMetric{Metric: GREngineActive + ", " + SMActive + " and " + GPUUtil, Consequence: "active and idle GPU-seconds, cost per active GPU-hour and patterns are unknown"})
	}
	if !seen[mFBUsed] {
		out = append(out, MissingMetric{Metric: FBUsed, Consequence: "VRAM percentiles are unknown and first GPU use is read from activity alone"})
	}
	if !seen[mDRAM] {
		out = append(out, MissingMetric{Metric: DRAMActive, Consequence: "memory-bound pods cannot be told apart"})
	}
	if !seen[mPower] && !seen[mEnergy] {
		out = append(out, MissingMetric{Metric: PowerUsage, Consequence: "power and energy are unknown"})
	}
	return out
}

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	sort.Float64s(v)
	at := func(p float64) Amount {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return Known(v[max(0, min(i, len(v)-1))])
	}
	return Percentiles{P50: at(0.5), P95: at(0.95), Max: Known(v[len(v)-1])}
}
