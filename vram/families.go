package vram

import (
	"fmt"
	"sort"
	"strings"
)

// families are built-in model shapes, each copied from the model's
// config.json on Hugging Face (huggingface.co/<repo>/blob/main/config.json,
// the repository named beside it).
var families = map[string]Architecture{
	// meta-llama/Llama-3.1-8B
	"llama-3.1-8b": {Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 14336, Vocab: 128256, DType: "bf16"},
	// meta-llama/Llama-3.1-70B (Llama-3.3-70B has the same shape)
	"llama-3.1-70b": {Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 28672, Vocab: 128256, DType: "bf16"},
	// meta-llama/Llama-3.1-405B
	"llama-3.1-405b": {Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128, Intermediate: 53248, Vocab: 128256, DType: "bf16"},
	// mistralai/Mistral-7B-Instruct-v0.3
	"mistral-7b": {Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 14336, Vocab: 32768, DType: "bf16"},
	// mistralai/Mixtral-8x7B-v0.1: 8 experts, 2 per token
	"mixtral-8x7b": {Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 14336, Vocab: 32000, DType: "bf16",
		Experts: 8, ExpertsPerToken: 2, MoEIntermediate: 14336},
	// Qwen/Qwen2.5-7B-Instruct
	"qwen2.5-7b": {Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128, Intermediate: 18944, Vocab: 152064, DType: "bf16"},
	// Qwen/Qwen2.5-14B-Instruct
	"qwen2.5-14b": {Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, Intermediate: 13824, Vocab: 152064, DType: "bf16"},
	// Qwen/Qwen2.5-72B-Instruct
	"qwen2.5-72b": {Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 29568, Vocab: 152064, DType: "bf16"},
	// Qwen/Qwen3-235B-A22B: 128 experts, 8 per token
	"qwen3-235b-a22b": {Layers: 94, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, Intermediate: 12288, Vocab: 151936, DType: "bf16",
		Experts: 128, ExpertsPerToken: 8, MoEIntermediate: 1536},
	// deepseek-ai/DeepSeek-V3: multi-head latent attention, 256 routed
	// experts (8 per token) and one shared, the first 3 layers dense,
	// weights in FP8 as published
	"deepseek-v3": {Layers: 61, Hidden: 7168, Heads: 128, Intermediate: 18432, Vocab: 129280, DType: "fp8",
		Experts: 256, ExpertsPerToken: 8, MoEIntermediate: 2048, SharedIntermediate: 2048, DenseLayers: 3,
		QLoraRank: 1536, KVLoraRank: 512, QKNopeHeadDim: 128, QKRopeHeadDim: 64, VHeadDim: 128},
}

// Families lists the built-in model families' names, sorted.
func Families() []string {
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Family returns a built-in model family's architecture by name, ignoring
// case.
func Family(name string) (Architecture, error) {
	a, ok := families[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Architecture{}, fmt.Errorf("%q is not a built-in model family (known: %s); give the model's config.json with --model-config instead", name, strings.Join(Families(), ", "))
	}
	return a, nil
}
