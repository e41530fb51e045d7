package usage

import (
	"math"
	"slices"
	"strings"
	"time"
)

// VerdictName says what limits a running GPU workload: the "application"
// step of the diagnosis order (allocation, memory, placement,
// application), where the fix is not more GPUs.
type VerdictName string

// The verdicts, checked in this order.
const (
	// IdleHeldVerdict: the pod holds a GPU it almost never uses.
	IdleHeldVerdict VerdictName = "idle-held"
	// MemoryBoundVerdict: DRAM traffic is high while the SMs wait.
	MemoryBoundVerdict VerdictName = "memory-bound"
	// GPUBoundVerdict: the GPU is busy; it is the bottleneck.
	GPUBoundVerdict VerdictName = "gpu-bound"
	// CPUBoundVerdict: the pod's CPU limit throttles it while the GPU
	// waits between bursts.
	CPUBoundVerdict VerdictName = "cpu-bound"
	// InputBoundVerdict: activity stays low while data arrives from disk,
	// the network or over PCIe/NVLink.
	InputBoundVerdict VerdictName = "input-bound"
	// Undetermined: the GPU is underused, but no series says why.
	Undetermined VerdictName = "undetermined"
)

// Verdicts lists the verdicts in the order they are checked: the one list
// of their names.
var Verdicts = []VerdictName{IdleHeldVerdict, MemoryBoundVerdict, GPUBoundVerdict, CPUBoundVerdict, InputBoundVerdict, Undetermined}

// ChangeKind is what a verdict says to change instead of adding GPUs.
type ChangeKind string

// The changes.
const (
	// ReleaseGPU: scale the pod to zero or remove its GPU request.
	ReleaseGPU ChangeKind = "release-gpu"
	// CutMemoryTraffic: quantise the weights, fuse kernels or move to a
	// GPU model with more memory bandwidth; more GPUs of the same model
	// do not help one stream.
	CutMemoryTraffic ChangeKind = "cut-memory-traffic"
	// KeepGPU: the GPU does the work; reserve it as a baseline.
	KeepGPU ChangeKind = "keep"
	// RaiseCPULimit: raise the CPU limit from FromCores to ToCores.
	RaiseCPULimit ChangeKind = "raise-cpu-limit"
	// StageDataLocally: cache the input on node-local disk or in memory
	// instead of reading it over the network at every pass.
	StageDataLocally ChangeKind = "stage-data-locally"
	// FasterStorage: read the input from faster storage (node-local NVMe)
	// with more loader workers and prefetching.
	FasterStorage ChangeKind = "faster-storage"
	// OverlapTransfers: pin host memory and overlap host-to-device copies
	// with compute, in larger batches.
	OverlapTransfers ChangeKind = "overlap-transfers"
	// ExportEvidence: export the series that would tell (cAdvisor's CPU
	// and I/O series, DCGM's PCIe and NVLink fields).
	ExportEvidence ChangeKind = "export-evidence"
)

// Evidence is what cAdvisor and DCGM say of one pod beside its GPU
// activity over the window. Every figure is unknown where its series were
// not found; a measured 0 is 0.
type Evidence struct {
	Namespace string `json:"-"`
	Pod       string `json:"-"`
	// CPULimitCores is the sum of the CFS quotas over periods of the pod's
	// containers that have one (container_spec_cpu_quota /
	// container_spec_cpu_period).
	CPULimitCores Amount `json:"cpuLimitCores"`
	// CPUThrottledRatio is the share of CFS enforcement periods in which
	// the pod was throttled (container_cpu_cfs_throttled_periods_total
	// over container_cpu_cfs_periods_total).
	CPUThrottledRatio Amount `json:"cpuThrottledRatio"`
	// CPUUsedCores is the CPU the pod used while it ran: its CPU seconds
	// (container_cpu_usage_seconds_total) over the seconds of the
	// enforcement periods in which it could run, times the limit's share
	// per period; unknown without a CFS quota.
	CPUUsedCores Amount `json:"cpuUsedCores"`
	// The mean rates, in bytes per second, over the time the pod's series
	// were seen: DCGM's PCIe and NVLink traffic summed over the pod's GPUs
	// (DCGM_FI_PROF_PCIE_RX_BYTES and _TX_BYTES,
	// DCGM_FI_PROF_NVLINK_RX_BYTES and _TX_BYTES), and cAdvisor's disk
	// reads (container_fs_reads_bytes_total) and network receive
	// (container_network_receive_bytes_total).
	PCIeRxBytesPerSecond         Amount `json:"pcieRxBytesPerSecond"`
	PCIeTxBytesPerSecond         Amount `json:"pcieTxBytesPerSecond"`
	NVLinkRxBytesPerSecond       Amount `json:"nvlinkRxBytesPerSecond"`
	NVLinkTxBytesPerSecond       Amount `json:"nvlinkTxBytesPerSecond"`
	DiskReadBytesPerSecond       Amount `json:"diskReadBytesPerSecond"`
	NetworkReceiveBytesPerSecond Amount `json:"networkReceiveBytesPerSecond"`
}

