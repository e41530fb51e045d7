package vram

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/gpu"
)

// DType is the data type of a model's weights and KV cache.
type DType string

// The data types the estimator knows, with their bits per value.
var dtypeBits = map[DType]int{"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}

// DTypes lists the known data types, widest first.
func DTypes() []DType { return []DType{"fp32", "fp16", "bf16", "fp8", "int8", "int4"} }

// Bytes is the size of one value: 4 for FP32, 2 for FP16/BF16, 1 for
// FP8/INT8, 0.5 for INT4.
func (d DType) Bytes() float64 { return float64(dtypeBits[d]) / 8 }

// ParseDType reads a data type, ignoring case.
func ParseDType(s string) (DType, error) {
	d := DType(strings.ToLower(strings.TrimSpace(s)))
	if _, ok := dtypeBits[d]; !ok {
		names := make([]string, 0, len(dtypeBits))
		for _, k := range DTypes() {
			names = append(names, string(k))
		}
		return "", fmt.Errorf("%q: want one of %s", s, strings.Join(names, ", "))
	}
	return d, nil
}

// ParseParams reads a parameter count such as "70B", "7b", "1.5B", "350M"
// or a plain number.
func ParseParams(s string) (float64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "T"):
		mult, t = 1e12, strings.TrimSuffix(t, "T")
	case strings.HasSuffix(t, "B"):
		mult, t = 1e9, strings.TrimSuffix(t, "B")
	case strings.HasSuffix(t, "M"):
		mult, t = 1e6, strings.TrimSuffix(t, "M")
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, fmt.Errorf("%q: want a parameter count such as 70B, 7B or 350M", s)
	}
	n := f * mult
	if n < 1e6 || n > 10e12 {
		return 0, fmt.Errorf("%q: want between 1M and 10T parameters", s)
	}
	return n, nil
}

// ModelSpec describes a model for a GPU memory estimate. Layers and Hidden
// are needed for the KV cache; without them only weights and overhead are
// counted.
type ModelSpec struct {
	Params  float64 `json:"params"`
	DType   DType   `json:"dtype"`
	Context int     `json:"context"` // tokens; 0 means DefaultContext
	Batch   int     `json:"batch"`   // sequences; 0 means 1
	Layers  int     `json:"layers,omitempty"`
	Hidden  int     `json:"hidden,omitempty"`
}

// DefaultContext is the context length assumed when none is given.
const DefaultContext = 4096

// Validate checks the figures.
func (m ModelSpec) Validate() error {
	switch {
	case m.Params < 1e6 || m.Params > 10e12:
		return fmt.Errorf("params: %g: want between 1M and 10T", m.Params)
	case dtypeBits[m.DType] == 0:
		return fmt.Errorf("dtype: %q is unknown", m.DType)
	case m.Context < 0 || m.Context > 10_000_000:
		return fmt.Errorf("context: %d tokens: want 1..10000000", m.Context)
	case m.Batch < 0 || m.Batch > 65536:
		return fmt.Errorf("batch: %d: want 1..65536", m.Batch)
	case (m.Layers == 0) != (m.Hidden == 0):
		return fmt.Errorf("layers and hidden: give both for the KV cache, or neither")
	case m.Layers < 0 || m.Layers > 1000:
		return fmt.Errorf("layers: %d: want 1..1000", m.Layers)
	case m.Hidden < 0 || m.Hidden > 1<<20:
		return fmt.Errorf("hidden: %d: want 1..1048576", m.Hidden)
	}
	return nil
}

// Estimate is a model's GPU memory need and how it was reached.
type Estimate struct {
	Spec     ModelSpec `json:"spec"`
	Weights  gpu.MiB   `json:"weightsMiB"`  // params x bytes per parameter
	KVCache  gpu.MiB   `json:"kvCacheMiB"`  // layers x 2 x hidden x context x batch x bytes; 0 without layers and hidden
	Overhead gpu.MiB   `json:"overheadMiB"` // CUDA context and runtime: 1 GiB plus 10% of weights and KV cache
	Total    gpu.MiB   `json:"totalMiB"`
}

// EstimateMemory estimates the GPU memory a model needs to serve:
// weights, KV cache and runtime overhead. The spec must be valid.
func EstimateMemory(m ModelSpec) Estimate {
	if m.Context == 0 {
		m.Context = DefaultContext
	}
	if m.Batch == 0 {
		m.Batch = 1
	}
	b := m.DType.Bytes()
	weights := m.Params * b
	kv := float64(m.Layers) * 2 * float64(m.Hidden) * float64(m.Context) * float64(m.Batch) * b
	e := Estimate{Spec: m, Weights: bytesToMiB(weights), KVCache: bytesToMiB(kv)}
	e.Overhead = gpu.GiB(1) + bytesToMiB(0.10*(weights+kv))
	e.Total = e.Weights + e.KVCache + e.Overhead
	return e
}

func bytesToMiB(b float64) gpu.MiB { return gpu.MiB(math.Ceil(b / (1 << 20))) }

// Option is one way the catalogue holds a GPU memory need: GPUs of a model
// (several with tensor parallelism) or one MIG slice.
type Option struct {
	Model string `json:"model"`
	// GPUs is how many GPUs of the model hold the need with tensor
	// parallelism, one of TensorParallelDegrees; 1 when one GPU does.
	GPUs int `json:"gpus"`
	// MIGProfile is the smallest MIG profile of the model that holds the
	// need on one slice; "" when none does.
	MIGProfile string `json:"migProfile,omitempty"`
	// Usable is the framebuffer per GPU that the driver reports, the figure
	// the need is held against.
	Usable gpu.MiB `json:"usableMiB"`
	// Nominal is the memory per GPU the model is sold by, for display.
	Nominal gpu.MiB `json:"nominalMiB"`
}

// TensorParallelDegrees are the tensor-parallel group sizes Options offers,
// smallest first: the degrees serving stacks (vLLM, TensorRT-LLM, SGLang)
// run, which must divide the attention heads, up to the GPUs of one node.
var TensorParallelDegrees = []int{1, 2, 4, 8}

// Options lists, smallest GPU first, the catalogue models that hold need on
// one tensor-parallel group of TensorParallelDegrees GPUs (need / GPUs of
// usable memory on each), with the smallest MIG slice that holds it where one
// does. Models of unknown memory are left out.
func Options(c *gpu.Catalogue, need gpu.MiB) []Option {
	var out []Option
	for _, m := range c.SortedByMemory() {
		gpus := 0
		for _, d := range TensorParallelDegrees {
			if gpu.MiB(d)*m.Usable >= need {
				gpus = d
				break
			}
		}
		if gpus == 0 {
			continue
		}
		o := Option{Model: m.Name, GPUs: gpus, Usable: m.Usable, Nominal: m.Nominal}
		if m.MIG != nil {
			for _, p := range m.MIG.Profiles {
				if p.Memory >= need && (o.MIGProfile == "" || p.Memory < profileMemory(m.MIG, o.MIGProfile)) {
					o.MIGProfile = p.Name
				}
			}
		}
		out = append(out, o)
	}
	return out
}

func profileMemory(g *gpu.MIGGeometry, name string) gpu.MiB {
	p, _ := g.Profile(name)
	return p.Memory
}
