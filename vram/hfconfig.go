package vram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Architecture is a transformer's shape, as a Hugging Face config.json
// gives it: enough to count its parameters and size its KV cache.
type Architecture struct {
	Layers       int `json:"num_hidden_layers"`
	Hidden       int `json:"hidden_size"`
	Heads        int `json:"num_attention_heads"`
	KVHeads      int `json:"num_key_value_heads"` // 0: Heads (multi-head attention)
	HeadDim      int `json:"head_dim"`            // 0: Hidden / Heads
	Intermediate int `json:"intermediate_size"`   // the dense MLP's width
	Vocab        int `json:"vocab_size"`
	// TiedEmbeddings: the output projection shares the input embedding's
	// weights (tie_word_embeddings).
	TiedEmbeddings bool `json:"-"`

	// Mixture of experts: routed experts per layer (Mixtral's
	// num_local_experts, Qwen's num_experts, DeepSeek's n_routed_experts),
	// the experts each token goes through, each expert's MLP width (Mixtral
	// uses Intermediate), shared experts' width, and the first layers that
	// keep a dense MLP (DeepSeek's first_k_dense_replace).
	Experts            int `json:"-"`
	ExpertsPerToken    int `json:"num_experts_per_tok"`
	MoEIntermediate    int `json:"moe_intermediate_size"`
	SharedIntermediate int `json:"-"`
	DenseLayers        int `json:"first_k_dense_replace"`

	// Multi-head latent attention (DeepSeek V2, V3).
	QLoraRank     int `json:"q_lora_rank"`
	KVLoraRank    int `json:"kv_lora_rank"`
	QKNopeHeadDim int `json:"qk_nope_head_dim"`
	QKRopeHeadDim int `json:"qk_rope_head_dim"`
	VHeadDim      int `json:"v_head_dim"`

	// DType is the weights' data type: torch_dtype, or the quantisation
	// the config declares.
	DType DType `json:"-"`
}

// hfConfig is the part of a Hugging Face config.json the estimate reads;
// every other field is ignored, as transformers does.
type hfConfig struct {
	Architecture
	ModelType        string          `json:"model_type"`
	NumLocalExperts  int             `json:"num_local_experts"`
	NumExperts       int             `json:"num_experts"`
	NRoutedExperts   int             `json:"n_routed_experts"`
	NSharedExperts   int             `json:"n_shared_experts"`
	SharedExpertSize int             `json:"shared_expert_intermediate_size"`
	TorchDType       string          `json:"torch_dtype"`
	DTypeField       string          `json:"dtype"`
	Quantization     *hfQuantization `json:"quantization_config"`
	TextConfig       json.RawMessage `json:"text_config"`
	// Tie is tie_word_embeddings, which transformers takes as true when a
	// config leaves it out.
	Tie *bool `json:"tie_word_embeddings"`
}

type hfQuantization struct {
	Method string `json:"quant_method"`
	Bits   int    `json:"bits"`
	Format string `json:"fmt"`
}

// ParseHFConfig reads a Hugging Face config.json (a multimodal model's
// text_config is read when the top level has no layers). source names the
// file in errors. Fields the estimate does not use are ignored; missing or
// impossible figures are errors naming the field.
func ParseHFConfig(data []byte, source string) (Architecture, error) {
	cfg, err := decodeHF(data, source)
	if err != nil {
		return Architecture{}, err
	}
	if cfg.Layers == 0 && len(cfg.TextConfig) > 0 {
		text, err := decodeHF(cfg.TextConfig, source+": text_config")
		if err != nil {
			return Architecture{}, err
		}
		if text.TorchDType == "" && text.DTypeField == "" {
			text.TorchDType, text.DTypeField = cfg.TorchDType, cfg.DTypeField
		}
		if text.Quantization == nil {
			text.Quantization = cfg.Quantization
		}
		cfg = text
	}
	a := cfg.Architecture
	a.TiedEmbeddings = cfg.Tie == nil || *cfg.Tie
	a.Experts = max(cfg.NumLocalExperts, cfg.NumExperts, cfg.NRoutedExperts)
	if a.Experts > 0 && a.MoEIntermediate == 0 {
		a.MoEIntermediate = a.Intermediate // Mixtral's experts are MLPs of the dense width
	}
	switch {
	case cfg.SharedExpertSize > 0:
		a.SharedIntermediate = cfg.SharedExpertSize
	case cfg.NSharedExperts > 0:
		a.SharedIntermediate = cfg.NSharedExperts * a.MoEIntermediate
	}
	if a.DType, err = cfg.weightsDType(); err != nil {
		return Architecture{}, fmt.Errorf("%s: %w", source, err)
	}
	if err := a.check(); err != nil {
		return Architecture{}, fmt.Errorf("%s: %w", source, err)
	}
	return a, nil
}

