// Package vram is the `gpupack vram` verb: a model's GPU memory estimate
// and the catalogue GPUs and MIG profiles that hold it.
package vram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/vram"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/cli/clio"
)

type options struct {
	params  string
	dtype   string
	context int
	batch   int
	layers  int
	hidden  int
	format  string
}

// NewCommand returns the vram command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "vram",
		Short: "Estimate a model's GPU memory and list the GPUs and MIG profiles that hold it",
		Long: `vram estimates the GPU memory a model needs to serve:
  weights   parameters x bytes per parameter (FP32 4, FP16/BF16 2, FP8/INT8 1, INT4 0.5)
  KV cache  layers x 2 x hidden x context x batch x bytes (with --layers and --hidden)
  overhead  1 GiB of CUDA context and runtime plus 10% of weights and KV cache
and lists the catalogue's GPUs that hold it, judged on the memory the driver
reports (USABLE, below the NOMINAL size the GPU is sold by), on one GPU or
with tensor parallelism across 2, 4 or 8, and the smallest MIG profile of
each model that holds it.`,
		Example: `  gpupack vram --params 70B --dtype fp16
  gpupack vram --params 7B --dtype int4
  gpupack vram --params 8B --dtype bf16 --context 8192 --batch 4 --layers 32 --hidden 4096`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.params, "params", "7B", "parameters, e.g. 70B, 7B, 350M")
	f.StringVar(&o.dtype, "dtype", "fp16", "data type: fp32, fp16, bf16, fp8, int8 or int4")
	f.IntVar(&o.context, "context", vram.DefaultContext, "context length in tokens (KV cache)")
	f.IntVar(&o.batch, "batch", 1, "sequences served at once (KV cache)")
	f.IntVar(&o.layers, "layers", 0, "transformer layers (KV cache; with --hidden)")
	f.IntVar(&o.hidden, "hidden", 0, "hidden size (KV cache; with --layers)")
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	return cmd
}

// result is the JSON output.
type result struct {
	Estimate vram.Estimate `json:"estimate"`
	Options  []vram.Option `json:"options"`
}

func run(_ context.Context, o *options, stdout io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	params, err := vram.ParseParams(o.params)
	if err != nil {
		return fmt.Errorf("--params: %w", err)
	}
	dt, err := vram.ParseDType(o.dtype)
	if err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	// ModelSpec reads 0 as "not given"; a flag is always given, so 0 is a
	// mistake, not a request for the default.
	if o.batch < 1 {
		return fmt.Errorf("--batch %d: want at least 1 sequence served at once", o.batch)
	}
	if o.context < 1 {
		return fmt.Errorf("--context %d: want at least 1 token (the default is %d)", o.context, vram.DefaultContext)
	}
	spec := vram.ModelSpec{Params: params, DType: dt, Context: o.context, Batch: o.batch, Layers: o.layers, Hidden: o.hidden}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("--%w", err)
	}
	e := vram.EstimateMemory(spec)
	opts := vram.Options(gpu.Default(), e.Total)
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(result{Estimate: e, Options: opts})
	}
	fmt.Fprintf(stdout, "%s parameters in %s, context %d, batch %d\n", o.params, dt, e.Spec.Context, e.Spec.Batch)
	fmt.Fprintf(stdout, "  weights   %10s  (%.1f GB)\n", e.Weights, gb(e.Weights))
	if spec.Layers > 0 {
		fmt.Fprintf(stdout, "  KV cache  %10s  (%.1f GB)\n", e.KVCache, gb(e.KVCache))
	} else {
		fmt.Fprintf(stdout, "  KV cache  %10s  (give --layers and --hidden to count it)\n", "-")
	}
	fmt.Fprintf(stdout, "  overhead  %10s\n", e.Overhead)
	fmt.Fprintf(stdout, "  total     %10s  (%.1f GB)\n\n", e.Total, gb(e.Total))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tNOMINAL\tUSABLE\tGPUS NEEDED\tSMALLEST MIG PROFILE")
	for _, op := range opts {
		mig := "-"
		if op.MIGProfile != "" {
			mig = op.MIGProfile
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", op.Model, op.Nominal, op.Usable, op.GPUs, mig)
	}
	return tw.Flush()
}

func gb(m gpu.MiB) float64 { return float64(m) * (1 << 20) / 1e9 }
