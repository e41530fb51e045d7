package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/yamldoc"
	"github.com/gpupack/gpupack/usage"
	"github.com/gpupack/gpupack/vram"
)

// Pattern names how a pod uses the GPUs it holds over a window, as the
// usage package classifies it.
type Pattern string

// The patterns diagnose understands.
const (
	IdleHeld    Pattern = "idle-held"    // held, almost no activity
	Bursty      Pattern = "bursty"       // alternating 0% and short bursts
	FlatLow     Pattern = "flat-low"     // constantly low activity
	MemoryBound Pattern = "memory-bound" // VRAM full, compute modest
	Busy        Pattern = "busy"         // the GPU is the bottleneck
	Moderate    Pattern = "moderate"     // steady at a middling level
)

var patterns = []Pattern{IdleHeld, Bursty, FlatLow, MemoryBound, Busy, Moderate}

// Underused reports whether the pattern says the GPU is not the bottleneck.
func (p Pattern) Underused() bool { return p == IdleHeld || p == Bursty || p == FlatLow }

// PodFacts is what diagnose knows about one pod beyond the snapshot. For a
// bound pod it is its measured use of its GPUs; for a pending pod, the use
// measured on its workload's running replicas, and what its model needs.
type PodFacts struct {
	// Measured is true when ActiveRatio and Pattern were measured.
	Measured bool
	// ActiveRatio is the mean SM activity of the pod's GPUs over the
	// window, 0..1.
	ActiveRatio float64
	Pattern     Pattern
	// VRAMUsedP95 is the 95th percentile of the framebuffer used; 0 when
	// unknown.
	VRAMUsedP95 gpu.MiB
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
	// HourlyActivity is the mean SM activity of the pod's GPUs in each
	// hour of the window, oldest first, 0..1 each; nil when not measured.
	// The planner reads it to find the GPUs busy in every hour.
	HourlyActivity []float64
}

// Usage is the usage side of a diagnosis: facts per pod key
// ("namespace/name") measured over Window.
type Usage struct {
	Window time.Duration
	Pods   map[string]PodFacts
}

// UsageAPIVersion and UsageKind identify the usage file.
const (
	UsageAPIVersion = "gpupack.io/v1alpha1"
	UsageKind       = "PodUsage"
)

// UsageFile is the usage side file, YAML or JSON:
//
//	apiVersion: gpupack.io/v1alpha1
//	kind: PodUsage
//	window: 1h
//	pods:
//	- pod: ml/train-0
//	  activity: 0.04        # mean SM activity over the window, 0..1
//	  pattern: idle-held    # idle-held, bursty, flat-low, memory-bound, busy
//	  vramUsedP95: 3Gi
//	  idleHeldRatio: 0.9    # share of the window held without activity, 0..1
//	  hourlyActivity: [0.1, 0.0, 0.4]   # mean activity per hour of the window
//	- pod: ml/llm-70b       # a pending pod: what its model needs
//	  model: {params: 70B, dtype: fp16, context: 4096, batch: 1, layers: 80, hidden: 8192}
//	  gpuMemory: 150Gi      # or the need stated outright
type UsageFile struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Window     string         `json:"window,omitempty"`
	Pods       []UsageFilePod `json:"pods"`
}

// UsageFilePod is one pod's entry in the usage file.
type UsageFilePod struct {
	Pod         string          `json:"pod"`
	Activity    *float64        `json:"activity,omitempty"`
	Pattern     string          `json:"pattern,omitempty"`
	VRAMUsedP95 string          `json:"vramUsedP95,omitempty"`
	GPUMemory   string          `json:"gpuMemory,omitempty"`
	Model       *UsageFileModel `json:"model,omitempty"`
	// IdleHeldRatio and HourlyActivity were added for the planner; files
	// without them read as before.
	IdleHeldRatio  *float64  `json:"idleHeldRatio,omitempty"`
	HourlyActivity []float64 `json:"hourlyActivity,omitempty"`
}

