// Package vram is the `gpupack vram` verb: a model's GPU memory estimate
// and the catalogue GPUs and MIG profiles that hold it.
package vram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/vram"
)

type options struct {
	params      string
	dtype       string
	kvDType     string
	context     int
	batch       int
	layers      int
	hidden      int
	kvHeads     int
	headDim     int
	model       string
	modelConfig string
	engine      string
	utilization float64
	catalogue   string
	format      string
}

// defaultUtilization is vLLM's default gpu_memory_utilization.
const defaultUtilization = 0.9

// NewCommand returns the vram command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "vram",
		Short: "Estimate a model's GPU memory and list the GPUs and MIG profiles that hold it",
		Long: `vram estimates the GPU memory a model needs to serve:
  weights   parameters x bytes per parameter (FP32 4, FP16/BF16 2, FP8/INT8 1,
            INT4 0.5); a mixture of experts counts every expert, all resident
  KV cache  layers x 2 x KV heads x head dim x context x batch x bytes per KV
            value (grouped-query and multi-query attention cache only the KV
            heads; without them, 2 x hidden; DeepSeek's latent attention
            caches kv_lora_rank + qk_rope_head_dim once)
  overhead  1 GiB of CUDA context and runtime plus 10% of weights and KV cache
The model comes from its Hugging Face config.json (--model-config), a
built-in family (--model), or figures (--params, --layers, --hidden,
--kv-heads, --head-dim). With --engine vllm the GPU is taken at start-up to
--gpu-memory-utilization (default 0.9) of its memory, whatever the model
needs: the model must fit in that fraction, and nvidia-smi shows it used.

It lists the catalogue's GPUs that hold the model, judged on the memory the
driver reports (USABLE, below the NOMINAL size the GPU is sold by), on one
GPU or with tensor parallelism across 2, 4 or 8 that divide the attention
heads, each GPU holding its share of the weights and of the KV heads, and
the smallest MIG profile of each model that holds it.

Built-in families: ` + strings.Join(vram.Families(), ", ") + `.`,
		Example: `  gpupack vram --model-config ./Llama-3.1-8B-Instruct/config.json --context 8192 --batch 16
  gpupack vram --model mixtral-8x7b --engine vllm
  gpupack vram --model deepseek-v3 --context 32768
  gpupack vram --params 70B --dtype fp16
  gpupack vram --params 8B --dtype bf16 --context 8192 --batch 4 --layers 32 --kv-heads 8 --head-dim 128`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.params, "params", "", "parameters, e.g. 70B, 7B, 350M; counted from --model-config or --model when not given (7B without them)")
	f.StringVar(&o.dtype, "dtype", "", "weights' data type: fp32, fp16, bf16, fp8, int8 or int4; from the model's config when not given (fp16 without one)")
	f.StringVar(&o.kvDType, "kv-dtype", "", "KV cache data type (vLLM's --kv-cache-dtype); the weights' when not given, fp16 for 4-bit weights")
	f.IntVar(&o.context, "context", vram.DefaultContext, "context length in tokens per sequence (KV cache)")
	f.IntVar(&o.batch, "batch", 1, "sequences served at once (KV cache)")
	f.IntVar(&o.layers, "layers", 0, "transformer layers (KV cache; with --hidden, or --kv-heads and --head-dim)")
	f.IntVar(&o.hidden, "hidden", 0, "hidden size (KV cache of full multi-head attention)")
	f.IntVar(&o.kvHeads, "kv-heads", 0, "key/value heads (KV cache of grouped-query or multi-query attention; with --head-dim)")
	f.IntVar(&o.headDim, "head-dim", 0, "dimension of one attention head (with --kv-heads)")
	f.StringVar(&o.model, "model", "", "a built-in model family: "+strings.Join(vram.Families(), ", "))
	f.StringVar(&o.modelConfig, "model-config", "", "the model's Hugging Face config.json")
	f.StringVar(&o.engine, "engine", "", "serving engine whose start-up allocation to count: vllm (preallocates --gpu-memory-utilization of each GPU)")
	f.Float64Var(&o.utilization, "gpu-memory-utilization", 0, "with --engine vllm: the fraction of each GPU it takes (vLLM's gpu_memory_utilization; default 0.9)")
	clio.AddCatalogueFlag(f, &o.catalogue)
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	return cmd
}

// result is the JSON output.
type result struct {
	Estimate vram.Estimate `json:"estimate"`
	Options  []vram.Option `json:"options"`
}

