package usage

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// Idle floors: below them a GPU counts as unused. A CUDA context alone
// takes a few hundred MiB, so framebuffer above FBIdleFloorMiB means a
// process has touched the GPU.
const (
	ActivityIdleFloor = 0.05
	FBIdleFloorMiB    = 256
)

// Input is everything Account needs.
type Input struct {
	Window  Window
	Series  []Series
	Pricing Pricing
	// App holds the user's application metrics, optional.
	App []AppSeries
	// Pods holds Kubernetes life-cycle times for start-up phases, optional.
	Pods []PodEvents
}

// AppSeries is one application metric (any PromQL the user names) for one
// pod, or for a whole namespace when Pod is empty. Its values are taken as
// rates per second (tokens/s, requests/s) for totals; a gauge such as queue
// depth or latency is read from Mean.
type AppSeries struct {
	Name      string
	Namespace string
	Pod       string
	Samples   []Sample
}

// PodEvents are a pod's Kubernetes life-cycle times; zero means unknown.
type PodEvents struct {
	Namespace, Pod string
	// Workload names the pod's owner in its namespace (the Deployment,
	// StatefulSet or Job), for per-workload start-up figures; "" groups
	// the pod alone.
	Workload  string
	Created   time.Time
	Scheduled time.Time
	// ContainersStarted is when the last of the pod's app containers
	// started running (kube-state-metrics' kube_pod_container_state_started,
	// the kubelet's state.running.startedAt).
	ContainersStarted time.Time
	ContainersReady   time.Time
	Ready             time.Time
	// ImagePulls are the kubelet's Pulled events of the pod's containers,
	// init containers included.
	ImagePulls []ImagePull
	// Storage is where the pod's model weights come from; Kind "" when the
	// pod's spec was not seen.
	Storage ModelStorage
}

// ImagePull is one of the kubelet's Pulled events: an image pulled for a
// container (with the time and size the kubelet states), or found present.
type ImagePull struct {
	Container string
	Image     string
	// At is when the event was recorded: the pull's end.
	At time.Time
	// Present: the image was already on the node, nothing was pulled.
	Present bool
	// PullSeconds is the pull's time without waiting in the kubelet's pull
	// queue; WaitSeconds includes the wait (both 0 when Present).
	PullSeconds, WaitSeconds float64
	// SizeBytes is the image size the kubelet states; 0 when not stated.
	SizeBytes int64
}

// Totals are the GPU-seconds and money of a device, container, pod,
// namespace, node or the cluster over the window.
type Totals struct {
	AllocatedGPUSeconds Seconds `json:"allocatedGPUSeconds"`
	// ActiveGPUSeconds integrates activity over the allocated time that
	// had an activity sample; ActivityCoverage says how much that was.
	ActiveGPUSeconds Amount `json:"activeGPUSeconds"`
	// IdleAllocatedGPUSeconds is allocated minus active, over the same
	// covered time.
	IdleAllocatedGPUSeconds Amount `json:"idleAllocatedGPUSeconds"`
	// ActivityUnknownGPUSeconds is the allocated time without an activity
	// sample: AllocatedGPUSeconds = ActiveGPUSeconds +
	// IdleAllocatedGPUSeconds + ActivityUnknownGPUSeconds.
	ActivityUnknownGPUSeconds Seconds `json:"activityUnknownGPUSeconds"`
	// ActivityCoverage is the ratio (0..1) of allocated GPU-seconds that
	// had an activity sample.
	ActivityCoverage        Amount `json:"activityCoverage"`
	Cost                    Amount `json:"cost"`
	IdleCost                Amount `json:"idleCost"`
	CostPerAllocatedGPUHour Amount `json:"costPerAllocatedGPUHour"`
	// CostPerActiveGPUHour is unknown where nothing was active: there is
	// no active hour to divide by. Every money figure is unknown where
	// some allocated time has no price.
	CostPerActiveGPUHour Amount `json:"costPerActiveGPUHour"`
	EnergyJoules         Amount `json:"energyJoules"`
}

