package plan

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
	"github.com/gpupack/gpupack/vram"
)

// TestPreallocatingEngines: a workload whose engine takes a share of each
// GPU at start-up is sized on the estimate of the model it serves, not on
// its VRAM p95 (the preallocation); moved to a share, it gets the setting
// that keeps the engine within it. Without a model, the p95 stays.
func TestPreallocatingEngines(t *testing.T) {
	h100 := gpu.Default().MustLookup("H100-80GB")
	held := gpu.MiB(0.9 * float64(h100.Usable)) // what vLLM's default 0.9 shows as used
	vllm := &vram.Preallocation{Engine: vram.VLLM, Fraction: 0.9, Setting: "--gpu-memory-utilization", Default: true, Model: "meta-llama/Llama-3.1-8B-Instruct"}
	jax := &vram.Preallocation{Engine: vram.JAX, Fraction: 0.75, Setting: "XLA_PYTHON_CLIENT_MEM_FRACTION", Env: true, Default: true}
	prod := map[string]string{"app": "chat", "app.kubernetes.io/component": "inference", "environment": "production"}
	cases := map[string]struct {
		engine  *vram.Preallocation
		labels  map[string]string
		vramP95 gpu.MiB
		model   *vram.ModelSpec
		want    After
		notes   []string
	}{
		"vLLM serving a built-in family, time-sliced": {
			engine: vllm, vramP95: held,
			want:  After{Resource: "nvidia.com/gpu.shared", Engine: &vram.Setting{Engine: vram.VLLM, Name: "--gpu-memory-utilization", Value: "0.27"}},
			notes: []string{"vllm takes 90% of each GPU's memory at start-up (--gpu-memory-utilization not set: the default), so its VRAM p95 71.7GiB is that share, not its need: sized on the estimate of model meta-llama/Llama-3.1-8B-Instruct (family llama-3.1-8b)", "set --gpu-memory-utilization=0.27"},
		},
		"vLLM in production gets a MIG slice that holds its need": {
			engine: vllm, labels: prod, vramP95: held,
			want:  After{Resource: "nvidia.com/mig-3g.40gb"},
			notes: []string{"sized on the estimate of model meta-llama/Llama-3.1-8B-Instruct"},
		},
		"JAX with a model in the usage facts": {
			engine: jax, vramP95: gpu.MiB(0.75 * float64(h100.Usable)), model: &vram.ModelSpec{Params: 1e9, DType: "bf16"},
			want:  After{Resource: "nvidia.com/gpu.shared", Engine: &vram.Setting{Engine: vram.JAX, Name: "XLA_PYTHON_CLIENT_MEM_FRACTION", Env: true, Value: "0.04"}},
			notes: []string{"sized on the estimate of the model of its usage facts", "set XLA_PYTHON_CLIENT_MEM_FRACTION=0.04"},
		},
		"no model: the p95 stays, and the GPU with it": {
			engine: &vram.Preallocation{Engine: vram.VLLM, Fraction: 0.9, Setting: "--gpu-memory-utilization", Default: true}, vramP95: held,
			want:  After{Resource: "nvidia.com/gpu"},
			notes: []string{"so its VRAM p95 71.7GiB is that share, not its need; sized on it (give its model in the usage file"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := pod("ml", "chat-0", "h1", 1, tc.labels)
			p.Engine = tc.engine
			s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{node("h1", "H100-80GB", 8, cluster.Exclusive, nil)}, []*cluster.Pod{p})
			if err != nil {
				t.Fatal(err)
			}
			facts := obs(0.1, usage.Bursty, 0, 0.1)
			facts.VRAMUsedP95, facts.Model = tc.vramP95, tc.model
			pl, err := Make(context.Background(), s, &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{"ml/chat-0": facts}}, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			d := pl.Decisions[0]
			got := After{Resource: d.After.Resource, Engine: d.After.Engine}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("after (-want +got):\n%s\nreason: %s", diff, d.Reason.Detail)
			}
			for _, n := range tc.notes {
				if !strings.Contains(d.Reason.Detail, n) {
					t.Errorf("reason %q lacks %q", d.Reason.Detail, n)
				}
			}
		})
	}
}