func decodeHF(data []byte, source string) (*hfConfig, error) {
	var cfg hfConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&cfg); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "Architecture.")
			want := "a " + te.Type.String()
			switch {
			case field == "":
				field, want = "the document", "an object"
			case strings.HasPrefix(te.Type.String(), "int"):
				want = "an integer"
			}
			return nil, fmt.Errorf("%s: %s: a JSON %s; want %s (is this a Hugging Face config.json?)", source, field, te.Value, want)
		}
		return nil, fmt.Errorf("%s: %v; want a Hugging Face config.json, the JSON object beside the model's weights", source, err)
	}
	return &cfg, nil
}

// weightsDType reads the weights' data type: a declared quantisation
// first, then torch_dtype (dtype in newer transformers); bf16 when neither
// says.
func (c *hfConfig) weightsDType() (DType, error) {
	if q := c.Quantization; q != nil {
		switch m := strings.ToLower(q.Method); {
		case m == "fp8" || m == "fbgemm_fp8" || m == "compressed-tensors" && strings.Contains(strings.ToLower(q.Format), "fp8"):
			return "fp8", nil
		case q.Bits == 4 || m == "awq" || m == "mxfp4":
			return "int4", nil
		case q.Bits == 8:
			return "int8", nil
		}
	}
	name := c.TorchDType
	if name == "" {
		name = c.DTypeField
	}
	switch strings.ToLower(name) {
	case "", "bfloat16":
		return "bf16", nil
	case "float16", "half":
		return "fp16", nil
	case "float32", "float":
		return "fp32", nil
	}
	return "", fmt.Errorf("torch_dtype: %q is not a data type gpupack knows; give --dtype", name)
}

// check refuses a shape whose figures cannot be a transformer's.
func (a Architecture) check() error {
	type field struct {
		name      string
		v, lo, hi int
	}
	for _, f := range []field{
		{"num_hidden_layers", a.Layers, 1, 1000},
		{"hidden_size", a.Hidden, 1, 1 << 20},
		{"num_attention_heads", a.Heads, 1, 1 << 14},
		{"vocab_size", a.Vocab, 1, 1 << 24},
	} {
		if f.v < f.lo || f.v > f.hi {
			if f.v == 0 {
				return fmt.Errorf("%s: missing; a Hugging Face config.json of a transformer has it", f.name)
			}
			return fmt.Errorf("%s: %d: want %d..%d", f.name, f.v, f.lo, f.hi)
		}
	}
	switch {
	case a.KVHeads < 0 || a.KVHeads > a.Heads:
		return fmt.Errorf("num_key_value_heads: %d: want 1 up to num_attention_heads (%d)", a.KVHeads, a.Heads)
	case a.KVHeads > 0 && a.Heads%a.KVHeads != 0:
		return fmt.Errorf("num_key_value_heads: %d does not divide num_attention_heads (%d)", a.KVHeads, a.Heads)
	case a.HeadDim < 0 || a.HeadDim > 1<<14:
		return fmt.Errorf("head_dim: %d: want 1..16384", a.HeadDim)
	case a.HeadDim == 0 && a.KVLoraRank == 0 && a.Hidden%a.Heads != 0:
		return fmt.Errorf("head_dim: missing, and hidden_size (%d) is not a multiple of num_attention_heads (%d)", a.Hidden, a.Heads)
	case a.Intermediate < 0 || a.MoEIntermediate < 0 || a.SharedIntermediate < 0 || a.Intermediate == 0 && a.MoEIntermediate == 0:
		return fmt.Errorf("intermediate_size: %d: want the MLP's width", a.Intermediate)
	case a.Experts < 0 || a.Experts > 1<<12:
		return fmt.Errorf("experts: %d: want 0..4096", a.Experts)
	case a.Experts > 0 && (a.ExpertsPerToken < 1 || a.ExpertsPerToken > a.Experts):
		return fmt.Errorf("num_experts_per_tok: %d: want 1..%d experts", a.ExpertsPerToken, a.Experts)
	case a.DenseLayers < 0 || a.DenseLayers > a.Layers:
		return fmt.Errorf("first_k_dense_replace: %d: want 0..%d layers", a.DenseLayers, a.Layers)
	case a.KVLoraRank < 0 || a.QKRopeHeadDim < 0 || a.QKNopeHeadDim < 0 || a.VHeadDim < 0 || a.QLoraRank < 0:
		return fmt.Errorf("kv_lora_rank, q_lora_rank and the MLA head dims must not be negative")
	}
	return nil
}