// Capacity is the GPU time that a device, a node or the cluster offered
// over the window and where it went: CapacityGPUSeconds =
// AllocatedGPUSeconds + UnallocatedGPUSeconds + UnsampledGPUSeconds. Pods,
// containers and namespaces hold capacity but own none, so they have no
// Capacity.
type Capacity struct {
	// CapacityGPUSeconds is the device's share of a GPU times the window.
	CapacityGPUSeconds Seconds `json:"capacityGPUSeconds"`
	// UnallocatedGPUSeconds were sampled and held by no pod, the compute
	// slices that a MIG layout leaves uninstantiated included.
	UnallocatedGPUSeconds Seconds `json:"unallocatedGPUSeconds"`
	// UnsampledGPUSeconds had no sample at all: whether a pod held them is
	// unknown.
	UnsampledGPUSeconds Seconds `json:"unsampledGPUSeconds"`
	// UnallocatedCost is what the unallocated GPU-seconds cost; unknown
	// when some of them have no price.
	UnallocatedCost Amount `json:"unallocatedCost"`
}

// Percentiles of a quantity over the samples of the window.
type Percentiles struct {
	P50 Amount `json:"p50"`
	P95 Amount `json:"p95"`
	Max Amount `json:"max"`
}

// DeviceUsage is the accounting of one GPU or MIG slice, or of the compute
// slices of a MIG GPU that no instance covers.
type DeviceUsage struct {
	Device
	// Uninstantiated marks the compute slices of a MIG GPU that its layout
	// leaves without an instance (1g of a 3g+2g+1g H100): never allocated,
	// still paid for. It has no series of its own; it counts as sampled
	// whenever an instance of its GPU was.
	Uninstantiated bool `json:"uninstantiated"`
	// Share is the fraction of a whole GPU the device stands for.
	Share float64 `json:"share"`
	// ActivitySource is the metric activity was read from, "" if none.
	ActivitySource string `json:"activitySource"`
	// Coverage is the ratio (0..1) of the window with any sample.
	Coverage     Amount      `json:"coverage"`
	PricePerHour Amount      `json:"pricePerHour"`
	VRAMUsedMiB  Percentiles `json:"vramUsedMiB"`
	VRAMFreeMiB  Percentiles `json:"vramFreeMiB"`
	PowerWatts   Amount      `json:"powerWattsMean"`
	// DRADevice is the DRA device ("driver/pool/device") that
	// dcgm-exporter's DRA labels name on the device's owned series; "" for
	// a GPU of the device plugin, or an exporter without those labels.
	DRADevice string `json:"draDevice,omitempty"`
	// SharedSeconds are the seconds at which two or more pods held the
	// device at once (time-slicing, MPS, a DRA device allocated to several
	// claims, or one claim shared by several pods); SharedBy are those
	// pods ("namespace/pod"), sorted.
	SharedSeconds Seconds  `json:"sharedSeconds"`
	SharedBy      []string `json:"sharedBy,omitempty"`
	Totals
	Capacity
}

// ContainerUsage is the accounting of one container.
type ContainerUsage struct {
	Owner
	Totals
}

// PodUsage is the accounting of one pod that held a GPU in the window.
type PodUsage struct {
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	Node      string   `json:"node"`
	Devices   []string `json:"devices"`
	// ActivitySources lists the metrics its devices' activity came from.
	ActivitySources []string    `json:"activitySources"`
	VRAMUsedMiB     Percentiles `json:"vramUsedMiB"`
	Activity        Percentiles `json:"activity"`
	DRAMActive      Amount      `json:"dramActiveMean"`
	PowerWatts      Amount      `json:"powerWattsMean"`
	Pattern         Pattern     `json:"pattern"`
	Startup         Startup     `json:"startup"`
	App             []AppUsage  `json:"app,omitempty"`
	// HourlyActivity is the mean activity of the pod's GPUs in each hour of
	// the window from FirstHour to its last hour with a known activity
	// (active over activity-known GPU-seconds in that hour, 4 decimals); an
	// hour between in which the pod held no GPU, or none with a known
	// activity, counts 0: the pod did no work then. Nil when no activity
	// was known at all.
	HourlyActivity []float64 `json:"hourlyActivity,omitempty"`
	// FirstHour is the hour of the window that HourlyActivity starts at:
	// the first with a known activity (0 is the window's first hour).
	FirstHour int `json:"firstHour,omitempty"`
	// Claims are the ResourceClaims ("namespace/name") that dcgm-exporter's
	// DRA labels name on the pod's series, sorted.
	Claims []string `json:"claims,omitempty"`
	// SharedWith are the other pods that held one of the pod's GPUs at a
	// step at which two or more pods held it, in an hour in which the pod
	// did too (within that hour the two need not have overlapped when
	// three or more took turns), sorted. Both accounting paths compute
	// this same set.
	SharedWith []string `json:"sharedWith,omitempty"`
	Totals
}