// spec builds the model spec from the flags: the architecture of a config
// file or family, then the figures given, which override it.
func (o *options) spec() (vram.ModelSpec, error) {
	var spec vram.ModelSpec
	switch {
	case o.model != "" && o.modelConfig != "":
		return spec, fmt.Errorf("--model and --model-config both name the model; give one")
	case o.modelConfig != "":
		data, err := os.ReadFile(o.modelConfig)
		if err != nil {
			return spec, fmt.Errorf("--model-config: %w", err)
		}
		a, err := vram.ParseHFConfig(data, o.modelConfig)
		if err != nil {
			return spec, fmt.Errorf("--model-config %w", err)
		}
		spec = a.Spec(o.modelConfig)
	case o.model != "":
		a, err := vram.Family(o.model)
		if err != nil {
			return spec, fmt.Errorf("--model %w", err)
		}
		spec = a.Spec(strings.ToLower(o.model))
	default:
		spec.DType = "fp16"
		spec.Params = 7e9
	}
	named := spec.Name != ""
	if named && (o.layers != 0 || o.hidden != 0 || o.kvHeads != 0 || o.headDim != 0) {
		return spec, fmt.Errorf("--layers, --hidden, --kv-heads and --head-dim describe a model by hand; the model's config gives them with --model or --model-config")
	}
	if o.params != "" {
		p, err := vram.ParseParams(o.params)
		if err != nil {
			return spec, fmt.Errorf("--params: %w", err)
		}
		spec.Params, spec.ActiveParams = p, 0
	}
	if o.dtype != "" {
		dt, err := vram.ParseDType(o.dtype)
		if err != nil {
			return spec, fmt.Errorf("--dtype: %w", err)
		}
		spec.DType = dt
	}
	if o.kvDType != "" {
		dt, err := vram.ParseDType(o.kvDType)
		if err != nil {
			return spec, fmt.Errorf("--kv-dtype: %w", err)
		}
		spec.KVDType = dt
	}
	// ModelSpec reads 0 as "not given"; a flag is always given, so 0 is a
	// mistake, not a request for the default.
	if o.batch < 1 {
		return spec, fmt.Errorf("--batch %d: want at least 1 sequence served at once", o.batch)
	}
	if o.context < 1 {
		return spec, fmt.Errorf("--context %d: want at least 1 token (the default is %d)", o.context, vram.DefaultContext)
	}
	spec.Context, spec.Batch = o.context, o.batch
	if !named {
		spec.Layers, spec.Hidden, spec.KVHeads, spec.HeadDim = o.layers, o.hidden, o.kvHeads, o.headDim
	}
	switch o.engine {
	case "":
		if o.utilization != 0 {
			return spec, fmt.Errorf("--gpu-memory-utilization %v: give --engine vllm with it", o.utilization)
		}
	case "vllm":
		spec.GPUMemoryUtilization = defaultUtilization
		if o.utilization != 0 {
			spec.GPUMemoryUtilization = o.utilization
		}
	default:
		return spec, fmt.Errorf("--engine %q: want vllm, or leave it out for an engine that allocates what it uses", o.engine)
	}
	if err := spec.Validate(); err != nil {
		return spec, fmt.Errorf("--%w", err)
	}
	return spec, nil
}

func run(_ context.Context, o *options, stdout io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	spec, err := o.spec()
	if err != nil {
		return err
	}
	c, err := app.LoadCatalogue(o.catalogue)
	if err != nil {
		return err
	}
	e := vram.EstimateMemory(spec)
	opts := vram.Options(c, e)
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(result{Estimate: e, Options: opts})
	}
	writeTable(stdout, e, opts)
	return nil
}

func writeTable(w io.Writer, e vram.Estimate, opts []vram.Option) {
	s := e.Spec
	name := ""
	if s.Name != "" {
		name = s.Name + ": "
	}
	fmt.Fprintf(w, "%s%s parameters in %s, context %d, batch %d\n", name, params(s.Params), s.DType, s.Context, s.Batch)
	if s.Experts > 0 {
		fmt.Fprintf(w, "  mixture of %d experts, all resident; %s parameters active per token\n", s.Experts, params(s.ActiveParams))
	}
	fmt.Fprintf(w, "  weights   %10s  (%.1f GB)\n", e.Weights, gb(e.Weights))
	if s.Layers > 0 {
		fmt.Fprintf(w, "  KV cache  %10s  (%.1f GB; %s per token, %s)\n", e.KVCache, gb(e.KVCache), kib(e.KVBytesPerToken), kvShape(s))
	} else {
		fmt.Fprintf(w, "  KV cache  %10s  (give --model-config, --model, or --layers with --hidden or --kv-heads and --head-dim to count it)\n", "-")
	}
	fmt.Fprintf(w, "  overhead  %10s\n", e.Overhead)
	fmt.Fprintf(w, "  total     %10s  (%.1f GB)\n", e.Total, gb(e.Total))
	if u := s.GPUMemoryUtilization; u > 0 {
		fmt.Fprintf(w, "  vLLM takes %.0f%% of each GPU at start-up: the model must fit in it, and HELD is what the GPU then shows used\n", 100*u)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	held := s.GPUMemoryUtilization > 0
	header := "GPU\tNOMINAL\tUSABLE\tGPUS NEEDED\tPER GPU\tSMALLEST MIG PROFILE"
	if held {
		header += "\tHELD PER GPU"
	}
	fmt.Fprintln(tw, header)
	for _, op := range opts {
		mig := "-"
		if op.MIGProfile != "" {
			mig = op.MIGProfile
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s", op.Model, op.Nominal, op.Usable, op.GPUs, op.PerGPU, mig)
		if held {
			line += "\t" + op.Held.String()
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func kvShape(s vram.ModelSpec) string {
	kv := s.DType
	if s.KVDType != "" {
		kv = s.KVDType
	} else if s.DType.Bytes() < 1 {
		kv = "fp16"
	}
	switch {
	case s.LatentKV > 0:
		return fmt.Sprintf("%d layers x latent %d x %s", s.Layers, s.LatentKV, kv)
	case s.KVHeads > 0:
		return fmt.Sprintf("%d layers x 2 x %d KV heads x %d x %s", s.Layers, s.KVHeads, s.HeadDim, kv)
	}
	return fmt.Sprintf("%d layers x 2 x hidden %d x %s", s.Layers, s.Hidden, kv)
}

func params(p float64) string {
	if p >= 1e9 {
		return fmt.Sprintf("%.1fB", p/1e9)
	}
	return fmt.Sprintf("%.0fM", p/1e6)
}

func gb(m gpu.MiB) float64 { return float64(m) * (1 << 20) / 1e9 }

func kib(b int64) string { return fmt.Sprintf("%.0f KiB", float64(b)/1024) }
