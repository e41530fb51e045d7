package usage

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/yamldoc"
	"github.com/gpupack/gpupack/vram"
)

// PodFacts is what is known of one pod's use of its GPUs over a window, in
// the one shape that Report.Facts gives, the usage file carries and
// diagnose and plan read. For a bound pod it is its measured use; for a
// pending pod, what its model needs. Missing figures are unknown, never
// zero: each has its own flag or nil.
type PodFacts struct {
	// Measured is true when ActiveRatio and Pattern were measured.
	Measured bool
	// ActiveRatio is the mean activity of the pod's GPUs over the window,
	// 0..1.
	ActiveRatio float64
	Pattern     PatternName
	// VRAMUsedP95 is the 95th percentile of the framebuffer used, over all
	// the pod's GPUs; meaningful when VRAMMeasured (a measured 0 is 0).
	VRAMUsedP95  gpu.MiB
	VRAMMeasured bool
	// GPUMemory is the GPU memory the pod states it needs in all (the
	// role of an annotation); 0 when not stated.
	GPUMemory gpu.MiB
	// Model describes the model the pod serves or trains, for an estimate
	// of its GPU memory; nil when unknown.
	Model *vram.ModelSpec
	// IdleHeldRatio is the share of the window, 0..1, during which the pod
	// held its GPUs with no activity; meaningful when IdleHeldMeasured.
	IdleHeldRatio    float64
	IdleHeldMeasured bool
	// HourlyActivity is the mean activity of the pod's GPUs in each hour
	// of the window from hour FirstHour on (0 is the window's first), 0..1
	// each (PodUsage.HourlyActivity); nil when not measured. Hours outside
	// it had no activity. The planner reads it to find the GPUs busy in
	// every hour.
	HourlyActivity []float64
	FirstHour      int
	// SharedWith are the other pods ("namespace/name") that held one of
	// the pod's GPUs at the same time (PodUsage.SharedWith). DCGM reports
	// a GPU's framebuffer and activity once for the device, so on a GPU
	// shared by time slices or MPS the pod's VRAM p95 and activity are
	// those of every pod on it; OwnShare says how much of them to credit
	// to the pod.
	SharedWith []string
	// PerProcess says the pod's VRAM p95 and activity on its shared GPUs
	// are its own, measured by `gpupack agent` at every step it shared
	// one (PodUsage.Attribution is AttributionPerProcess), not the whole
	// GPU's.
	PerProcess bool
}

// OwnShare is the share, 0..1, of its GPUs' VRAM and activity credited to
// the pod: all of it on a GPU it held alone or where its figures are its
// own (PerProcess), else an equal share with each pod it shared one with
// (SharedWith). DCGM does not measure a shared GPU's framebuffer per
// process, so without the agent the equal split, the one the accounting
// uses for GPU-seconds, is an estimate.
func (f PodFacts) OwnShare() float64 {
	if f.PerProcess {
		return 1
	}
	return 1 / float64(1+len(f.SharedWith))
}

// Facts are the per-pod usage facts of a window, by pod key
// ("namespace/name"), with the GPUs allocated and active per GPU model and
// hour (Report.Hourly) where they were measured.
type Facts struct {
	Window time.Duration
	Pods   map[string]PodFacts
	Hourly []ModelHours
	// Unhealthy are the GPUs that reported an XID marking them unhealthy
	// in the window, sorted by node and UUID.
	Unhealthy []UnhealthyGPU
}