// Key is "namespace/pod".
func (p *PodUsage) Key() string { return p.Namespace + "/" + p.Pod }

// GroupUsage is the accounting of a namespace or a node.
type GroupUsage struct {
	Name string     `json:"name"`
	Pods int        `json:"pods"`
	App  []AppUsage `json:"app,omitempty"`
	Totals
}

// NodeUsage is the accounting of a node: its pods' totals and its GPUs'
// capacity.
type NodeUsage struct {
	GroupUsage
	Capacity
}

// ClusterUsage is the accounting of the whole cluster.
type ClusterUsage struct {
	Totals
	Capacity
}

// AppUsage is an application metric beside the GPU figures.
type AppUsage struct {
	Name string `json:"name"`
	Mean Amount `json:"mean"`
	// Total integrates the metric over time (tokens for tokens/s).
	Total Amount `json:"total"`
	// CostPerMillion is the GPU cost per million of Total.
	CostPerMillion Amount `json:"costPerMillion"`
}

// Quality counts what was wrong with the data.
type Quality struct {
	Samples       int `json:"samples"`
	NaNSamples    int `json:"nanSamples"`
	OutOfWindow   int `json:"outOfWindowSamples"`
	Gaps          int `json:"gaps"`
	CounterResets int `json:"counterResets"`
	// Coverage is the ratio (0..1) of device-seconds with any sample.
	Coverage Amount `json:"coverage"`
	// ActivitySources counts devices by the metric activity came from;
	// "none" counts devices without activity.
	ActivitySources map[string]int  `json:"activitySources"`
	MissingMetrics  []MissingMetric `json:"missingMetrics,omitempty"`
	Warnings        []string        `json:"warnings,omitempty"`
}

// MissingMetric names a metric that had no series and what the report
// cannot tell without it.
type MissingMetric struct {
	Metric      string `json:"metric"`
	Consequence string `json:"consequence"`
}

// How a report was accounted, for Report.Accounting.
const (
	// RawAccounting is Account on raw samples at the window's step.
	RawAccounting = "raw"
	// HourlyAccounting is AccountBuckets on per-hour buckets that the query
	// engine computed.
	HourlyAccounting = "hourly"
)

// Report is the result of Account.
type Report struct {
	// Accounting says which path made the report: RawAccounting or
	// HourlyAccounting.
	Accounting string           `json:"accounting"`
	Start      time.Time        `json:"start"`
	End        time.Time        `json:"end"`
	StepSecond Seconds          `json:"stepSeconds"`
	Currency   string           `json:"currency"`
	Cluster    ClusterUsage     `json:"cluster"`
	Devices    []DeviceUsage    `json:"devices"`
	Containers []ContainerUsage `json:"containers"`
	Pods       []PodUsage       `json:"pods"`
	Namespaces []GroupUsage     `json:"namespaces"`
	Nodes      []NodeUsage      `json:"nodes"`
	// Hourly is, per GPU model, the GPUs allocated and active in each hour
	// of the window: the levels a reservation baseline is read from.
	Hourly []ModelHours `json:"hourly,omitempty"`
	// Health is, per GPU whose dcgm-exporter XID gauge was non-zero in the
	// window, the XIDs it reported; a GPU not listed reported none, or its
	// exporter does not serve the gauge.
	Health []DeviceHealth `json:"health,omitempty"`
	// QueueWait is how long GPU pods waited to be scheduled; the edges
	// fill it in where they know the pending pods (nil otherwise).
	QueueWait *QueueWait `json:"queueWait,omitempty"`
	// Startup is the start-ups of the pods that started in the window, by
	// workload and by where their model weights come from.
	Startup StartupSummary `json:"startup"`
	Quality Quality        `json:"quality"`
}

// ModelHours are the GPUs of one model allocated to pods in each hour of the
// window, oldest first, and how they were used: GPU-seconds in the hour over
// the hour's seconds (a MIG slice counts its share of a GPU), 4 decimals.
// Every hour, AllocatedGPUs = ActiveGPUs + IdleGPUs + ActivityUnknownGPUs,
// as for Totals; summed over the hours and times 3600 they give the
// cluster's allocated, active, idle and activity-unknown GPU-seconds of that
// model.
type ModelHours struct {
	Model               string    `json:"model"`
	AllocatedGPUs       []float64 `json:"allocatedGPUs"`
	ActiveGPUs          []float64 `json:"activeGPUs"`
	IdleGPUs            []float64 `json:"idleGPUs"`
	ActivityUnknownGPUs []float64 `json:"activityUnknownGPUs"`
}

