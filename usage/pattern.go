package usage

import "math"

// PatternName is how a pod used the GPUs it held.
type PatternName string

// The patterns, checked in this order.
const (
	// IdleHeld pods hold a GPU and almost never use it: reclaim it.
	IdleHeld PatternName = "idle-held"
	// Busy pods use their GPU well.
	Busy PatternName = "busy"
	// MemoryBound pods keep DRAM busy while the engines wait.
	MemoryBound PatternName = "memory-bound"
	// Bursty pods alternate near-idle stretches with short bursts: the
	// GPU waits on the CPU or the data pipeline.
	Bursty PatternName = "bursty"
	// FlatLow pods run steadily low: I/O or network bound.
	FlatLow PatternName = "flat-low"
	// Moderate pods run steadily at a middling level.
	Moderate PatternName = "moderate"
	// UnknownPattern pods had no activity samples.
	UnknownPattern PatternName = "unknown"
)

// The thresholds of the patterns, as ratios 0..1.
const (
	busyMeanActivity   = 0.6
	idleHeldP95        = ActivityIdleFloor
	memoryBoundDRAM    = 0.4
	burstyIdleRatio    = 0.3
	burstyP95Activity  = 0.3
	flatLowMeanBelow   = 0.3
	burstLevelActivity = 0.3
)

// Pattern is a pod's usage pattern with the numbers behind it.
type Pattern struct {
	Name PatternName `json:"name"`
	// MeanActivity and P95Activity are over the samples while held.
	MeanActivity Amount `json:"meanActivity"`
	P95Activity  Amount `json:"p95Activity"`
	// IdleRatio is the share of samples below the activity idle floor;
	// BurstRatio the share above the burst level.
	IdleRatio      Amount `json:"idleRatio"`
	BurstRatio     Amount `json:"burstRatio"`
	DRAMActive     Amount `json:"dramActiveMean"`
	VRAMUsedP95MiB Amount `json:"vramUsedP95MiB"`
	// Recommendation is one line on what to do.
	Recommendation string `json:"recommendation"`
}

var recommendations = map[PatternName]string{
	IdleHeld:       "reclaim: the pod holds a GPU it does not use; scale it to zero or remove its GPU request",
	Busy:           "keep: the GPU is well used; buy reservations for this baseline",
	MemoryBound:    "share by MIG or a smaller GPU: memory traffic, not compute, limits it",
	Bursty:         "share by time-slicing and look at CPU limits and the data loader: the GPU waits between bursts",
	FlatLow:        "share by time-slicing or MPS and look at I/O and network: the GPU is steadily underfed",
	Moderate:       "consider MPS or a MIG slice sized to its VRAM",
	UnknownPattern: "export DCGM activity metrics for this pod's GPU",
}

// classify reads the pattern from the activity samples (sorted in place)
// while held, the mean DRAM activity and the VRAM percentiles.
func classify(activity []float64, dram Amount, vram Percentiles) Pattern {
	p := Pattern{Name: UnknownPattern, DRAMActive: dram, VRAMUsedP95MiB: vram.P95}
	if len(activity) == 0 {
		p.Recommendation = recommendations[p.Name]
		return p
	}
	var sum float64
	idle, burst := 0, 0
	for _, a := range activity {
		sum += a
		if a < ActivityIdleFloor {
			idle++
		}
		if a >= burstLevelActivity {
			burst++
		}
	}
	n := float64(len(activity))
	mean := sum / n
	p95 := percentiles(activity).P95.Value
	p.MeanActivity = Known(round4(mean))
	p.P95Activity = Known(round4(p95))
	p.IdleRatio = Known(round4(float64(idle) / n))
	p.BurstRatio = Known(round4(float64(burst) / n))
	switch {
	case p95 < idleHeldP95:
		p.Name = IdleHeld
	case mean >= busyMeanActivity:
		p.Name = Busy
	case dram.Known && dram.Value >= memoryBoundDRAM:
		p.Name = MemoryBound
	case float64(idle)/n >= burstyIdleRatio && p95 >= burstyP95Activity:
		p.Name = Bursty
	case mean < flatLowMeanBelow:
		p.Name = FlatLow
	default:
		p.Name = Moderate
	}
	p.Recommendation = recommendations[p.Name]
	return p
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// tailShare is the largest share of samples above the 95th percentile.
const tailShare = 0.05

// MeanActivityRange is the range, inclusive, of mean activity that a pod
// classified as the pattern can have by the thresholds above: an idle-held
// pod's 95th percentile is below the idle floor, so its mean is below
// 0.95 x floor + 0.05; a busy one's mean is at least 0.6, and so on. A
// usage file whose activity lies outside its pattern's range contradicts
// itself. ok is false for a name that is not a pattern, or unknown.
func MeanActivityRange(name PatternName) (lo, hi float64, ok bool) {
	// Every pattern but idle-held has a 95th percentile at the idle floor
	// or above, so at least a tail share of its samples are there.
	notIdle := tailShare * idleHeldP95
	switch name {
	case IdleHeld:
		return 0, (1-tailShare)*idleHeldP95 + tailShare, true
	case Busy:
		return busyMeanActivity, 1, true
	case MemoryBound:
		return notIdle, busyMeanActivity, true
	case Bursty:
		return tailShare * burstyP95Activity, busyMeanActivity, true
	case FlatLow:
		return notIdle, flatLowMeanBelow, true
	case Moderate:
		return flatLowMeanBelow, busyMeanActivity, true
	}
	return 0, 0, false
}