func (a Architecture) kvHeads() int {
	if a.KVHeads > 0 {
		return a.KVHeads
	}
	return a.Heads
}

func (a Architecture) headDim() int {
	if a.HeadDim > 0 {
		return a.HeadDim
	}
	return a.Hidden / a.Heads
}

// attentionParams is one layer's attention projections.
func (a Architecture) attentionParams() float64 {
	h := float64(a.Hidden)
	if a.KVLoraRank > 0 {
		heads := float64(a.Heads)
		qk := float64(a.QKNopeHeadDim + a.QKRopeHeadDim)
		q := h * heads * qk
		if a.QLoraRank > 0 {
			q = h*float64(a.QLoraRank) + float64(a.QLoraRank)*heads*qk
		}
		kvA := h * float64(a.KVLoraRank+a.QKRopeHeadDim)
		kvB := float64(a.KVLoraRank) * heads * float64(a.QKNopeHeadDim+a.VHeadDim)
		o := heads * float64(a.VHeadDim) * h
		return q + kvA + kvB + o
	}
	qo := 2 * h * float64(a.Heads*a.headDim())
	kv := 2 * h * float64(a.kvHeads()*a.headDim())
	return qo + kv
}

// mlp is a gated MLP's parameters (gate, up and down projections).
func (a Architecture) mlp(width int) float64 { return 3 * float64(a.Hidden) * float64(width) }

// Params counts the parameters: embeddings (twice unless tied), each
// layer's attention and its MLP, dense or mixture-of-experts with every
// expert and shared expert and the router. Norms and biases, well under
// 0.1% of a model, are left out.
func (a Architecture) Params() (total, active float64) {
	embed := float64(a.Vocab) * float64(a.Hidden)
	if !a.TiedEmbeddings {
		embed *= 2
	}
	total, active = embed, embed
	attn := a.attentionParams()
	for l := range a.Layers {
		total += attn
		active += attn
		if a.Experts == 0 || l < a.DenseLayers {
			total += a.mlp(a.Intermediate)
			active += a.mlp(a.Intermediate)
			continue
		}
		router := float64(a.Hidden) * float64(a.Experts)
		shared := 0.0
		if a.SharedIntermediate > 0 {
			shared = a.mlp(a.SharedIntermediate)
		}
		total += float64(a.Experts)*a.mlp(a.MoEIntermediate) + shared + router
		active += float64(a.ExpertsPerToken)*a.mlp(a.MoEIntermediate) + shared + router
	}
	return total, active
}

// Spec is the model spec of the architecture, in its own data type.
func (a Architecture) Spec(name string) ModelSpec {
	total, active := a.Params()
	s := ModelSpec{Name: name, Params: total, DType: a.DType, Layers: a.Layers, Hidden: a.Hidden, Heads: a.Heads}
	if a.KVLoraRank > 0 {
		s.LatentKV = a.KVLoraRank + a.QKRopeHeadDim
	} else {
		s.KVHeads, s.HeadDim = a.kvHeads(), a.headDim()
	}
	if a.Experts > 0 {
		s.Experts, s.ActiveParams = a.Experts, active
	}
	return s
}
