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

// ModelSpec describes a model for a GPU memory estimate. Params and DType
// give the weights; Layers and either Hidden (full multi-head attention) or
// KVHeads and HeadDim (grouped-query and multi-query attention) or LatentKV
// (multi-head latent attention) give the KV cache; without them only
// weights and overhead are counted.
type ModelSpec struct {
	// Name is the model family or config file the spec was read from; ""
	// for figures given by hand.
	Name string `json:"name,omitempty"`
	// Params counts every parameter held on the GPUs: for a mixture of
	// experts all experts, since every expert is resident.
	Params  float64 `json:"params"`
	DType   DType   `json:"dtype"`
	Context int     `json:"context"` // tokens per sequence; 0 means DefaultContext
	Batch   int     `json:"batch"`   // sequences; 0 means 1
	Layers  int     `json:"layers,omitempty"`
	Hidden  int     `json:"hidden,omitempty"`
	// Heads is the attention heads; a tensor-parallel degree must divide
	// them. 0 when unknown.
	Heads int `json:"heads,omitempty"`
	// KVHeads and HeadDim: each layer keeps a key and a value of KVHeads x
	// HeadDim values per token (KVHeads < Heads: grouped-query attention,
	// 1: multi-query). Without them the key and value are Hidden wide.
	KVHeads int `json:"kvHeads,omitempty"`
	HeadDim int `json:"headDim,omitempty"`
	// LatentKV is the width of the compressed key-value vector that
	// multi-head latent attention (DeepSeek V2, V3) caches per token and
	// layer, once rather than as a key and a value (kv_lora_rank +
	// qk_rope_head_dim).
	LatentKV int `json:"latentKV,omitempty"`
	// KVDType is the KV cache's data type; "" means DType, except that
	// 4-bit weights keep a 16-bit cache.
	KVDType DType `json:"kvDtype,omitempty"`
	// Experts is the experts of each mixture-of-experts layer, and
	// ActiveParams the parameters one token passes through; 0 for a dense
	// model. Only Params decides the memory.
	Experts      int     `json:"experts,omitempty"`
	ActiveParams float64 `json:"activeParams,omitempty"`
	// GPUMemoryUtilization is the fraction of each GPU's memory the
	// serving engine takes at start-up whatever the model needs (vLLM's
	// gpu_memory_utilization), 0 for an engine that allocates what it
	// uses. The model must fit in that fraction, and the GPU shows it as
	// used.
	GPUMemoryUtilization float64 `json:"gpuMemoryUtilization,omitempty"`
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
	case m.KVDType != "" && dtypeBits[m.KVDType] == 0:
		return fmt.Errorf("kv dtype: %q is unknown", m.KVDType)
	case m.Context < 0 || m.Context > 10_000_000:
		return fmt.Errorf("context: %d tokens: want 1..10000000", m.Context)
	case m.Batch < 0 || m.Batch > 65536:
		return fmt.Errorf("batch: %d: want 1..65536", m.Batch)
	case m.Layers < 0 || m.Layers > 1000:
		return fmt.Errorf("layers: %d: want 1..1000", m.Layers)
	case m.Hidden < 0 || m.Hidden > 1<<20:
		return fmt.Errorf("hidden: %d: want 1..1048576", m.Hidden)
	case m.Heads < 0 || m.Heads > 1<<14:
		return fmt.Errorf("heads: %d: want 1..16384", m.Heads)
	case m.KVHeads < 0 || m.KVHeads > 1<<14 || m.Heads > 0 && m.KVHeads > m.Heads:
		return fmt.Errorf("kv heads: %d: want 1 up to the attention heads (%d)", m.KVHeads, m.Heads)
	case m.HeadDim < 0 || m.HeadDim > 1<<14:
		return fmt.Errorf("head dim: %d: want 1..16384", m.HeadDim)
	case m.LatentKV < 0 || m.LatentKV > 1<<16:
		return fmt.Errorf("latent kv: %d: want 1..65536", m.LatentKV)
	case (m.KVHeads == 0) != (m.HeadDim == 0):
		return fmt.Errorf("kv heads and head dim: give both for a grouped-query KV cache, or neither")
	case m.Layers == 0 && (m.Hidden > 0 || m.KVHeads > 0 || m.LatentKV > 0):
		return fmt.Errorf("layers: missing; the KV cache needs the layers with the hidden size or the KV heads and head dim")
	case m.Layers > 0 && m.Hidden == 0 && m.KVHeads == 0 && m.LatentKV == 0:
		return fmt.Errorf("layers and hidden: give the hidden size (or the KV heads and head dim) with the layers for the KV cache, or neither")
	case m.GPUMemoryUtilization < 0 || m.GPUMemoryUtilization > 1 || math.IsNaN(m.GPUMemoryUtilization):
		return fmt.Errorf("gpu memory utilization: %v: want a fraction in (0, 1], such as vLLM's default 0.9", m.GPUMemoryUtilization)
	}
	return nil
}

