package plan

import (
	"fmt"
	"math"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/vram"
)

// engineOf is the preallocating engine of the workload's first pod that
// runs one; nil when none does.
func (w *Workload) engineOf() *vram.Preallocation {
	for _, p := range w.Pods {
		if p.Engine != nil {
			return p.Engine
		}
	}
	return nil
}

// engineModel is the model the workload serves, for an estimate of its
// need: the usage facts' model of one of its pods, or the built-in family
// that its engine's arguments name; and where it comes from. ok is false
// when neither gives one.
func (w *Workload) engineModel(e *vram.Preallocation, facts func(key string) *vram.ModelSpec) (vram.ModelSpec, string, bool) {
	for _, p := range w.Pods {
		if m := facts(p.Key()); m != nil {
			return *m, "the model of its usage facts", true
		}
	}
	if f, ok := vram.ModelFamily(e.Model); ok {
		if a, err := vram.Family(f); err == nil {
			return a.Spec(f), fmt.Sprintf("model %s (family %s)", e.Model, f), true
		}
	}
	return vram.ModelSpec{}, "", false
}

// sizeEngine sizes a workload whose engine preallocates GPU memory: its
// measured VRAM p95 is the preallocation, so the need is the vram
// estimate of the model it serves, with headroom, where the model is
// known; otherwise the p95 stays, and the note says why.
func (d *Decision) sizeEngine(w *Workload, perPod int, o Options) {
	e := w.Engine
	if e == nil || w.Observed.VRAMUsedP95 == 0 {
		return
	}
	takes := fmt.Sprintf("%s takes %.0f%% of each GPU's memory at start-up (%s)", e.Engine, 100*e.Fraction, settingText(e))
	spec, from, ok := w.engineModel(e, w.modelFacts)
	if !ok {
		d.engineNote = fmt.Sprintf("%s, so its VRAM p95 %s is that share, not its need; sized on it (give its model in the usage file, or serve a built-in family, for an estimate)", takes, w.Observed.VRAMUsedP95)
		return
	}
	est := vram.EstimateMemory(spec)
	d.VRAMNeed = gpu.MiB(math.Ceil(float64(est.PerGPU(perPod)) * (1 + o.Headroom)))
	d.engineNote = fmt.Sprintf("%s, so its VRAM p95 %s is that share, not its need: sized on the estimate of %s, %s per GPU plus %.0f%% headroom", takes, w.Observed.VRAMUsedP95, from, est.PerGPU(perPod), 100*o.Headroom)
}

func settingText(e *vram.Preallocation) string {
	if e.Default {
		return e.Setting + " not set: the default"
	}
	return fmt.Sprintf("%s=%s", e.Setting, fmt.Sprint(e.Fraction))
}

// fitEngines sets, for each workload moved to a share of a GPU whose
// engine preallocates, the engine's setting that keeps it within its
// share (After.Engine, which the webhook writes into the pod): on time
// slices and MPS clients, the fraction of the GPU that its VRAM limit is;
// on a MIG slice, which the engine sees as its whole GPU, the fraction of
// the slice its need is, when the engine's own takes less.
func (pl *Plan) fitEngines(c *gpu.Catalogue) {
	for _, d := range pl.Decisions {
		e := d.w.Engine
		if e == nil || (d.Action != Share && d.Action != Reclaim) || d.Method == Whole || d.After.VRAMLimit == 0 {
			continue
		}
		m, ok := c.Lookup(d.After.GPUModel)
		if !ok || !m.MemoryKnown() {
			continue
		}
		var fraction float64
		var why string
		switch d.Method {
		case MIG:
			need := min(d.VRAMNeed, d.After.VRAMLimit)
			if gpu.MiB(e.Fraction*float64(d.After.VRAMLimit)) >= need {
				continue
			}
			fraction = math.Min(1, math.Ceil(100*float64(need)/float64(d.After.VRAMLimit))/100)
			why = fmt.Sprintf("%s would take %.0f%% of the MIG slice, less than the %s it needs", e.Engine, 100*e.Fraction, need)
		default:
			fraction = vram.FractionFor(d.After.VRAMLimit, m.Usable)
			if fraction >= e.Fraction {
				continue
			}
			why = fmt.Sprintf("%s would take %.0f%% of the GPU, more than its %s share", e.Engine, 100*e.Fraction, d.After.VRAMLimit)
		}
		s := e.SettingFor(fraction)
		d.After.Engine = &s
		d.Reason.Detail += fmt.Sprintf("; %s: set %s (the webhook writes it into its pods)", why, s)
	}
}