// Key is "namespace/pod".
func (e *Evidence) Key() string { return e.Namespace + "/" + e.Pod }

// Bottleneck is a running pod's verdict with its evidence and the change
// it calls for, all as values: the edges write the sentence.
type Bottleneck struct {
	Verdict VerdictName `json:"verdict"`
	// Pattern is the usage pattern beside which the verdict was read.
	Pattern PatternName `json:"pattern"`
	// MeanActivity, IdleRatio and DRAMActive are the pattern's figures
	// that the verdict rests on.
	MeanActivity Amount   `json:"meanActivity"`
	IdleRatio    Amount   `json:"idleRatio"`
	DRAMActive   Amount   `json:"dramActiveMean"`
	Evidence     Evidence `json:"evidence"`
	// Input is, for an input-bound pod, the largest input source:
	// "network", "disk", "pcie" or "nvlink".
	Input  string `json:"input,omitempty"`
	Change Change `json:"change"`
}

// Change is what to do instead of adding GPUs, with its numbers.
type Change struct {
	Kind ChangeKind `json:"kind"`
	// FromCores and ToCores are the CPU limit now and the one proposed,
	// for RaiseCPULimit.
	FromCores Amount `json:"fromCores"`
	ToCores   Amount `json:"toCores"`
	// Missing lists the series that would decide, for ExportEvidence.
	Missing []string `json:"missing,omitempty"`
}

// The verdicts' thresholds, as ratios 0..1 and bytes per second.
const (
	// cpuThrottledBound is the share of throttled periods from which a pod
	// whose GPU waits is CPU-bound: the kernel held it back in one
	// period in five.
	cpuThrottledBound = 0.2
	// inputBytesFloor is the input rate below which a source does not
	// count as the pod's input (1 MB/s: health checks and logs).
	inputBytesFloor = 1e6
)

// cAdvisor's and DCGM's series that the verdicts read, for ExportEvidence.
const (
	CFSPeriods          = "container_cpu_cfs_periods_total"
	CFSThrottledPeriods = "container_cpu_cfs_throttled_periods_total"
	CPUUsageSeconds     = "container_cpu_usage_seconds_total"
	CPUQuota            = "container_spec_cpu_quota"
	CPUPeriod           = "container_spec_cpu_period"
	FSReadsBytes        = "container_fs_reads_bytes_total"
	NetworkReceiveBytes = "container_network_receive_bytes_total"
	PCIeRxBytes         = "DCGM_FI_PROF_PCIE_RX_BYTES"
	PCIeTxBytes         = "DCGM_FI_PROF_PCIE_TX_BYTES"
	NVLinkRxBytes       = "DCGM_FI_PROF_NVLINK_RX_BYTES"
	NVLinkTxBytes       = "DCGM_FI_PROF_NVLINK_TX_BYTES"
)