// kvDType is the KV cache's data type.
func (m ModelSpec) kvDType() DType {
	switch {
	case m.KVDType != "":
		return m.KVDType
	case m.DType.Bytes() < 1:
		return "fp16" // 4-bit weight formats (AWQ, GPTQ) keep a 16-bit cache
	}
	return m.DType
}

// kvValues is the KV cache's values per token and layer on one GPU of a
// tensor-parallel group of tp: the key and value heads are split across the
// group, each GPU keeping at least one (replicated when there are fewer KV
// heads than GPUs); a latent KV vector is kept whole on every GPU.
func (m ModelSpec) kvValues(tp int) float64 {
	switch {
	case m.LatentKV > 0:
		return float64(m.LatentKV)
	case m.KVHeads > 0:
		perGPU := max(float64(m.KVHeads)/float64(tp), 1)
		return 2 * perGPU * float64(m.HeadDim)
	}
	return 2 * float64(m.Hidden) / float64(tp)
}

// KVBytesPerToken is the KV cache one token takes on one GPU of a
// tensor-parallel group of tp GPUs (tp 1: the whole cache).
func (m ModelSpec) KVBytesPerToken(tp int) float64 {
	return float64(m.Layers) * m.kvValues(tp) * m.kvDType().Bytes()
}

// Estimate is a model's GPU memory need and how it was reached.
type Estimate struct {
	Spec    ModelSpec `json:"spec"`
	Weights gpu.MiB   `json:"weightsMiB"` // params x bytes per parameter
	// KVCache is layers x (2 x KV heads x head dim, or 2 x hidden, or the
	// latent width) x context x batch x bytes per KV value; 0 without the
	// attention geometry.
	KVCache  gpu.MiB `json:"kvCacheMiB"`
	Overhead gpu.MiB `json:"overheadMiB"` // CUDA context and runtime: 1 GiB plus 10% of weights and KV cache
	Total    gpu.MiB `json:"totalMiB"`
	// KVBytesPerToken is what one token of context adds on one GPU.
	KVBytesPerToken int64 `json:"kvBytesPerToken,omitempty"`
}

// Overhead is the CUDA context and runtime of one process: 1 GiB, plus 10%
// of the weights and KV cache for activations and allocator slack.
const (
	overheadFixed = 1 << 30
	overheadRatio = 0.10
)

// EstimateMemory estimates the GPU memory a model needs to serve on one GPU:
// weights, KV cache and runtime overhead. The spec must be valid.
func EstimateMemory(m ModelSpec) Estimate {
	if m.Context == 0 {
		m.Context = DefaultContext
	}
	if m.Batch == 0 {
		m.Batch = 1
	}
	e := Estimate{Spec: m}
	weights, kv, overhead := e.bytes(1)
	e.Weights, e.KVCache, e.Overhead = bytesToMiB(weights), bytesToMiB(kv), bytesToMiB(overhead)
	e.Total = e.Weights + e.KVCache + e.Overhead
	if m.Layers > 0 {
		e.KVBytesPerToken = int64(math.Ceil(m.KVBytesPerToken(1)))
	}
	return e
}

