package usage

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// StartupFixKind is a change to where a workload's model weights come
// from that shortens its every start.
type StartupFixKind string

// The start-up fixes.
const (
	// WeightsOutOfImage: the weights are baked into a large image that
	// every start on a node without it pulls; move them to a node-local
	// cache or an image volume, and keep the image small.
	WeightsOutOfImage StartupFixKind = "weights-out-of-image"
	// CacheDownload: an init container downloads the weights into an
	// emptyDir at every start; cache them on the node (a hostPath or local
	// PersistentVolume) so that a restart skips the download.
	CacheDownload StartupFixKind = "cache-download"
	// NodeLocalCache: the weights load from a PersistentVolumeClaim or a
	// CSI mount slower than this cluster loads them from a node-local
	// cache; copy them to the node once and load from there.
	NodeLocalCache StartupFixKind = "node-local-cache"
)

// weightsImageBytes is the image size (p50) from which an image that holds
// the weights counts as large: a gigabyte, a small model's weights.
const weightsImageBytes = 1e9

// month is the span the freed GPU-hours are given for: 30 days.
const month = 30 * 24 * time.Hour

// StartupFix is what a workload's start-ups would gain from a change to
// where its weights come from: the seconds per start the change removes
// (p50, at most), and the GPU-hours per month it frees, from the
// workload's measured starts in the window and the GPUs it held during
// the phases removed.
type StartupFix struct {
	Workload string         `json:"workload"`
	Storage  string         `json:"storage"`
	Kind     StartupFixKind `json:"kind"`
	// Starts are the workload's pods that started in the window.
	Starts int `json:"starts"`
	// SecondsPerStart is the p50 of the phase removed: the image pull,
	// the download, or the load's excess over the node-local cache's.
	SecondsPerStart Amount `json:"secondsPerStart"`
	// ImageBytes is the image's size (p50), for WeightsOutOfImage.
	ImageBytes Amount `json:"imageBytes"`
	// Baseline and BaselineLoadSeconds are the node-local storage path
	// compared with and its load (p50), for NodeLocalCache.
	Baseline            string `json:"baseline,omitempty"`
	BaselineLoadSeconds Amount `json:"baselineLoadSeconds"`
	// GPUHoursPerMonth are the GPU-hours held during the phase removed in
	// the window, scaled from the window to 30 days.
	GPUHoursPerMonth Amount `json:"gpuHoursPerMonth"`
}

// startupFixes gives the fix of each kept workload whose storage path
// calls for one, the most GPU-hours freed first: the window's length
// scales the held GPU-seconds to a month; the node-local path (the
// fastest hostpath load) is the baseline for a PVC or CSI path.
func startupFixes(workloads, paths []StartupGroup, window time.Duration) []StartupFix {
	if window <= 0 {
		return nil
	}
	perMonth := float64(month) / float64(window)
	base := nodeLocal(paths)
	var out []StartupFix
	for i := range workloads {
		if f, ok := startupFix(&workloads[i], base, perMonth); ok {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b StartupFix) int { return cmp.Compare(b.GPUHoursPerMonth.Value(), a.GPUHoursPerMonth.Value()) })
	return out
}

// nodeLocal is the node-local cache's storage path group, nil if the
// window has no load from one.
func nodeLocal(paths []StartupGroup) *StartupGroup {
	for i := range paths {
		if paths[i].Key == StorageHostPath && paths[i].Load.P50.Known() {
			return &paths[i]
		}
	}
	return nil
}

// startupFix is the fix of workload g, if its storage path calls for one
// and the GPUs held during the phase it removes are known.
func startupFix(g *StartupGroup, base *StartupGroup, perMonth float64) (StartupFix, bool) {
	f := StartupFix{Workload: g.Key, Storage: g.Storage, Starts: g.Pods}
	var held Amount
	switch kind, _, _ := strings.Cut(g.Storage, "/"); {
	case kind == StorageImage && g.ImageBytes.P50.Known() && g.ImageBytes.P50.Value() >= weightsImageBytes:
		pull := g.phase(PhaseImagePull)
		f.Kind, f.SecondsPerStart, f.ImageBytes, held = WeightsOutOfImage, pull.Seconds.P50, g.ImageBytes.P50, pull.HeldGPUSeconds
	case kind == StorageDownload:
		init := g.phase(PhaseInit)
		f.Kind, f.SecondsPerStart, held = CacheDownload, init.Seconds.P50, init.HeldGPUSeconds
	case (kind == StoragePVC || kind == StorageCSI) && base != nil && g.Load.P50.Known() && g.Load.P50.Value() > base.Load.P50.Value():
		load, excess := g.Load.P50.Value(), g.Load.P50.Value()-base.Load.P50.Value()
		f.Kind, f.SecondsPerStart, f.Baseline, f.BaselineLoadSeconds = NodeLocalCache, Known(excess), base.Key, base.Load.P50
		// The load is the two phases from the containers' start; the
		// GPUs held in them, in the share of the load that is excess.
		a, b := g.phase(PhaseToFirstUse).HeldGPUSeconds, g.phase(PhaseFirstUseToReady).HeldGPUSeconds
		if s := addKnown(a, b); s.Known() {
			held = Known(s.Value() * excess / load)
		}
	default:
		return StartupFix{}, false
	}
	if !held.Known() || held.Value() <= 0 || !f.SecondsPerStart.Known() || f.SecondsPerStart.Value() <= 0 {
		return StartupFix{}, false
	}
	f.GPUHoursPerMonth = Known(round4(held.Value() * perMonth / 3600))
	return f, true
}

// phase is the group's statistics of the named phase.
func (g *StartupGroup) phase(name string) PhaseStats {
	for _, p := range g.Phases {
		if p.Phase == name {
			return p
		}
	}
	return PhaseStats{Phase: name}
}
