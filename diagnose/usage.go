package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
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
)

var patterns = []Pattern{IdleHeld, Bursty, FlatLow, MemoryBound, Busy}

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
	Model *ModelSpec
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
}

// UsageFileModel is a model description in the usage file.
type UsageFileModel struct {
	Params  string `json:"params"`
	DType   string `json:"dtype"`
	Context int    `json:"context,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	Layers  int    `json:"layers,omitempty"`
	Hidden  int    `json:"hidden,omitempty"`
}

// ParseUsage reads a usage file. source names it in errors, which give the
// path of the offending field ("pods[2].activity"). Unknown fields,
// duplicate pods, ratios outside 0..1, unknown patterns and impossible
// quantities are rejected.
func ParseUsage(data []byte, source string) (*Usage, error) {
	var f UsageFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %v (see the UsageFile doc: apiVersion, kind, window, pods)", source, err)
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
		w, err := time.ParseDuration(f.Window)
		if err != nil || w <= 0 || w > 90*24*time.Hour {
			return nil, fmt.Errorf("window %q: want a duration such as 1h or 30m, at most 90 days", f.Window)
		}
		u.Window = w
	}
	seen := make(map[string]int, len(f.Pods))
	for i, p := range f.Pods {
		facts, err := p.facts()
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

func (p *UsageFilePod) facts() (PodFacts, error) {
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
	if !facts.Measured && facts.VRAMUsedP95 == 0 && facts.GPUMemory == 0 && facts.Model == nil {
		return facts, fmt.Errorf("no facts: give activity and pattern, vramUsedP95, gpuMemory or model")
	}
	return facts, nil
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

func (m *UsageFileModel) spec() (ModelSpec, error) {
	params, err := ParseParams(m.Params)
	if err != nil {
		return ModelSpec{}, fmt.Errorf("params: %w", err)
	}
	dt, err := ParseDType(m.DType)
	if err != nil {
		return ModelSpec{}, fmt.Errorf("dtype: %w", err)
	}
	spec := ModelSpec{Params: params, DType: dt, Context: m.Context, Batch: m.Batch, Layers: m.Layers, Hidden: m.Hidden}
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