// Pod returns the named pod's usage.
func (r *Report) Pod(namespace, name string) (*PodUsage, bool) {
	for i := range r.Pods {
		if r.Pods[i].Namespace == namespace && r.Pods[i].Pod == name {
			return &r.Pods[i], true
		}
	}
	return nil, false
}

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

type ownerSeries struct {
	owner   Owner
	dra     DRAHold
	present []bool
	// pod and container are resolved at the owner's first held slot on
	// the device, so the slot loop does no map lookups.
	pod       *podState
	container *acc
}

type deviceInput struct {
	device Device
	series []*Series
}

type podState struct {
	// usage holds the few figures of the pod's PodUsage known before
	// assemble, which builds the rest in the report itself: a month of a
	// fleet's pods is many, and a whole PodUsage in each state doubled
	// them at the report's peak.
	usage podHead
	acc   acc
	// devices, sources and nodes are sets, kept as short lists: a pod
	// holds a few devices at most, and a month of a fleet's pods is many.
	devices []string
	sources []string
	nodes   []string
	// vram and activity are the raw path's samples; vramQ and activityQ
	// the hourly path's percentile lists.
	vram       []float64
	activity   []float64
	vramQ      quantileSet
	activityQ  quantileSet
	dramSum    float64
	dramN      float64
	powerSum   float64
	powerN     float64
	firstSlot  int
	firstUse   int
	containers []podContainer
	// Filled in by either path before assemble: the pattern's
	// statistics, when the pod was first seen on a GPU and first used one
	// (zero if never). The usage's VRAM, activity, DRAM and power figures
	// are set too.
	stats      ActivityStats
	attached   time.Time
	firstUseAt time.Time
	// firstHour is the start of the window's hour in which the pod was
	// first seen on a GPU, and firstHourGS its allocated GPU-seconds in
	// that hour: over the seconds from attached to the hour's end they
	// give the GPUs it held as it started.
	firstHour   time.Time
	firstHourGS float64
	// hours are the pod's activity-known and active GPU-seconds per hour.
	hours podHours
	// claims are the DRA claims of its series; sharedWith the pods it
	// shared a GPU with (PodUsage.SharedWith).
	claims, sharedWith map[string]bool
}

// podHead is what a pod's state knows of its PodUsage before assemble:
// the same fields, by the same names.
type podHead struct {
	Namespace, Pod, Node   string
	VRAMUsedMiB, Activity  Percentiles
	DRAMActive, PowerWatts Amount
}

// Key is "namespace/pod", as PodUsage.Key.
func (h *podHead) Key() string { return h.Namespace + "/" + h.Pod }

// podUsage is the PodUsage that h begins.
func (h *podHead) podUsage() PodUsage {
	return PodUsage{Namespace: h.Namespace, Pod: h.Pod, Node: h.Node, VRAMUsedMiB: h.VRAMUsedMiB, Activity: h.Activity, DRAMActive: h.DRAMActive, PowerWatts: h.PowerWatts}
}

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
	r.Health = health(in.Series, w)
	assemble(r, a.pods, a.nodes, in.App, in.Pods, func(tMs int64) float64 { return a.slotSeconds(a.slotOf(tMs)) })
	return r, nil
}

// groupByDevice groups the series of known metrics by device, in the order
// of the devices' keys, and says which metrics had any series.
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
	hasMetric              []bool
	vram, vramFree         []float64
	mig                    migGPU
	// hours is the window's hours; levels the GPUs per model and hour.
	hours  int
	levels modelLevels
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
	if d.device.MIGInstance != "" {
		a.mig.addInstance(d.device, share, pa, a.sampled)
	}
}