// Need is an estimate of a bare memory need, such as one measured, with no
// model behind it: it splits evenly across a tensor-parallel group.
func Need(total gpu.MiB) Estimate { return Estimate{Total: total} }

// bytes splits the need of one GPU of a tensor-parallel group of tp: its
// share of the weights, its part of the KV cache, and its overhead.
func (e Estimate) bytes(tp int) (weights, kv, overhead float64) {
	m := e.Spec
	weights = m.Params * m.DType.Bytes() / float64(tp)
	if m.Layers > 0 {
		kv = m.KVBytesPerToken(tp) * float64(m.Context) * float64(m.Batch)
	}
	overhead = overheadFixed + overheadRatio*(weights+kv)
	return weights, kv, overhead
}

// PerGPU is the memory each GPU of a tensor-parallel group of tp GPUs needs:
// the whole estimate when tp is 1.
func (e Estimate) PerGPU(tp int) gpu.MiB {
	if tp <= 1 {
		return e.Total
	}
	if e.Spec.Params == 0 { // a bare need: split evenly
		return (e.Total + gpu.MiB(tp) - 1) / gpu.MiB(tp)
	}
	w, kv, o := e.bytes(tp)
	return bytesToMiB(w) + bytesToMiB(kv) + bytesToMiB(o)
}

func bytesToMiB(b float64) gpu.MiB { return gpu.MiB(math.Ceil(b / (1 << 20))) }

// Option is one way the catalogue holds a GPU memory need: GPUs of a model
// (several with tensor parallelism) or one MIG slice.
type Option struct {
	Model string `json:"model"`
	// GPUs is how many GPUs of the model hold the need with tensor
	// parallelism, one of TensorParallelDegrees; 1 when one GPU does.
	GPUs int `json:"gpus"`
	// PerGPU is the memory each of those GPUs needs.
	PerGPU gpu.MiB `json:"perGPUMiB,omitempty"`
	// Held is the memory the serving engine takes on each GPU at start-up
	// (GPUMemoryUtilization x Usable), what the GPU then shows as used; 0
	// when the engine allocates only what it uses.
	Held gpu.MiB `json:"heldMiB,omitempty"`
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

// Options lists, smallest GPU first, the catalogue models that hold the
// estimate on one tensor-parallel group of TensorParallelDegrees GPUs
// (degrees that divide the model's attention heads, when they are known),
// each GPU holding its share of the weights and its part of the KV cache
// (PerGPU) within its usable memory, or within the fraction of it the
// engine takes (GPUMemoryUtilization); with the smallest MIG profile that
// holds the estimate on one slice where one does. Models of unknown memory
// are left out.
func Options(c *gpu.Catalogue, e Estimate) []Option {
	util := e.Spec.GPUMemoryUtilization
	if util == 0 {
		util = 1
	}
	var out []Option
	for _, m := range c.SortedByMemory() {
		budget := gpu.MiB(math.Floor(float64(m.Usable) * util))
		o := Option{Model: m.Name, Usable: m.Usable, Nominal: m.Nominal}
		for _, d := range TensorParallelDegrees {
			if e.Spec.Heads > 0 && e.Spec.Heads%d != 0 {
				continue
			}
			if need := e.PerGPU(d); need <= budget {
				o.GPUs, o.PerGPU = d, need
				break
			}
		}
		if o.GPUs == 0 {
			continue
		}
		if e.Spec.GPUMemoryUtilization > 0 {
			o.Held = budget
		}
		if m.MIG != nil {
			best := gpu.MiB(0)
			for _, p := range m.MIG.Profiles {
				slice := gpu.MiB(math.Floor(float64(p.Memory) * util))
				if slice >= e.Total && (o.MIGProfile == "" || p.Memory < best) {
					o.MIGProfile, best = p.Name, p.Memory
				}
			}
		}
		out = append(out, o)
	}
	return out
}