// Facts gives the report's per-pod facts: per pod with anything measured,
// its mean activity and pattern, VRAM p95, idle-held share and hourly
// activity, and the GPUs per model and hour. Pods with nothing measured are
// left out rather than given as 0.
func (r *Report) Facts() *Facts {
	f := &Facts{Window: r.End.Sub(r.Start), Pods: make(map[string]PodFacts, len(r.Pods)), Hourly: r.Hourly, Unhealthy: unhealthy(r.Health)}
	for _, p := range r.Pods {
		var pf PodFacts
		if m := p.Pattern.MeanActivity; m.Known() && p.Pattern.Name != "" && p.Pattern.Name != UnknownPattern {
			pf.Measured, pf.ActiveRatio, pf.Pattern = true, m.Value(), p.Pattern.Name
		}
		if v := p.VRAMUsedMiB.P95; v.Known() {
			pf.VRAMUsedP95, pf.VRAMMeasured = gpu.MiB(v.Value()), true
		}
		if idle := p.Pattern.IdleRatio; idle.Known() {
			pf.IdleHeldRatio, pf.IdleHeldMeasured = round4(min(max(idle.Value(), 0), 1)), true
		}
		pf.HourlyActivity, pf.FirstHour = p.HourlyActivity, p.FirstHour
		pf.SharedWith, pf.PerProcess = p.SharedWith, p.Attribution == AttributionPerProcess
		if !pf.Measured && !pf.VRAMMeasured && !pf.IdleHeldMeasured && pf.HourlyActivity == nil {
			continue
		}
		f.Pods[p.Key()] = pf
	}
	return f
}

