package usage

import "math"

// How a pod's figures on shared GPUs were measured (PodUsage.Attribution).
// DCGM reports a GPU's activity and framebuffer once for the device, so a
// GPU held by several pods at once (time-slicing, MPS) is split among
// them: by what each pod's processes used, where `gpupack agent`'s
// per-pod series (PodSMActive, PodFBUsed) cover every pod on it at that
// step, else evenly.
const (
	// AttributionExclusive: the pod never shared a GPU; its figures are
	// its devices' own.
	AttributionExclusive = "exclusive"
	// AttributionPerProcess: at every shared step the pod was credited
	// the device time its processes used, plus an equal share of the
	// device's unused time, and its own framebuffer.
	AttributionPerProcess = "per-process"
	// AttributionEvenSplit: at every shared step the pod was credited an
	// equal share of the device's time at the device's activity, and the
	// device's framebuffer.
	AttributionEvenSplit = "even-split"
	// AttributionMixed: some shared steps one way, some the other.
	AttributionMixed = "mixed"
)

// attributionOf names how a pod's shared steps were split.
func attributionOf(shared bool, perProcess, evenSplit float64) string {
	switch {
	case !shared && perProcess == 0 && evenSplit == 0:
		return AttributionExclusive
	case perProcess > 0 && evenSplit > 0:
		return AttributionMixed
	case perProcess > 0:
		return AttributionPerProcess
	}
	return AttributionEvenSplit
}

// agentMetric says which of the agent's series a metric is: 0 for
// PodSMActive, 1 for PodFBUsed, -1 for neither.
func agentMetric(metric string) int {
	switch metric {
	case PodSMActive:
		return 0
	case PodFBUsed:
		return 1
	}
	return -1
}

// ownFigures are one owner's own activity and framebuffer per slot, from
// the agent's series (NaN where it has none).
type ownFigures struct {
	sm, fb []float64
}

func newOwnFigures(slots int) *ownFigures {
	f := &ownFigures{sm: make([]float64, slots), fb: make([]float64, slots)}
	for k := range slots {
		f.sm[k], f.fb[k] = math.NaN(), math.NaN()
	}
	return f
}

// slotShare is what one present owner is credited at a slot: its
// GPU-seconds, the activity of those (active = gs x activity), its own
// activity of the whole device (for its percentiles and pattern), its
// framebuffer and its share of the slot's energy.
type slotShare struct {
	gs, activity, own, fb, energy float64
}

// split fills a.shares for the present owners of slot k: per process when
// the device is shared by several pods and every owner present has the
// agent's activity at k, else evenly. It says whether it split per
// process.
func (a *rawAccount) split(k int, sec, share, activity, fb, energy float64, shared bool) bool {
	a.shares = a.shares[:0]
	n := float64(len(a.present))
	if shared && a.ownKnown(k) {
		var total float64
		for _, o := range a.present {
			total += max(0, o.own.sm[k])
		}
		idle := max(0, 1-total) / n
		for _, o := range a.present {
			own := max(0, o.own.sm[k])
			s := slotShare{gs: sec * share * (own + idle), own: own, fb: o.own.fb[k]}
			if total > 1 {
				s.gs = sec * share * own / total
			}
			if s.gs > 0 {
				s.activity = min(1, sec*share*own/s.gs)
			}
			if math.IsNaN(s.fb) {
				s.fb = fb
			}
			s.energy = energy * s.gs / (sec * share)
			a.shares = append(a.shares, s)
		}
		return true
	}
	for range a.present {
		a.shares = append(a.shares, slotShare{gs: sec * share / n, activity: activity, own: activity, fb: fb, energy: energy / n})
	}
	return false
}

// ownKnown says every owner present at slot k has the agent's activity.
func (a *rawAccount) ownKnown(k int) bool {
	for _, o := range a.present {
		if o.own == nil || math.IsNaN(o.own.sm[k]) {
			return false
		}
	}
	return true
}
