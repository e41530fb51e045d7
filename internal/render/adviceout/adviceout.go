// Package adviceout writes gpupack's advice on running GPU pods as the
// sentences that report, diagnose --running and the dashboard print, one
// wording for every edge: the bottleneck verdicts (usage.Bottleneck), the
// start-up fixes (usage.StartupFix) and the cluster against the field. It
// formats only; the judgements are usage's.
package adviceout

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// Change says what to change instead of adding GPUs, with the numbers
// the verdict rests on.
func Change(b *usage.Bottleneck) string {
	e := &b.Evidence
	switch b.Change.Kind {
	case usage.ReleaseGPU:
		return fmt.Sprintf("release the GPU (scale the pod to zero or remove its GPU request): active %s on average, idle %s of the time", pct(b.MeanActivity), pct(b.IdleRatio))
	case usage.CutMemoryTraffic:
		return fmt.Sprintf("cut memory traffic rather than add GPUs (quantise the weights, fuse kernels, or a GPU with more memory bandwidth): DRAM busy %s while the engines are active %s", pct(b.DRAMActive), pct(b.MeanActivity))
	case usage.KeepGPU:
		return fmt.Sprintf("keep: the GPU does the work (active %s on average); reserve it as a baseline", pct(b.MeanActivity))
	case usage.RaiseCPULimit:
		return fmt.Sprintf("raise the CPU limit from %s to %s cores: throttled %s of CFS periods%s, while the GPU idles %s of the time", cores(b.Change.FromCores), cores(b.Change.ToCores), pct(e.CPUThrottledRatio), used(e), pct(b.IdleRatio))
	case usage.StageDataLocally:
		return fmt.Sprintf("stage the input on node-local disk or cache it between passes: network receive %s while the GPU stays %s active", rate(e.NetworkReceiveBytesPerSecond), pct(b.MeanActivity))
	case usage.FasterStorage:
		return fmt.Sprintf("read the input from faster storage (node-local NVMe) with more loader workers and prefetching: disk reads %s while the GPU stays %s active", rate(e.DiskReadBytesPerSecond), pct(b.MeanActivity))
	case usage.OverlapTransfers:
		bus, r := "PCIe", e.PCIeRxBytesPerSecond
		if b.Input == "nvlink" {
			bus, r = "NVLink", e.NVLinkRxBytesPerSecond
		}
		return fmt.Sprintf("pin host memory and overlap copies with compute in larger batches: %s receive %s while the GPU stays %s active", bus, rate(r), pct(b.MeanActivity))
	case usage.ExportEvidence:
		if len(b.Change.Missing) == 0 {
			return fmt.Sprintf("look at the application (tokenisation, locks, batch size): the GPU stays %s active with neither CPU throttling nor input traffic", pct(b.MeanActivity))
		}
		return fmt.Sprintf("export %s: the GPU stays %s active and nothing measured says why", strings.Join(b.Change.Missing, ", "), pct(b.MeanActivity))
	}
	return ""
}

// Evidence is the verdict's evidence in a few words: CPU, the input rates
// and DRAM, each "-" where unknown.
func Evidence(b *usage.Bottleneck) string {
	e := &b.Evidence
	cpu := "-"
	if e.CPULimitCores.Known() {
		cpu = fmt.Sprintf("%s/%s cores, throttled %s", cores(e.CPUUsedCores), cores(e.CPULimitCores), pct(e.CPUThrottledRatio))
	}
	return fmt.Sprintf("cpu %s; net %s, disk %s, pcie rx %s, nvlink rx %s; dram %s", cpu, rate(e.NetworkReceiveBytesPerSecond), rate(e.DiskReadBytesPerSecond),
		rate(e.PCIeRxBytesPerSecond), rate(e.NVLinkRxBytesPerSecond), pct(b.DRAMActive))
}

// Counts is the pods per verdict: "2 cpu-bound, 3 input-bound, ...".
func Counts(counts []usage.VerdictCount) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%d %s", c.Pods, c.Verdict)
	}
	return strings.Join(parts, ", ")
}

func used(e *usage.Evidence) string {
	if !e.CPUUsedCores.Known() {
		return ""
	}
	return fmt.Sprintf(", using %s of %s cores while running", cores(e.CPUUsedCores), cores(e.CPULimitCores))
}

func pct(a usage.Amount) string {
	if !a.Known() {
		return "-"
	}
	return a.Fixed(100, 0, "%")
}

func cores(a usage.Amount) string {
	if !a.Known() {
		return "-"
	}
	return strconv.FormatFloat(a.Value(), 'f', -1, 64)
}

// rate prints bytes per second in decimal units.
func rate(a usage.Amount) string {
	if !a.Known() {
		return "-"
	}
	v := a.Value()
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 1, 64) + " GB/s"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 0, 64) + " MB/s"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + " kB/s"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B/s"
}

// Field puts the cluster's active-of-allocated ratio beside the published
// average, with its source; "" without a comparison.
func Field(f *usage.FieldComparison) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf("this cluster: %s of allocated GPU time active; the field: about %s GPU utilisation on average across %d clusters (%s)",
		f.ActiveOfAllocated.Fixed(100, 1, "%"), strconv.FormatFloat(f.Published.Ratio*100, 'f', -1, 64)+"%", f.Published.Clusters, f.Published.Source)
}

// StartupFix says what to change in where a workload's weights come from,
// and what it frees.
func StartupFix(f *usage.StartupFix) string {
	var change string
	switch f.Kind {
	case usage.WeightsOutOfImage:
		change = fmt.Sprintf("move the weights out of its %s image into a node-local cache or an image volume: its pull takes %s per start", gigabytes(f.ImageBytes), duration(f.SecondsPerStart))
	case usage.CacheDownload:
		change = fmt.Sprintf("cache the weights on the node (a hostPath or local PersistentVolume) instead of downloading them into an emptyDir at every start: %s per start", duration(f.SecondsPerStart))
	case usage.NodeLocalCache:
		change = fmt.Sprintf("copy the weights to a node-local cache: they load %s slower from %s than from %s (%s)", duration(f.SecondsPerStart), f.Storage, f.Baseline, duration(f.BaselineLoadSeconds))
	}
	return fmt.Sprintf("%s: %s; %d start(s) in the window, up to %s GPU-hours a month freed", f.Workload, change, f.Starts, f.GPUHoursPerMonth.Fixed(1, 2, ""))
}

func gigabytes(a usage.Amount) string { return a.Fixed(1e-9, 1, " GB") }

// duration prints seconds as a Go duration, whole seconds.
func duration(a usage.Amount) string {
	if !a.Known() {
		return "-"
	}
	return time.Duration(math.Round(a.Value()) * float64(time.Second)).String()
}