// UsageFileModel is a model description in the usage file: a built-in
// family (vram.Families) or a parameter count, and for the KV cache the
// layers with the hidden size (full multi-head attention) or the KV heads
// and head dimension (grouped-query attention). Figures given override the
// family's.
type UsageFileModel struct {
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

// ParseUsage reads a usage file: exactly one YAML or JSON document. source
// names it in errors, which give the path of the offending field
// ("pods[2]: activity"), and for wrong types, unknown fields and numbers out
// of range also the line. Unknown fields, duplicate pods, ratios outside
// 0..1, unknown patterns, a pattern that its activity contradicts and
// impossible quantities are rejected.
func ParseUsage(data []byte, source string) (*Usage, error) {
	var f UsageFile
	if _, err := yamldoc.Decode(data, source, &f); err != nil {
		return nil, err
	}
	u, err := f.Usage()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return u, nil
}

// Usage validates the document and builds the facts.
func (f *UsageFile) Usage() (*Usage, error) {
	if f.APIVersion != UsageAPIVersion {
		return nil, fmt.Errorf("apiVersion %q: want %q", f.APIVersion, UsageAPIVersion)
	}
	if f.Kind != UsageKind {
		return nil, fmt.Errorf("kind %q: want %q", f.Kind, UsageKind)
	}
	u := &Usage{Window: time.Hour, Pods: make(map[string]PodFacts, len(f.Pods))}
	if f.Window != "" {
		w, err := ParseWindow(f.Window)
		if err != nil {
			return nil, fmt.Errorf("window %w", err)
		}
		u.Window = w
	}
	hours := int((u.Window + time.Hour - 1) / time.Hour)
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
	return u, nil
}

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

func (p *UsageFilePod) facts(windowHours int) (PodFacts, error) {
	var facts PodFacts
	ns, name, ok := strings.Cut(p.Pod, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
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
		if !validPattern(Pattern(p.Pattern)) {
			return facts, fmt.Errorf("pattern: %q (want one of %s)", p.Pattern, patternNames())
		}
		lo, hi, _ := usage.MeanActivityRange(usage.PatternName(p.Pattern))
		if a := facts.ActiveRatio; a < lo-roundingSlack || a > hi+roundingSlack {
			return facts, fmt.Errorf("pattern: %s contradicts activity %v: the mean activity of %s pods is %v..%v; correct one of them, or write the file from a measurement with `gpupack report --format podusage`",
				p.Pattern, a, p.Pattern, lo, hi)
		}
		facts.Pattern = Pattern(p.Pattern)
	}
	var err error
	if facts.VRAMUsedP95, err = optionalMemory(p.VRAMUsedP95); err != nil {
		return facts, fmt.Errorf("vramUsedP95: %w", err)
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
	if n := len(p.HourlyActivity); n > 0 {
		if n > windowHours {
			return facts, fmt.Errorf("hourlyActivity: %d hours listed, the window has %d; give one value per hour of the window", n, windowHours)
		}
		for i, a := range p.HourlyActivity {
			if math.IsNaN(a) || a < 0 || a > 1 {
				return facts, fmt.Errorf("hourlyActivity[%d]: %v is not a ratio (want 0..1)", i, a)
			}
		}
		facts.HourlyActivity = p.HourlyActivity
	}
	if !facts.Measured && facts.VRAMUsedP95 == 0 && facts.GPUMemory == 0 && facts.Model == nil && !facts.IdleHeldMeasured && facts.HourlyActivity == nil {
		return facts, fmt.Errorf("no facts: give activity and pattern, vramUsedP95, gpuMemory, model, idleHeldRatio or hourlyActivity")
	}
	return facts, nil
}

// roundingSlack allows for the 4 decimals that usage files carry.
const roundingSlack = 5e-5

// Unmatched lists, sorted, the usage entries that name no pod of s: pods
// that ended since the measurement, a typo, or the usage of another
// cluster. Their facts reach no finding.
func (u *Usage) Unmatched(s *cluster.Snapshot) []string {
	known := make(map[string]bool, len(s.Pods))
	for _, p := range s.Pods {
		known[p.Key()] = true
	}
	var out []string
	for key := range u.Pods {
		if !known[key] {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// maxGPUMemory bounds memory figures: 64 GPUs of 1 TiB is already absurd.
const maxGPUMemory = 64 << 20 // MiB

func optionalMemory(s string) (gpu.MiB, error) {
	if s == "" {
		return 0, nil
	}
	m, err := cluster.ParseMemory(s)
	if err != nil {
		return 0, err
	}
	if m <= 0 || m > maxGPUMemory {
		return 0, fmt.Errorf("%s: want more than 0 and at most 64Ti", s)
	}
	return m, nil
}

func (m *UsageFileModel) spec() (vram.ModelSpec, error) {
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

func validPattern(p Pattern) bool {
	for _, q := range patterns {
		if p == q {
			return true
		}
	}
	return false
}

func patternNames() string {
	names := make([]string, len(patterns))
	for i, p := range patterns {
		names[i] = string(p)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
