package vram

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/internal/testkit/golden"
)

func TestGolden(t *testing.T) {
	cases := map[string]options{
		"70b-fp16":                 {params: "70B", dtype: "fp16", context: 4096, batch: 1, format: "table"},
		"7b-int4":                  {params: "7B", dtype: "int4", context: 4096, batch: 1, format: "table"},
		"7b-fp16":                  {params: "7B", dtype: "fp16", context: 4096, batch: 1, format: "table"},
		"8b-kv.json":               {params: "8B", dtype: "bf16", context: 8192, batch: 4, layers: 32, hidden: 4096, format: "json"},
		"llama-3.1-8b-config":      {modelConfig: "testdata/llama-3.1-8b.config.json", context: 8192, batch: 16, format: "table"},
		"mixtral-vllm":             {model: "mixtral-8x7b", context: 32768, batch: 1, engine: "vllm", format: "table"},
		"deepseek-v3":              {model: "deepseek-v3", context: 32768, batch: 4, format: "table"},
		"qwen3-235b-fp8-vllm.json": {model: "qwen3-235b-a22b", dtype: "fp8", kvDType: "bf16", context: 32768, batch: 8, engine: "vllm", utilization: 0.95, format: "json"},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), &o, &out); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", name+".golden"), out.Bytes())
		})
	}
}

func TestBadFlags(t *testing.T) {
	cases := map[string]struct {
		o    options
		want string
	}{
		"params":                     {options{params: "huge", dtype: "fp16", format: "table"}, "--params"},
		"dtype":                      {options{params: "7B", dtype: "fp4", format: "table"}, "--dtype"},
		"layers":                     {options{params: "7B", dtype: "fp16", context: 4096, batch: 1, layers: 32, format: "table"}, "--layers and hidden"},
		"batch 0":                    {options{params: "7B", dtype: "fp16", context: 4096, batch: 0, format: "table"}, "--batch 0"},
		"batch negative":             {options{params: "7B", dtype: "fp16", context: 4096, batch: -2, format: "table"}, "--batch -2"},
		"context 0":                  {options{params: "7B", dtype: "fp16", context: 0, batch: 1, format: "table"}, "--context 0"},
		"kv heads alone":             {options{context: 4096, batch: 1, layers: 32, kvHeads: 8, format: "table"}, "--kv heads and head dim: give both"},
		"both models":                {options{model: "mistral-7b", modelConfig: "c.json", context: 4096, batch: 1, format: "table"}, "--model and --model-config both"},
		"unknown family":             {options{model: "gpt-9", context: 4096, batch: 1, format: "table"}, `--model "gpt-9" is not a built-in model family`},
		"missing config":             {options{modelConfig: "testdata/nope.json", context: 4096, batch: 1, format: "table"}, "--model-config: open testdata/nope.json"},
		"bad config":                 {options{modelConfig: "vram_test.go", context: 4096, batch: 1, format: "table"}, "--model-config vram_test.go: invalid character"},
		"hand figures with a model":  {options{model: "mistral-7b", layers: 4, context: 4096, batch: 1, format: "table"}, "describe a model by hand"},
		"engine":                     {options{params: "7B", context: 4096, batch: 1, engine: "tgi", format: "table"}, `--engine "tgi": want vllm`},
		"utilization without engine": {options{params: "7B", context: 4096, batch: 1, utilization: 0.8, format: "table"}, "give --engine vllm with it"},
		"utilization above 1":        {options{params: "7B", context: 4096, batch: 1, engine: "vllm", utilization: 1.5, format: "table"}, "--gpu memory utilization: 1.5"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), &tc.o, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestFitsOnUsableMemory: 7B in FP16 needs 15,712 MiB by the estimate, more
// than the 15,360 MiB a T4's driver reports, though less than its nominal
// 16 GiB; vram must not call it a one-GPU fit.
func TestFitsOnUsableMemory(t *testing.T) {
	var out bytes.Buffer
	o := options{params: "7B", dtype: "fp16", context: 4096, batch: 1, format: "table"}
	if err := run(context.Background(), &o, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "T4" && f[3] != "2" {
			t.Errorf("T4 row %q: want 2 GPUs needed (15,712 MiB > 15,360 MiB usable)", line)
		}
	}
	if !strings.Contains(out.String(), "15.3GiB") {
		t.Errorf("total is not 15.3GiB (15,712 MiB) any more; the test's premise changed:\n%s", out.String())
	}
}
