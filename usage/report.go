package usage

import "time"

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
	// CostPerActiveGPUHour has no value (null in JSON) where activity was
	// measured and was none (NoActiveHour): no active hour was bought, so
	// there is none to price. It is unknown, null too, where activity was
	// not measured. Every money figure is unknown where some allocated
	// time has no price.
	CostPerActiveGPUHour Amount `json:"costPerActiveGPUHour"`
	EnergyJoules         Amount `json:"energyJoules"`
}

// NoActiveHour reports that activity was measured and was none (a known 0
// of ActiveGPUSeconds), so that CostPerActiveGPUHour has no value because
// there is no active hour, not because a figure is missing.
func (t Totals) NoActiveHour() bool {
	return t.ActiveGPUSeconds.Known() && t.ActiveGPUSeconds.Value() == 0
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
	// PerProcessSeconds are the shared seconds split among the pods by
	// the agent's per-pod series (AttributionPerProcess); the rest of
	// SharedSeconds were split evenly.
	PerProcessSeconds Seconds `json:"perProcessSeconds"`
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
	// Attribution is how the pod's figures on shared GPUs were measured:
	// AttributionExclusive, AttributionPerProcess, AttributionEvenSplit or
	// AttributionMixed.
	Attribution string `json:"attribution"`
	// Bottleneck is what limits the pod and what to change instead of
	// adding GPUs (JudgeBottlenecks); nil where its pattern is unknown.
	Bottleneck *Bottleneck `json:"bottleneck,omitempty"`
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
	// CostPerMillion is the GPU cost per million of Total (cost per
	// million tokens for a token rate); unknown where the cost is, or
	// where Total is 0.
	CostPerMillion Amount `json:"costPerMillion"`
	// PerActiveGPUHour is Total per active GPU-hour of the same pod or
	// namespace (tokens per active GPU-hour for a token rate): what the
	// GPUs produced while they worked. Unknown where activity was not
	// measured or was none.
	PerActiveGPUHour Amount `json:"perActiveGPUHour"`
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
	// Bottlenecks counts the judged pods per verdict, in the order of
	// Verdicts (JudgeBottlenecks).
	Bottlenecks []VerdictCount `json:"bottlenecks,omitempty"`
	// Field puts the cluster's active-of-allocated ratio beside the
	// published average (CompareWithField); nil until compared.
	Field   *FieldComparison `json:"field,omitempty"`
	Quality Quality          `json:"quality"`
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