// Unmatched lists, sorted, the pods of f that are not in s: pods that ended
// since the measurement, a typo, or the usage of another cluster. Their
// facts reach no finding.
func (f *Facts) Unmatched(s *cluster.Snapshot) []string {
	known := make(map[string]bool, len(s.Pods))
	for _, p := range s.Pods {
		known[p.Key()] = true
	}
	var out []string
	for key := range f.Pods {
		if !known[key] {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// FactsAPIVersion and FactsKind identify the usage file.
const (
	FactsAPIVersion = "gpupack.io/v1alpha1"
	FactsKind       = "PodUsage"
)

// FactsFile is the usage file, YAML or JSON, that `gpupack report --format
// podusage` writes (Facts.File) and `diagnose --usage` and `plan --usage`
// read (ParseFacts):
//
//	apiVersion: gpupack.io/v1alpha1
//	kind: PodUsage
//	window: 1h
//	pods:
//	- pod: ml/train-0
//	  activity: 0.04        # mean SM activity over the window, 0..1
//	  pattern: idle-held    # idle-held, bursty, flat-low, memory-bound, busy, moderate
//	  vramUsedP95: 3Gi
//	  idleHeldRatio: 0.9    # share of the window held without activity, 0..1
//	  hourlyActivity: [0.1, 0.0, 0.4]   # mean activity per hour of the window
//	  firstHour: 0          # the hour hourlyActivity starts at (0: the first)
//	  sharedWith: [ml/train-1]  # pods that held one of its GPUs at the same time
//	  perProcess: true      # activity and vramUsedP95 are its own (gpupack agent), not the shared GPU's
//	- pod: ml/llm-70b       # a pending pod: what its model needs
//	  model: {params: 70B, dtype: fp16, context: 4096, batch: 1, layers: 80, hidden: 8192}
//	  gpuMemory: 150Gi      # or the need stated outright
//	hourly:                 # GPUs per model and hour of the window, as report measured them
//	- {model: NVIDIA H100 80GB HBM3, allocatedGPUs: [2, 2, 1.5], activeGPUs: [0.4, 0.5, 0.2], idleGPUs: [1.6, 1.5, 1.3], activityUnknownGPUs: [0, 0, 0]}
type FactsFile struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Window     string         `json:"window,omitempty"`
	Pods       []FactsFilePod `json:"pods"`
	// Hourly is the GPUs per model and hour (Facts.Hourly), which cap the
	// planner's reservation level hour by hour; optional: without it no
	// hour is capped.
	Hourly []ModelHours `json:"hourly,omitempty"`
	// UnhealthyGPUs are the GPUs that reported an XID marking them
	// unhealthy; optional: without them no GPU is.
	UnhealthyGPUs []UnhealthyGPU `json:"unhealthyGPUs,omitempty"`
}

// FactsFilePod is one pod's entry in the usage file.
type FactsFilePod struct {
	Pod         string          `json:"pod"`
	Activity    *float64        `json:"activity,omitempty"`
	Pattern     string          `json:"pattern,omitempty"`
	VRAMUsedP95 string          `json:"vramUsedP95,omitempty"`
	GPUMemory   string          `json:"gpuMemory,omitempty"`
	Model       *FactsFileModel `json:"model,omitempty"`
	// IdleHeldRatio and HourlyActivity are for the planner (PodFacts'
	// fields of the same names); optional: without them they are not
	// measured.
	IdleHeldRatio  *float64  `json:"idleHeldRatio,omitempty"`
	HourlyActivity []float64 `json:"hourlyActivity,omitempty"`
	// FirstHour is the hour of the window hourlyActivity starts at, 0 if
	// left out.
	FirstHour int `json:"firstHour,omitempty"`
	// SharedWith are the pods that held one of its GPUs at the same time
	// (PodFacts.SharedWith); optional: without it the pod held its GPUs
	// alone.
	SharedWith []string `json:"sharedWith,omitempty"`
	// PerProcess says activity and vramUsedP95 are the pod's own on its
	// shared GPUs (PodFacts.PerProcess); optional: without it they are
	// the whole GPU's.
	PerProcess bool `json:"perProcess,omitempty"`
}

// FactsFileModel is a model description in the usage file: a built-in
// family (vram.Families) or a parameter count, and for the KV cache the
// layers with the hidden size (full multi-head attention) or the KV heads
// and head dimension (grouped-query attention). Figures given override the
// family's.
type FactsFileModel struct {
	Family  string `json:"family,omitempty"`
	Params  string `json:"params,omitempty"`
	DType   string `json:"dtype,omitempty"`
	KVDType string `json:"kvDtype,omitempty"`
	Context int    `json:"context,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	Layers  int    `json:"layers,omitempty"`
	Hidden  int    `json:"hidden,omitempty"`
	KVHeads int    `json:"kvHeads,omitempty"`
	HeadDim int    `json:"headDim,omitempty"`
}

// File gives the usage file of the facts, pods sorted by key; ParseFacts
// reads it back as f. Models are not written (measurement does not give
// them), nor pods that had only a model.
func (f *Facts) File() FactsFile {
	out := FactsFile{APIVersion: FactsAPIVersion, Kind: FactsKind, Window: f.Window.String(), Hourly: f.Hourly, UnhealthyGPUs: f.Unhealthy}
	keys := make([]string, 0, len(f.Pods))
	for k := range f.Pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		p := f.Pods[key]
		e := FactsFilePod{Pod: key, HourlyActivity: p.HourlyActivity, FirstHour: p.FirstHour, SharedWith: p.SharedWith, PerProcess: p.PerProcess}
		if p.Measured {
			v := p.ActiveRatio
			e.Activity, e.Pattern = &v, string(p.Pattern)
		}
		if p.VRAMMeasured {
			e.VRAMUsedP95 = cluster.FormatMemory(p.VRAMUsedP95)
		}
		if p.GPUMemory > 0 {
			e.GPUMemory = cluster.FormatMemory(p.GPUMemory)
		}
		if p.IdleHeldMeasured {
			v := p.IdleHeldRatio
			e.IdleHeldRatio = &v
		}
		if e.Activity == nil && e.VRAMUsedP95 == "" && e.GPUMemory == "" && e.IdleHeldRatio == nil && e.HourlyActivity == nil {
			continue // a model was all it had
		}
		out.Pods = append(out.Pods, e)
	}
	return out
}

// ParseFacts reads a usage file: exactly one YAML or JSON document. source
// names it in errors, which give the path of the offending field
// ("pods[2]: activity"), and for wrong types, unknown fields and numbers out
// of range also the line. Unknown fields, duplicate pods, ratios outside
// 0..1, unknown patterns, a pattern that its activity contradicts and
// impossible quantities are rejected.
func ParseFacts(data []byte, source string) (*Facts, error) {
	var f FactsFile
	if _, err := yamldoc.Decode(data, source, &f); err != nil {
		return nil, err
	}
	u, err := f.Facts()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return u, nil
}

// Facts validates the document and builds the facts.
func (f *FactsFile) Facts() (*Facts, error) {
	if f.APIVersion != FactsAPIVersion {
		return nil, fmt.Errorf("apiVersion %q: want %q", f.APIVersion, FactsAPIVersion)
	}
	if f.Kind != FactsKind {
		return nil, fmt.Errorf("kind %q: want %q", f.Kind, FactsKind)
	}
	u := &Facts{Window: time.Hour, Pods: make(map[string]PodFacts, len(f.Pods))}
	if f.Window != "" {
		w, err := ParseWindow(f.Window)
		if err != nil {
			return nil, fmt.Errorf("window %w", err)
		}
		u.Window = w
	}
	hours := windowHours(u.Window)
	seen := make(map[string]int, len(f.Pods))
	for i, p := range f.Pods {
		facts, err := p.facts(hours)
		if err != nil {
			return nil, fmt.Errorf("pods[%d]: %w", i, err)
		}
		if prev, dup := seen[p.Pod]; dup {
			return nil, fmt.Errorf("pods[%d].pod: %q is already listed at pods[%d]", i, p.Pod, prev)
		}
		seen[p.Pod] = i
		u.Pods[p.Pod] = facts
	}
	models := map[string]int{}
	for i, m := range f.Hourly {
		if err := m.check(hours); err != nil {
			return nil, fmt.Errorf("hourly[%d]: %w", i, err)
		}
		if prev, dup := models[m.Model]; dup {
			return nil, fmt.Errorf("hourly[%d].model: %q is already listed at hourly[%d]", i, m.Model, prev)
		}
		models[m.Model] = i
	}
	u.Hourly = f.Hourly
	if err := checkUnhealthy(f.UnhealthyGPUs); err != nil {
		return nil, err
	}
	u.Unhealthy = f.UnhealthyGPUs
	return u, nil
}

// windowHours is the hours a window spans, a last partial one included.
func windowHours(w time.Duration) int { return int((w + time.Hour - 1) / time.Hour) }

// maxGPUsPerHour bounds the GPUs per model and hour a file may state.
const maxGPUsPerHour = 1 << 20

// check validates one model's hourly levels against a window of hours.
func (m *ModelHours) check(windowHours int) error {
	if m.Model == "" {
		return fmt.Errorf("model: missing; give the GPU model the levels are of")
	}
	n := len(m.AllocatedGPUs)
	if n == 0 || n > windowHours {
		return fmt.Errorf("allocatedGPUs: %d hours listed, the window has %d; give one value per hour of the window", n, windowHours)
	}
	for name, v := range map[string][]float64{"activeGPUs": m.ActiveGPUs, "idleGPUs": m.IdleGPUs, "activityUnknownGPUs": m.ActivityUnknownGPUs} {
		if len(v) != n {
			return fmt.Errorf("%s: %d hours listed, allocatedGPUs has %d; give both for every hour", name, len(v), n)
		}
	}
	for h := range n {
		a := m.AllocatedGPUs[h]
		parts := m.ActiveGPUs[h] + m.IdleGPUs[h] + m.ActivityUnknownGPUs[h]
		for name, v := range map[string]float64{"allocatedGPUs": a, "activeGPUs": m.ActiveGPUs[h], "idleGPUs": m.IdleGPUs[h], "activityUnknownGPUs": m.ActivityUnknownGPUs[h]} {
			if math.IsNaN(v) || v < 0 || v > maxGPUsPerHour {
				return fmt.Errorf("%s[%d]: %v is not a number of GPUs (want 0..%d)", name, h, v, maxGPUsPerHour)
			}
		}
		if math.Abs(parts-a) > hourlySlack*max(1, a) {
			return fmt.Errorf("hour %d: activeGPUs + idleGPUs + activityUnknownGPUs = %v, but allocatedGPUs = %v; the parts must add up to the allocation (write the file with `gpupack report --format podusage`)", h, parts, a)
		}
	}
	return nil
}

// hourlySlack allows for the 4 decimals that hourly levels carry.
const hourlySlack = 1e-3

// MaxWindow is the longest usage window gpupack accepts.
const MaxWindow = 90 * 24 * time.Hour

// ParseWindow reads a window length: a Go duration ("1h", "30m", "168h")
// or whole days ("7d"), more than 0 and at most 90 days.
func ParseWindow(s string) (time.Duration, error) {
	w, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, aerr := strconv.Atoi(days)
		w, err = time.Duration(n)*24*time.Hour, aerr
		if n > 90 {
			w = MaxWindow + 1
		}
	}
	if err != nil || w <= 0 || w > MaxWindow {
		return 0, fmt.Errorf("%q: want a duration such as 7d, 24h or 30m, at most 90 days", s)
	}
	return w, nil
}
func (p *FactsFilePod) facts(windowHours int) (PodFacts, error) {
	var facts PodFacts
	if key, err := cluster.ParsePodKey(p.Pod); err != nil || key.Namespace == "" {
		return facts, fmt.Errorf("pod: %q: want namespace/name", p.Pod)
	}
	switch {
	case p.Activity != nil:
		a := *p.Activity
		if math.IsNaN(a) || a < 0 || a > 1 {
			return facts, fmt.Errorf("activity: %v is not a ratio (want 0..1; 0.04 is 4%%)", a)
		}
		if p.Pattern == "" {
			return facts, fmt.Errorf("pattern: missing; give one of %s with activity", patternNames())
		}
		facts.Measured, facts.ActiveRatio = true, a
	case p.Pattern != "":
		return facts, fmt.Errorf("activity: missing; a pattern comes with the activity it was measured with")
	}
	if p.Pattern != "" {
		lo, hi, ok := MeanActivityRange(PatternName(p.Pattern))
		if !ok {
			return facts, fmt.Errorf("pattern: %q (want one of %s)", p.Pattern, patternNames())
		}
		if a := facts.ActiveRatio; a < lo-roundingSlack || a > hi+roundingSlack {
			return facts, fmt.Errorf("pattern: %s contradicts activity %v: the mean activity of %s pods is %v..%v; correct one of them, or write the file from a measurement with `gpupack report --format podusage`",
				p.Pattern, a, p.Pattern, lo, hi)
		}
		facts.Pattern = PatternName(p.Pattern)
	}
	var err error
	if p.VRAMUsedP95 != "" {
		// A measured 0 is a fact: the pod never touched its framebuffer.
		if facts.VRAMUsedP95, err = memory(p.VRAMUsedP95, 0); err != nil {
			return facts, fmt.Errorf("vramUsedP95: %w", err)
		}
		facts.VRAMMeasured = true
	}
	if facts.GPUMemory, err = optionalMemory(p.GPUMemory); err != nil {
		return facts, fmt.Errorf("gpuMemory: %w", err)
	}
	if p.Model != nil {
		spec, err := p.Model.spec()
		if err != nil {
			return facts, fmt.Errorf("model.%w", err)
		}
		facts.Model = &spec
	}
	if r := p.IdleHeldRatio; r != nil {
		if math.IsNaN(*r) || *r < 0 || *r > 1 {
			return facts, fmt.Errorf("idleHeldRatio: %v is not a ratio (want 0..1; 0.9 is 90%% of the window)", *r)
		}
		facts.IdleHeldRatio, facts.IdleHeldMeasured = *r, true
	}
	if p.FirstHour < 0 || p.FirstHour > 0 && p.HourlyActivity == nil {
		return facts, fmt.Errorf("firstHour: %d; want the hour (0 or more) that hourlyActivity starts at, with hourlyActivity", p.FirstHour)
	}
	if n := len(p.HourlyActivity); n > 0 {
		if p.FirstHour+n > windowHours {
			return facts, fmt.Errorf("hourlyActivity: %d hours listed from hour %d, the window has %d; give one value per hour of the window", n, p.FirstHour, windowHours)
		}
		for i, a := range p.HourlyActivity {
			if math.IsNaN(a) || a < 0 || a > 1 {
				return facts, fmt.Errorf("hourlyActivity[%d]: %v is not a ratio (want 0..1)", i, a)
			}
		}
		facts.HourlyActivity, facts.FirstHour = p.HourlyActivity, p.FirstHour
	}
	if err := checkSharedWith(p.Pod, p.SharedWith); err != nil {
		return facts, err
	}
	facts.SharedWith, facts.PerProcess = p.SharedWith, p.PerProcess
	if !facts.Measured && !facts.VRAMMeasured && facts.GPUMemory == 0 && facts.Model == nil && !facts.IdleHeldMeasured && facts.HourlyActivity == nil {
		return facts, fmt.Errorf("no facts: give activity and pattern, vramUsedP95, gpuMemory, model, idleHeldRatio or hourlyActivity")
	}
	return facts, nil
}

// checkSharedWith validates the pods that pod shared a GPU with: keys of
// other pods, each once.
func checkSharedWith(pod string, shared []string) error {
	seen := make(map[string]int, len(shared))
	for i, other := range shared {
		if key, err := cluster.ParsePodKey(other); err != nil || key.Namespace == "" {
			return fmt.Errorf("sharedWith[%d]: %q: want namespace/name", i, other)
		}
		if other == pod {
			return fmt.Errorf("sharedWith[%d]: %q is the pod itself; list only the other pods that held its GPUs", i, other)
		}
		if prev, dup := seen[other]; dup {
			return fmt.Errorf("sharedWith[%d]: %q is already listed at sharedWith[%d]", i, other, prev)
		}
		seen[other] = i
	}
	return nil
}

// roundingSlack allows for the 4 decimals that usage files carry.
const roundingSlack = 5e-5

// maxGPUMemory bounds memory figures: 64 GPUs of 1 TiB is already absurd.
const maxGPUMemory = 64 << 20 // MiB

// optionalMemory reads a stated memory need: more than 0, or "" for none.
func optionalMemory(s string) (gpu.MiB, error) {
	if s == "" {
		return 0, nil
	}
	return memory(s, 1)
}

// memory reads a memory quantity of at least least MiB and at most 64Ti.
func memory(s string, least gpu.MiB) (gpu.MiB, error) {
	m, err := cluster.ParseMemory(s)
	if err != nil {
		return 0, err
	}
	if m < least || m > maxGPUMemory {
		if least == 0 {
			return 0, fmt.Errorf("%s: want 0 or more and at most 64Ti", s)
		}
		return 0, fmt.Errorf("%s: want more than 0 and at most 64Ti", s)
	}
	return m, nil
}

func (m *FactsFileModel) spec() (vram.ModelSpec, error) {
	var spec vram.ModelSpec
	switch {
	case m.Family != "":
		a, err := vram.Family(m.Family)
		if err != nil {
			return spec, fmt.Errorf("family: %w", err)
		}
		spec = a.Spec(m.Family)
		if m.Layers != 0 || m.Hidden != 0 || m.KVHeads != 0 || m.HeadDim != 0 {
			return spec, fmt.Errorf("layers, hidden, kvHeads and headDim: the family gives them; give a family or the figures, not both")
		}
	case m.Params == "":
		return spec, fmt.Errorf("params: missing; give the parameter count (such as 7B) or a family (%s)", strings.Join(vram.Families(), ", "))
	default:
		spec = vram.ModelSpec{Layers: m.Layers, Hidden: m.Hidden, KVHeads: m.KVHeads, HeadDim: m.HeadDim}
	}
	if m.Params != "" {
		params, err := vram.ParseParams(m.Params)
		if err != nil {
			return spec, fmt.Errorf("params: %w", err)
		}
		spec.Params, spec.ActiveParams = params, 0
	}
	if m.DType != "" || spec.DType == "" {
		dt, err := vram.ParseDType(m.DType)
		if err != nil {
			return spec, fmt.Errorf("dtype: %w", err)
		}
		spec.DType = dt
	}
	if m.KVDType != "" {
		dt, err := vram.ParseDType(m.KVDType)
		if err != nil {
			return spec, fmt.Errorf("kvDtype: %w", err)
		}
		spec.KVDType = dt
	}
	spec.Context, spec.Batch = m.Context, m.Batch
	return spec, spec.Validate()
}

func patternNames() string {
	names := make([]string, len(Patterns))
	for i, p := range Patterns {
		names[i] = string(p)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