// load puts the device's samples into the slots: one value per metric and
// slot (NaN where none), which slots had any sample, and per owner the
// slots at which it was present, sorted by owner. Out-of-window, NaN and
// infinite samples are counted in Quality.
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
		}
	}
	sort.Slice(a.owners, func(i, j int) bool {
		return compareOwnerKeys(a.owners[i].owner, a.owners[j].owner) < 0
	})
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
	var sh sharers
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
				a.present = append(a.present, o)
			}
		}
		if len(a.present) == 0 {
			dev.free(sec*share, price)
			continue
		}
		dev.capacity += sec * share
		each := share / float64(len(a.present))
		h := a.hourOf(k)
		for _, o := range a.present {
			gs := sec * each
			dev.hold(gs, activity, price)
			known, active := 0.0, 0.0
			if !math.IsNaN(activity) {
				known, active = gs, gs*activity
			}
			levels.add(h, gs, known, active)
			a.hold(o, device, du.ActivitySource, k, gs, activity, price, energy/float64(len(a.present)), fb, power)
			o.pod.hours.add(h, known, active)
		}
		// The owners are sorted by pod: a pod's containers are adjacent.
		if last := a.present[len(a.present)-1]; last.pod != a.present[0].pod {
			du.SharedSeconds += Seconds(sec)
			for _, o := range a.present {
				sh.add(h, o.pod)
			}
		}
	}
	du.SharedBy = sh.settle()
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