// Judge reads the verdict of a pod from its usage pattern and its
// evidence (nil where none was found). ok is false where the pattern is
// unknown: with no activity there is nothing to judge.
func Judge(p Pattern, e *Evidence) (b Bottleneck, ok bool) {
	if p.Name == UnknownPattern || p.Name == "" {
		return Bottleneck{}, false
	}
	b = Bottleneck{Pattern: p.Name, MeanActivity: p.MeanActivity, IdleRatio: p.IdleRatio, DRAMActive: p.DRAMActive}
	if e != nil {
		b.Evidence = *e
		b.Evidence.Namespace, b.Evidence.Pod = "", ""
	}
	ev := &b.Evidence
	switch {
	case p.Name == IdleHeld:
		b.Verdict, b.Change = IdleHeldVerdict, Change{Kind: ReleaseGPU}
	case p.Name == MemoryBound:
		b.Verdict, b.Change = MemoryBoundVerdict, Change{Kind: CutMemoryTraffic}
	case p.Name == Busy:
		b.Verdict, b.Change = GPUBoundVerdict, Change{Kind: KeepGPU}
	case cpuBound(ev):
		b.Verdict = CPUBoundVerdict
		b.Change = Change{Kind: RaiseCPULimit, FromCores: ev.CPULimitCores, ToCores: Known(raisedLimit(ev.CPULimitCores.Value(), ev.CPUThrottledRatio.Value()))}
	default:
		b.Input = mainInput(ev)
		if b.Input == "" {
			b.Verdict, b.Change = Undetermined, Change{Kind: ExportEvidence, Missing: missingEvidence(ev)}
			break
		}
		b.Verdict, b.Change = InputBoundVerdict, Change{Kind: inputChange[b.Input]}
	}
	return b, true
}

// cpuBound: a CFS quota throttled the pod in a fifth of its periods or
// more.
func cpuBound(e *Evidence) bool {
	return e.CPULimitCores.Known() && e.CPULimitCores.Value() > 0 && e.CPUThrottledRatio.Known() && e.CPUThrottledRatio.Value() >= cpuThrottledBound
}

// raisedLimit is the CPU limit that would have covered the throttled
// periods had each needed one more period's quota: the limit over the
// share of periods not throttled, in whole cores, at least one more.
func raisedLimit(cores, throttled float64) float64 {
	return max(math.Ceil(cores/(1-min(throttled, 0.9))), math.Floor(cores)+1)
}

// inputChange is the change for each input source.
var inputChange = map[string]ChangeKind{
	"network": StageDataLocally,
	"disk":    FasterStorage,
	"pcie":    OverlapTransfers,
	"nvlink":  OverlapTransfers,
}

// mainInput is the pod's main input source: the network or the disk,
// whichever reads more, where it reads at least the floor and half what
// arrives over the buses (a copy over PCIe follows a read from disk or the
// network, so the read is the cause of both); else the bus, PCIe or
// NVLink, that receives more, at or above the floor; "" if none.
func mainInput(e *Evidence) string {
	host, hostRate := larger("network", e.NetworkReceiveBytesPerSecond, "disk", e.DiskReadBytesPerSecond)
	bus, busRate := larger("pcie", e.PCIeRxBytesPerSecond, "nvlink", e.NVLinkRxBytesPerSecond)
	switch {
	case hostRate >= inputBytesFloor && hostRate >= busRate/2:
		return host
	case busRate >= inputBytesFloor:
		return bus
	}
	return ""
}

// larger is the name and rate of the larger known rate of two (0 when
// neither is known), the first where they tie.
func larger(a string, ra Amount, b string, rb Amount) (string, float64) {
	if rb.Known() && (!ra.Known() || rb.Value() > ra.Value()) {
		return b, rb.Value()
	}
	return a, ra.Value()
}

// missingEvidence lists the series whose figures are unknown. Pods that
// lack the same series share one list (a month of a fleet's pods lack
// the same few), which nobody may change.
func missingEvidence(e *Evidence) []string {
	mask := 0
	for i, known := range []bool{
		e.CPUThrottledRatio.Known(), e.CPULimitCores.Known(), e.DiskReadBytesPerSecond.Known(),
		e.NetworkReceiveBytesPerSecond.Known(), e.PCIeRxBytesPerSecond.Known(), e.NVLinkRxBytesPerSecond.Known(),
	} {
		if !known {
			mask |= 1 << i
		}
	}
	return missingLists[mask]
}

