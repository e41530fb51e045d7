package vram

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

func TestEstimateMemory(t *testing.T) {
	const gb = 1e9 / (1 << 20) // MiB per decimal GB
	cases := map[string]struct {
		spec         ModelSpec
		weightsGB    float64 // decimal GB, within 1%
		minGPUs80GiB int     // H100-80GB GPUs that hold the total
	}{
		"70B fp16":               {ModelSpec{Params: 70e9, DType: "fp16"}, 140, 2},
		"7B fp16":                {ModelSpec{Params: 7e9, DType: "fp16"}, 14, 1},
		"7B int4":                {ModelSpec{Params: 7e9, DType: "int4"}, 3.5, 1},
		"7B fp32":                {ModelSpec{Params: 7e9, DType: "fp32"}, 28, 1},
		"70B int8":               {ModelSpec{Params: 70e9, DType: "int8"}, 70, 1},
		"70B fp16 with KV cache": {ModelSpec{Params: 70e9, DType: "fp16", Context: 4096, Batch: 1, Layers: 80, Hidden: 8192}, 140, 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := tc.spec.Validate(); err != nil {
				t.Fatal(err)
			}
			e := EstimateMemory(tc.spec)
			got := float64(e.Weights) / gb
			if got < tc.weightsGB*0.99 || got > tc.weightsGB*1.01 {
				t.Errorf("weights = %.1f GB, want about %.1f GB", got, tc.weightsGB)
			}
			if e.Total != e.Weights+e.KVCache+e.Overhead {
				t.Errorf("total %d != %d + %d + %d", e.Total, e.Weights, e.KVCache, e.Overhead)
			}
			var h100 Option
			for _, o := range Options(gpu.Default(), e) {
				if o.Model == "H100-80GB" {
					h100 = o
				}
			}
			if h100.GPUs != tc.minGPUs80GiB {
				t.Errorf("H100-80GB GPUs = %d, want %d (total %s)", h100.GPUs, tc.minGPUs80GiB, e.Total)
			}
		})
	}
	// 7B in INT4 is about 4 GB in all.
	if e := EstimateMemory(ModelSpec{Params: 7e9, DType: "int4"}); e.Total < gpu.GiB(3.5) || e.Total > gpu.GiB(5) {
		t.Errorf("7B int4 total = %s, want about 4 GiB", e.Total)
	}
	// KV cache: layers x 2 x hidden x context x batch x bytes.
	e := EstimateMemory(ModelSpec{Params: 7e9, DType: "fp16", Context: 4096, Batch: 2, Layers: 32, Hidden: 4096})
	if want := gpu.MiB(32 * 2 * 4096 * 4096 * 2 * 2 >> 20); e.KVCache != want {
		t.Errorf("KV cache = %d MiB, want %d", e.KVCache, want)
	}
}

func TestOptionsMIG(t *testing.T) {
	opts := Options(gpu.Default(), Need(gpu.GiB(15)))
	got := map[string]string{}
	for _, o := range opts {
		if o.GPUs == 1 {
			got[o.Model] = o.MIGProfile
		}
	}
	want := map[string]string{"H200-141GB": "1g.18gb", "H100-80GB": "1g.20gb", "A100-80GB": "1g.20gb", "A100-40GB": "3g.20gb",
		"L40S": "", "A30": "4g.24gb", "A10": "", "L4": "", "V100-32GB": "", "V100-16GB": "", "T4": "", "P100": "",
		"B200": "1g.23gb", "GB200": "1g.23gb", "H200-NVL": "1g.18gb", "H100-NVL": "1g.24gb", "H100-PCIe": "1g.20gb",
		"GH200": "1g.24gb", "GH200-144GB": "1g.18gb", "H20": "1g.24gb", "RTX-PRO-6000": "1g.24gb", "L40": "", "A10G": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("single-GPU options for 15GiB (-want +got):\n%s", diff)
	}
}

func TestParseParamsAndDType(t *testing.T) {
	good := map[string]float64{"70B": 70e9, "7b": 7e9, "1.5B": 1.5e9, "350M": 350e6, "1T": 1e12, "8000000000": 8e9}
	for in, want := range good {
		if got, err := ParseParams(in); err != nil || got != want {
			t.Errorf("ParseParams(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "B", "-7B", "0", "NaNB", "infB", "100T", "12"} {
		if _, err := ParseParams(bad); err == nil {
			t.Errorf("ParseParams(%q): want an error", bad)
		}
	}
	if d, err := ParseDType("BF16"); err != nil || d.Bytes() != 2 {
		t.Errorf("ParseDType(BF16) = %v, %v", d, err)
	}
	if _, err := ParseDType("fp4"); err == nil {
		t.Error("ParseDType(fp4): want an error")
	}
}

// TestOptionsTensorParallelDegrees: tensor-parallel groups are 1, 2, 4 or 8
// GPUs, the smallest whose usable memory holds the need; never 3, 5, 6 or 7.
func TestOptionsTensorParallelDegrees(t *testing.T) {
	c := gpu.Default()
	for need := gpu.GiB(1); need <= gpu.GiB(1200); need += gpu.GiB(7.5) {
		for _, o := range Options(c, Need(need)) {
			if !slices.Contains(TensorParallelDegrees, o.GPUs) {
				t.Fatalf("need %s: %d x %s is not a tensor-parallel degree %v", need, o.GPUs, o.Model, TensorParallelDegrees)
			}
			m := c.MustLookup(o.Model)
			if gpu.MiB(o.GPUs)*m.Usable < need {
				t.Errorf("need %s: %d x %s holds only %s", need, o.GPUs, o.Model, gpu.MiB(o.GPUs)*m.Usable)
			}
			if i := slices.Index(TensorParallelDegrees, o.GPUs); i > 0 && gpu.MiB(TensorParallelDegrees[i-1])*m.Usable >= need {
				t.Errorf("need %s: %d x %s, but %d would hold it", need, o.GPUs, o.Model, TensorParallelDegrees[i-1])
			}
		}
	}
	// 144.4GiB (70B in FP16) on 32 GiB V100s: 5 would hold it, and the
	// degree serving stacks run is 8.
	for _, o := range Options(c, Need(gpu.GiB(144.4))) {
		if o.Model == "V100-32GB" && o.GPUs != 8 {
			t.Errorf("70B fp16 on V100-32GB: %d GPUs, want 8", o.GPUs)
		}
	}
	// 7B in FP16 (15,712 MiB) is more than a T4's 15,360 usable MiB.
	for _, o := range Options(c, Need(15712)) {
		if o.Model == "T4" && o.GPUs != 2 {
			t.Errorf("15712 MiB on T4: %d GPUs, want 2", o.GPUs)
		}
	}
}