// hold credits owner o, present on device at slot k, with gs GPU-seconds
// at the slot's activity and price, its share of the slot's energy (NaN if
// unknown), and the slot's framebuffer, DRAM and power samples.
func (a *rawAccount) hold(o *ownerSeries, device Device, source string, k int, gs, activity, price, energy, fb, power float64) {
	if o.pod == nil {
		o.pod, o.container = resolveOwner(a.pods, nil, o.owner, device, device.Key(), source, k, a.slots)
		if c := o.dra.Claim(); c != "" {
			o.pod.claim(c)
		}
	}
	ps, ca := o.pod, o.container
	ps.acc.hold(gs, activity, price)
	ca.hold(gs, activity, price)
	if !math.IsNaN(energy) {
		ps.acc.energy += energy
		ps.acc.energyKnown = true
		ca.energy += energy
		ca.energyKnown = true
	}
	if !math.IsNaN(activity) {
		ps.activity = append(ps.activity, activity)
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
	used := (!math.IsNaN(activity) && activity > ActivityIdleFloor) || (!math.IsNaN(fb) && fb > FBIdleFloorMiB)
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

// countHeld counts gs allocated GPU-seconds of the hour that starts at
// hour towards the GPUs held at start, if it is the pod's first hour.
func (ps *podState) countHeld(hour time.Time, gs float64) {
	if ps.firstHour.IsZero() || hour.Before(ps.firstHour) {
		ps.firstHour, ps.firstHourGS = hour, 0
	}
	if hour.Equal(ps.firstHour) {
		ps.firstHourGS += gs
	}
}

// heldAtStart is the GPUs the pod held as it started: its allocated
// GPU-seconds in its first hour over the seconds from its first step to
// that hour's end (or the window's end); unknown if it was never seen.
func (ps *podState) heldAtStart(windowEnd time.Time) Amount {
	if ps.attached.IsZero() || ps.firstHour.IsZero() {
		return Unknown
	}
	end := ps.firstHour.Add(time.Hour)
	if windowEnd.Before(end) {
		end = windowEnd
	}
	sec := end.Sub(ps.attached).Seconds()
	if sec <= 0 {
		return Unknown
	}
	return Known(round4(ps.firstHourGS / sec))
}

// assembler completes a report from the pods' and nodes' accumulators,
// whichever path filled them: pod, container, namespace and node usage,
// patterns, application metrics and start-up phases. It takes each pod as
// soon as its state is final (add), so that a month of a fleet's pods is
// never held twice, as states and as the report; finish then puts the pods
// in order and totals the namespaces and nodes.
type assembler struct {
	r *Report
	// events are the pods' events by pod, pointing into the caller's
	// slice: a month of a fleet's pods is not copied into the map.
	events map[podRef]*PodEvents
	// podApps and nsApps are the application metrics beside the pod
	// ("namespace/pod") or namespace they name, by metric; appFirst each
	// pod's first application sample.
	podApps, nsApps map[string]map[string]*appAgg
	appFirst        map[string]int64
	namespaces      map[string]*acc
	nsPods          map[string]int
	nodePods        map[string]int
	// containersAt is where each pod's containers begin in r.Containers,
	// in the order the pods were added.
	containersAt []int32
}

// appAgg sums one application metric of a pod or namespace.
type appAgg struct {
	sum, total float64
	n          int
}

// newAssembler starts assembling r, whose pods and containers number
// pods and containers (the report's slices are made that large at once:
// grown by appends, a month of a fleet's pods was copied over and over).
// Application samples each stand for appSeconds of their time.
func newAssembler(r *Report, pods, containers int, apps []AppSeries, podEvents []PodEvents, appSeconds func(tMs int64) float64) *assembler {
	as := &assembler{r: r, events: make(map[podRef]*PodEvents, len(podEvents)), podApps: map[string]map[string]*appAgg{}, nsApps: map[string]map[string]*appAgg{},
		appFirst: map[string]int64{}, namespaces: map[string]*acc{}, nsPods: map[string]int{}, nodePods: map[string]int{},
		containersAt: make([]int32, 0, pods)}
	r.Pods = slices.Grow(r.Pods, pods)
	r.Containers = slices.Grow(r.Containers, containers)
	for i := range podEvents {
		e := &podEvents[i]
		as.events[podRef{e.Namespace, e.Pod}] = e
	}
	startMs, endMs := r.Start.UnixMilli(), r.End.UnixMilli()
	for _, a := range apps {
		target, key := as.podApps, a.Namespace+"/"+a.Pod
		if a.Pod == "" {
			target, key = as.nsApps, a.Namespace
		}
		if target[key] == nil {
			target[key] = map[string]*appAgg{}
		}
		ag := target[key][a.Name]
		if ag == nil {
			ag = &appAgg{}
			target[key][a.Name] = ag
		}
		for _, s := range a.Samples {
			if s.TimeMs < startMs || s.TimeMs >= endMs {
				continue
			}
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				r.Quality.NaNSamples++
				continue
			}
			ag.sum += s.Value
			ag.n++
			ag.total += s.Value * appSeconds(s.TimeMs)
			if first, ok := as.appFirst[key]; a.Pod != "" && (!ok || s.TimeMs < first) {
				as.appFirst[key] = s.TimeMs
			}
		}
	}
	return as
}

// appUsage lists the application metrics of aggs by name, each with its
// cost per million where cost is known.
func appUsage(aggs map[string]*appAgg, cost Amount) []AppUsage {
	if len(aggs) == 0 {
		return nil
	}
	var out []AppUsage
	for _, name := range slices.Sorted(maps.Keys(aggs)) {
		ag := aggs[name]
		au := AppUsage{Name: name}
		if ag.n > 0 {
			au.Mean = Known(ag.sum / float64(ag.n))
			au.Total = Known(ag.total)
			if cost.Known() && ag.total > 0 {
				au.CostPerMillion = Known(cost.Value() / (ag.total / 1e6))
			}
		}
		out = append(out, au)
	}
	return out
}

// add puts a pod whose state is final into the report, with its
// containers; the caller releases the state.
func (as *assembler) add(ps *podState) {
	r := as.r
	var key string // "namespace/pod", built only where application metrics may name the pod
	if len(as.podApps) > 0 || len(as.appFirst) > 0 {
		key = ps.usage.Key()
	}
	r.Pods = append(r.Pods, ps.usage.podUsage())
	u := &r.Pods[len(r.Pods)-1]
	slices.Sort(ps.devices)
	slices.Sort(ps.sources)
	u.Devices, u.ActivitySources = slices.Clip(ps.devices), slices.Clip(ps.sources)
	u.Totals = ps.acc.totals()
	u.Pattern = classify(ps.stats, u.DRAMActive, u.VRAMUsedMiB)
	u.HourlyActivity, u.FirstHour = ps.hours.activity()
	u.Claims = sortedKeys(ps.claims)
	u.SharedWith = sortedKeys(ps.sharedWith)
	u.App = appUsage(as.podApps[key], u.Cost)
	in := startupInput{attached: ps.attached, firstUse: ps.firstUseAt, step: time.Duration(r.StepSecond * Seconds(time.Second)), heldGPUs: ps.heldAtStart(r.End)}
	if e := as.events[podRef{u.Namespace, u.Pod}]; e != nil {
		in.events = *e
	}
	if first, ok := as.appFirst[key]; ok {
		in.appFirst = time.UnixMilli(first).UTC()
	}
	if u.Cost.Known() && u.AllocatedGPUSeconds > 0 {
		in.pricePerGPUSecond = Known(u.Cost.Value() / float64(u.AllocatedGPUSeconds))
	}
	u.Startup = startupOf(in, u.Pod)

	as.containersAt = append(as.containersAt, int32(len(r.Containers)))
	slices.SortFunc(ps.containers, func(a, b podContainer) int { return cmp.Compare(a.name, b.name) })
	for _, c := range ps.containers {
		r.Containers = append(r.Containers, ContainerUsage{Owner: Owner{Namespace: u.Namespace, Pod: u.Pod, Container: c.name}, Totals: c.acc.totals()})
	}
	na := as.namespaces[u.Namespace]
	if na == nil {
		na = &acc{}
		as.namespaces[u.Namespace] = na
	}
	na.add(&ps.acc)
	as.nsPods[u.Namespace]++
	for _, n := range ps.nodes {
		as.nodePods[n]++
	}
}

// finish puts the pods in the order of their keys and their containers
// with them, and adds the namespaces, the nodes (from their
// accumulators) and the start-up summary.
func (as *assembler) finish(nodes map[string]*acc) {
	r := as.r
	order := make([]int32, len(r.Pods))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		return comparePodRefs(podRef{r.Pods[i].Namespace, r.Pods[i].Pod}, podRef{r.Pods[j].Namespace, r.Pods[j].Pod})
	})
	corder := make([]int32, 0, len(r.Containers))
	for _, i := range order {
		end := int32(len(r.Containers))
		if int(i)+1 < len(as.containersAt) {
			end = as.containersAt[i+1]
		}
		for c := as.containersAt[i]; c < end; c++ {
			corder = append(corder, c)
		}
	}
	permute(r.Pods, order)
	permute(r.Containers, corder)

	for _, ns := range slices.Sorted(maps.Keys(as.namespaces)) {
		t := as.namespaces[ns].totals()
		r.Namespaces = append(r.Namespaces, GroupUsage{Name: ns, Pods: as.nsPods[ns], Totals: t, App: appUsage(as.nsApps[ns], t.Cost)})
	}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		r.Nodes = append(r.Nodes, NodeUsage{GroupUsage: GroupUsage{Name: n, Pods: as.nodePods[n], Totals: nodes[n].totals()}, Capacity: nodes[n].capacityTotals()})
	}
	r.Startup = SummarizeStartup(r.Pods, r.Start, r.End, time.Duration(r.StepSecond*Seconds(time.Second)))
}