// evidenceSeries are the series missingEvidence names, in the order of
// its mask's bits.
var evidenceSeries = [...]string{CFSThrottledPeriods, CPUQuota, FSReadsBytes, NetworkReceiveBytes, PCIeRxBytes, NVLinkRxBytes}

// missingLists are missingEvidence's lists by mask, each capped at its
// length, so that an append to one never writes into another's.
var missingLists = func() (out [1 << len(evidenceSeries)][]string) {
	for mask := range out {
		var l []string
		for i, m := range evidenceSeries {
			if mask&(1<<i) != 0 {
				l = append(l, m)
			}
		}
		out[mask] = l[:len(l):len(l)]
	}
	return out
}()

// JudgeBottlenecks sets the verdict of every pod with a known pattern from
// its evidence (by "namespace/pod"; a pod without any is judged on its
// pattern alone), and counts the pods per verdict in Bottlenecks.
func (r *Report) JudgeBottlenecks(evidence []Evidence) {
	byPod := make(map[string]*Evidence, len(evidence))
	for i := range evidence {
		byPod[evidence[i].Key()] = &evidence[i]
	}
	counts := map[VerdictName]int{}
	for i := range r.Pods {
		u := &r.Pods[i]
		b, ok := Judge(u.Pattern, byPod[u.Key()])
		if !ok {
			u.Bottleneck = nil
			continue
		}
		u.Bottleneck = &b
		counts[b.Verdict]++
	}
	r.Bottlenecks = r.Bottlenecks[:0]
	for _, v := range Verdicts {
		if counts[v] > 0 {
			r.Bottlenecks = append(r.Bottlenecks, VerdictCount{Verdict: v, Pods: counts[v]})
		}
	}
}

// VerdictCount is how many pods got a verdict.
type VerdictCount struct {
	Verdict VerdictName `json:"verdict"`
	Pods    int         `json:"pods"`
}

// Judged returns the pods that have a verdict, GPU-bound ones last and
// the others by their allocated GPU-seconds, most first: the ones whose
// change frees most come first.
func (r *Report) Judged() []*PodUsage {
	var out []*PodUsage
	for i := range r.Pods {
		if r.Pods[i].Bottleneck != nil {
			out = append(out, &r.Pods[i])
		}
	}
	slices.SortStableFunc(out, func(a, b *PodUsage) int {
		ag, bg := a.Bottleneck.Verdict == GPUBoundVerdict, b.Bottleneck.Verdict == GPUBoundVerdict
		switch {
		case ag != bg && ag:
			return 1
		case ag != bg:
			return -1
		case a.AllocatedGPUSeconds != b.AllocatedGPUSeconds:
			if a.AllocatedGPUSeconds > b.AllocatedGPUSeconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key(), b.Key())
	})
	return out
}

// Running is the application step of the diagnosis over a window: what
// limits each running GPU pod (Judged's order), the pods per verdict, and
// the cluster beside the field. Report, diagnose --running and the
// dashboard show it.
type Running struct {
	Start  time.Time        `json:"start"`
	End    time.Time        `json:"end"`
	Counts []VerdictCount   `json:"counts"`
	Pods   []RunningPod     `json:"pods"`
	Field  *FieldComparison `json:"field,omitempty"`
}

// RunningPod is one judged pod.
type RunningPod struct {
	Pod                 string     `json:"pod"`
	Node                string     `json:"node"`
	AllocatedGPUSeconds Seconds    `json:"allocatedGPUSeconds"`
	Bottleneck          Bottleneck `json:"bottleneck"`
}

// Running gives the report's running view.
func (r *Report) Running() Running {
	out := Running{Start: r.Start, End: r.End, Counts: r.Bottlenecks, Field: r.Field, Pods: []RunningPod{}}
	for _, p := range r.Judged() {
		out.Pods = append(out.Pods, RunningPod{Pod: p.Key(), Node: p.Node, AllocatedGPUSeconds: p.AllocatedGPUSeconds, Bottleneck: *p.Bottleneck})
	}
	return out
}
