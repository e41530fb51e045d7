// Package reportdiff compares two usage reports figure by figure, within a
// relative tolerance: the raw and the hourly accounting paths, and the
// computed and the recorded ones, prove that they agree with it. Only tests
// import it.
package reportdiff

import (
	"github.com/gpupack/gpupack/usage"

	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Disagreements lists where report got differs from report want by more
// than the ratio rel: for the cluster, every device and every pod, the
// allocated, active, idle, activity-unknown GPU-seconds, cost and energy;
// for the cluster and devices the capacity, unallocated and unsampled
// GPU-seconds; for pods their pattern's mean activity and idle ratio, and
// when they were first attached to and first used a GPU, the GPUs they
// held at start, and their hourly
// activity, the pods they shared a GPU with, their DRA claims and how
// their shared GPUs were split (attribution); for devices the seconds
// they were shared, by whom, those split per process, and their DRA
// device;
// the GPUs per model and hour (Hourly). It is how the
// raw path and the hourly path prove that they agree; empty when they do.
func Disagreements(want, got *usage.Report, rel float64) []string {
	var out []string
	differ := func(g, w usage.Amount) bool {
		if g.Known() != w.Known() {
			return true
		}
		d := math.Abs(g.Value() - w.Value())
		return d > 1e-6 && d > rel*math.Abs(w.Value())
	}
	totals := func(where string, w, g usage.Totals) {
		for _, f := range []struct {
			name string
			w, g usage.Amount
		}{
			{"allocated GPU-seconds", usage.Known(float64(w.AllocatedGPUSeconds)), usage.Known(float64(g.AllocatedGPUSeconds))},
			{"active GPU-seconds", w.ActiveGPUSeconds, g.ActiveGPUSeconds},
			{"idle GPU-seconds", w.IdleAllocatedGPUSeconds, g.IdleAllocatedGPUSeconds},
			{"activity-unknown GPU-seconds", usage.Known(float64(w.ActivityUnknownGPUSeconds)), usage.Known(float64(g.ActivityUnknownGPUSeconds))},
			{"cost", w.Cost, g.Cost},
			{"energy", w.EnergyJoules, g.EnergyJoules},
		} {
			if differ(f.g, f.w) {
				out = append(out, fmt.Sprintf("%s: %s %s, want %s", where, f.name, f.g, f.w))
			}
		}
	}
	capacity := func(where string, w, g usage.Capacity) {
		for _, f := range []struct {
			name string
			w, g usage.Seconds
		}{{"capacity", w.CapacityGPUSeconds, g.CapacityGPUSeconds}, {"unallocated GPU-seconds", w.UnallocatedGPUSeconds, g.UnallocatedGPUSeconds}, {"unsampled GPU-seconds", w.UnsampledGPUSeconds, g.UnsampledGPUSeconds}} {
			if differ(usage.Known(float64(f.g)), usage.Known(float64(f.w))) {
				out = append(out, fmt.Sprintf("%s: %s %v, want %v", where, f.name, f.g, f.w))
			}
		}
	}
	totals("cluster", want.Cluster.Totals, got.Cluster.Totals)
	capacity("cluster", want.Cluster.Capacity, got.Cluster.Capacity)
	if len(got.Devices) != len(want.Devices) || len(got.Pods) != len(want.Pods) || len(got.Containers) != len(want.Containers) {
		return append(out, fmt.Sprintf("%d devices, %d pods, %d containers; want %d, %d, %d", len(got.Devices), len(got.Pods), len(got.Containers), len(want.Devices), len(want.Pods), len(want.Containers)))
	}
	for i, d := range want.Devices {
		g := got.Devices[i]
		where := "device " + d.Key()
		if d.Uninstantiated {
			where += " (uninstantiated)"
		}
		if g.Key() != d.Key() || g.Uninstantiated != d.Uninstantiated || g.ActivitySource != d.ActivitySource {
			out = append(out, fmt.Sprintf("%s: got %s uninstantiated %v activity from %q, want %q", where, g.Key(), g.Uninstantiated, g.ActivitySource, d.ActivitySource))
			continue
		}
		totals(where, d.Totals, g.Totals)
		capacity(where, d.Capacity, g.Capacity)
		if differ(g.VRAMUsedMiB.Max, d.VRAMUsedMiB.Max) {
			out = append(out, fmt.Sprintf("%s: VRAM max %s, want %s", where, g.VRAMUsedMiB.Max, d.VRAMUsedMiB.Max))
		}
		if differ(usage.Known(float64(g.PerProcessSeconds)), usage.Known(float64(d.PerProcessSeconds))) {
			out = append(out, fmt.Sprintf("%s: %v s split per process, want %v", where, g.PerProcessSeconds, d.PerProcessSeconds))
		}
		if differ(usage.Known(float64(g.SharedSeconds)), usage.Known(float64(d.SharedSeconds))) || !slices.Equal(g.SharedBy, d.SharedBy) || g.DRADevice != d.DRADevice {
			out = append(out, fmt.Sprintf("%s: shared %v by %v, DRA device %q; want %v by %v, %q", where, g.SharedSeconds, g.SharedBy, g.DRADevice, d.SharedSeconds, d.SharedBy, d.DRADevice))
		}
	}
	for i, p := range want.Pods {
		g := got.Pods[i]
		where := "pod " + p.Key()
		if g.Key() != p.Key() || strings.Join(g.Devices, ",") != strings.Join(p.Devices, ",") {
			out = append(out, fmt.Sprintf("%s: got %s on %v, want on %v", where, g.Key(), g.Devices, p.Devices))
			continue
		}
		totals(where, p.Totals, g.Totals)
		if differ(g.Pattern.MeanActivity, p.Pattern.MeanActivity) || differ(g.Pattern.IdleRatio, p.Pattern.IdleRatio) {
			out = append(out, fmt.Sprintf("%s: mean activity %s idle ratio %s, want %s, %s", where, g.Pattern.MeanActivity, g.Pattern.IdleRatio, p.Pattern.MeanActivity, p.Pattern.IdleRatio))
		}
		if !sameTime(g.Startup.GPUAttached, p.Startup.GPUAttached) || !sameTime(g.Startup.FirstGPUUse, p.Startup.FirstGPUUse) {
			out = append(out, fmt.Sprintf("%s: attached %v first use %v, want %v, %v", where, g.Startup.GPUAttached, g.Startup.FirstGPUUse, p.Startup.GPUAttached, p.Startup.FirstGPUUse))
		}
		if differ(g.Startup.HeldGPUs, p.Startup.HeldGPUs) {
			out = append(out, fmt.Sprintf("%s: GPUs held at start %s, want %s", where, g.Startup.HeldGPUs, p.Startup.HeldGPUs))
		}
		if g.Attribution != p.Attribution {
			out = append(out, fmt.Sprintf("%s: attribution %q, want %q", where, g.Attribution, p.Attribution))
		}
		if !slices.Equal(g.SharedWith, p.SharedWith) || !slices.Equal(g.Claims, p.Claims) {
			out = append(out, fmt.Sprintf("%s: shared with %v, claims %v; want %v, %v", where, g.SharedWith, g.Claims, p.SharedWith, p.Claims))
		}
		if g.FirstHour != p.FirstHour || !levelsAgree(p.HourlyActivity, g.HourlyActivity, rel) {
			out = append(out, fmt.Sprintf("%s: hourly activity %v from hour %d, want %v from hour %d", where, g.HourlyActivity, g.FirstHour, p.HourlyActivity, p.FirstHour))
		}
	}
	if len(got.Hourly) != len(want.Hourly) {
		return append(out, fmt.Sprintf("hourly levels of %d models, want %d", len(got.Hourly), len(want.Hourly)))
	}
	for i, w := range want.Hourly {
		g := got.Hourly[i]
		for _, f := range []struct {
			name string
			w, g []float64
		}{{"allocated", w.AllocatedGPUs, g.AllocatedGPUs}, {"active", w.ActiveGPUs, g.ActiveGPUs}, {"idle", w.IdleGPUs, g.IdleGPUs}, {"activity-unknown", w.ActivityUnknownGPUs, g.ActivityUnknownGPUs}} {
			if g.Model != w.Model || !levelsAgree(f.w, f.g, rel) {
				out = append(out, fmt.Sprintf("hourly %s GPUs of %s: %v, want %v of %s", f.name, g.Model, f.g, f.w, w.Model))
			}
		}
	}
	return out
}

// levelsAgree compares hourly figures, which carry 4 decimals, within rel
// or their rounding.
func levelsAgree(want, got []float64, rel float64) bool {
	if len(want) != len(got) {
		return false
	}
	for h := range want {
		if d := math.Abs(got[h] - want[h]); d > 2e-4 && d > rel*math.Abs(want[h]) {
			return false
		}
	}
	return true
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