// permute puts s[order[i]] at i for every i, in place, moving each element
// once: the report's slices are large, and sorting them would move their
// large elements many times.
func permute[T any](s []T, order []int32) {
	done := make([]bool, len(s))
	for i := range s {
		if done[i] {
			continue
		}
		first := s[i]
		j := i
		for {
			done[j] = true
			k := int(order[j])
			if k == i {
				s[j] = first
				break
			}
			s[j] = s[k]
			j = k
		}
	}
}

// assemble completes a report from the states of all its pods at once
// (the raw path's), releasing each state once its pod is in the report.
func assemble(r *Report, pods map[podRef]*podState, nodes map[string]*acc, apps []AppSeries, podEvents []PodEvents, appSeconds func(tMs int64) float64) {
	containers := 0
	for _, ps := range pods {
		containers += len(ps.containers)
	}
	as := newAssembler(r, len(pods), containers, apps, podEvents, appSeconds)
	// In the order of the keys, as finish puts them: the namespaces' sums
	// then do not depend on the map's.
	for _, key := range slices.SortedFunc(maps.Keys(pods), comparePodRefs) {
		as.add(pods[key])
		delete(pods, key)
	}
	as.finish(nodes)
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

// claim notes a DRA claim of the pod's series; the set is made at the
// first (most pods have none, and a month of a fleet's pods is many).
func (ps *podState) claim(c string) {
	if ps.claims == nil {
		ps.claims = map[string]bool{}
	}
	ps.claims[c] = true
}

// sharedWithPod notes a pod that shared a GPU with ps, making the set at
// the first.
func (ps *podState) sharedWithPod(key string) {
	if ps.sharedWith == nil {
		ps.sharedWith = map[string]bool{}
	}
	ps.sharedWith[key] = true
}

// podRef names a pod, as its key "namespace/pod" does, without building
// the key.
type podRef struct{ namespace, pod string }

func (o Owner) podRef() podRef { return podRef{o.Namespace, o.Pod} }

// comparePodRefs orders pods as their keys "namespace/pod" order.
func comparePodRefs(x, y podRef) int {
	return compareJoined([]string{x.namespace, "/", x.pod}, []string{y.namespace, "/", y.pod})
}

// podPool keeps the states of pods already in the report for pods yet to
// come: the hourly path finishes its pods one by one, and a month of a
// fleet's pods made as many states, all of them garbage, at the
// report's peak.
type podPool struct{ spare []*podState }

// get returns a state for a new pod, reused if there is one.
func (p *podPool) get() *podState {
	if p == nil || len(p.spare) == 0 {
		return &podState{}
	}
	ps := p.spare[len(p.spare)-1]
	p.spare = p.spare[:len(p.spare)-1]
	return ps
}

// put takes back the state of a pod that is in the report. The report
// holds its device and source lists; the rest is kept for reuse.
func (p *podPool) put(ps *podState) {
	nodes, containers, hours := ps.nodes[:0], ps.containers[:0], podHours{known: ps.hours.known[:0], active: ps.hours.active[:0]}
	clear(ps.claims)
	clear(ps.sharedWith)
	*ps = podState{nodes: nodes, containers: containers, hours: hours, claims: ps.claims, sharedWith: ps.sharedWith}
	p.spare = append(p.spare, ps)
}

// resolveOwner finds or makes (from pool, if not nil) the pod state and
// container accumulator of an owner first seen holding device d (whose
// key is dkey) at slot k.
func resolveOwner(pods map[podRef]*podState, pool *podPool, o Owner, d Device, dkey, source string, k, slots int) (*podState, *acc) {
	ps := pods[o.podRef()]
	if ps == nil {
		ps = pool.get()
		ps.usage = podHead{Namespace: o.Namespace, Pod: o.Pod, Node: d.Node}
		ps.firstSlot, ps.firstUse = k, -1
		if slots > 0 {
			ps.vram, ps.activity = make([]float64, 0, slots), make([]float64, 0, slots)
		}
		pods[o.podRef()] = ps
	}
	ps.firstSlot = min(ps.firstSlot, k)
	if !slices.Contains(ps.devices, dkey) {
		ps.devices = append(ps.devices, dkey)
	}
	if !slices.Contains(ps.nodes, d.Node) {
		ps.nodes = append(ps.nodes, d.Node)
	}
	if source != "" && !slices.Contains(ps.sources, source) {
		ps.sources = append(ps.sources, source)
	}
	for _, c := range ps.containers {
		if c.name == o.Container {
			return ps, c.acc
		}
	}
	// A reused state keeps its containers' accumulators past its length.
	var ca *acc
	if n := len(ps.containers); n < cap(ps.containers) {
		ca = ps.containers[:n+1][n].acc
	}
	if ca == nil {
		ca = &acc{}
	}
	*ca = acc{}
	ps.containers = append(ps.containers, podContainer{o.Container, ca})
	return ps, ca
}

// podContainer is the accumulator of one container of a pod.
type podContainer struct {
	name string
	acc  *acc
}

func deviceList(devs []*deviceInput) []Device {
	out := make([]Device, len(devs))
	for i, d := range devs {
		out[i] = d.device
	}
	return out
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

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// sharers collects, for one device, the pods present at its shared steps
// (two or more pods at once), by hour of the window: what
// PodUsage.SharedWith and DeviceUsage.SharedBy are made of, the same way on
// both accounting paths.
type sharers struct {
	byHour map[int]map[*podState]bool
}

func (s *sharers) add(h int, ps *podState) {
	if s.byHour == nil {
		s.byHour = map[int]map[*podState]bool{}
	}
	if s.byHour[h] == nil {
		s.byHour[h] = map[*podState]bool{}
	}
	s.byHour[h][ps] = true
}

// settle adds to each pod's sharedWith the other pods of its hours and
// returns every pod that shared the device, sorted; nil if none did.
func (s *sharers) settle() []string {
	all := map[string]bool{}
	for _, pods := range s.byHour {
		for ps := range pods {
			all[ps.usage.Key()] = true
			for other := range pods {
				if other != ps {
					ps.sharedWithPod(other.usage.Key())
				}
			}
		}
	}
	return sortedKeys(all)
}

// sortedKeys lists a set's members in order; nil for an empty set.
func sortedKeys(set map[string]bool) []string {
	if len(set) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}
