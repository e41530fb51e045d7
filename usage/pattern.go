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

// Patterns are the patterns a measurement can give, in the order they are
// checked: the one list of their names.
var Patterns = []PatternName{IdleHeld, Busy, MemoryBound, Bursty, FlatLow, Moderate}

// Underused reports whether the pattern says the GPU is not the bottleneck.
func (p PatternName) Underused() bool { return p == IdleHeld || p == Bursty || p == FlatLow }

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

// BurstLevelActivity is the activity (ratio) at or above which a sample
// counts as a burst for the bursty pattern.
const BurstLevelActivity = burstLevelActivity

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

// ActivityStats are the statistics of activity samples (ratios 0..1) that
// a pattern is read from: how many there were, their sum, how many lay below
// the activity idle floor and how many at or above the burst level, and their
// 95th percentile. Account counts them from the samples; AccountBuckets adds
// up the counts that the query engine made per bucket.
type ActivityStats struct {
	Samples        float64
	Sum            float64
	BelowIdle      float64
	AtOrAboveBurst float64
	P95            float64
}

// activityStats counts the statistics of the samples, sorting them in place.
func activityStats(activity []float64) ActivityStats {
	st := ActivityStats{Samples: float64(len(activity))}
	if len(activity) == 0 {
		return st
	}
	for _, a := range activity {
		st.Sum += a
		if a < ActivityIdleFloor {
			st.BelowIdle++
		}
		if a >= burstLevelActivity {
			st.AtOrAboveBurst++
		}
	}
	st.P95 = percentiles(activity).P95.Value()
	return st
}

// classify reads the pattern from the activity statistics while held, the
// mean DRAM activity and the VRAM percentiles.
func classify(st ActivityStats, dram Amount, vram Percentiles) Pattern {
	p := Pattern{Name: UnknownPattern, DRAMActive: dram, VRAMUsedP95MiB: vram.P95}
	if st.Samples <= 0 {
		p.Recommendation = recommendations[p.Name]
		return p
	}
	n := st.Samples
	mean, p95, idle := st.Sum/n, st.P95, st.BelowIdle/n
	p.MeanActivity = Known(round4(mean))
	p.P95Activity = Known(round4(p95))
	p.IdleRatio = Known(round4(idle))
	p.BurstRatio = Known(round4(st.AtOrAboveBurst / n))
	switch {
	case p95 < idleHeldP95:
		p.Name = IdleHeld
	case mean >= busyMeanActivity:
		p.Name = Busy
	case dram.Known() && dram.Value() >= memoryBoundDRAM:
		p.Name = MemoryBound
	case idle >= burstyIdleRatio && p95 >= burstyP95Activity:
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
