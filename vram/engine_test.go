package vram

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

func TestDetect(t *testing.T) {
	cases := map[string]struct {
		c    Container
		want *Preallocation
	}{
		"vLLM's image, default utilisation, model as --model": {
			c:    Container{Image: "vllm/vllm-openai:v0.11.0", Args: []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"}},
			want: &Preallocation{Engine: VLLM, Fraction: 0.9, Setting: "--gpu-memory-utilization", Default: true, Model: "meta-llama/Llama-3.1-8B-Instruct"},
		},
		"vllm serve with its utilisation set": {
			c:    Container{Image: "ghcr.io/acme/llm:1", Command: []string{"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"}, Args: []string{"--gpu-memory-utilization=0.5"}},
			want: &Preallocation{Engine: VLLM, Fraction: 0.5, Setting: "--gpu-memory-utilization", Model: "Qwen/Qwen2.5-7B-Instruct"},
		},
		"vLLM in a shell line": {
			c:    Container{Image: "python:3.12", Command: []string{"sh", "-c", "pip install vllm && python -m vllm.entrypoints.openai.api_server --model mistralai/Mistral-7B-Instruct-v0.3 --gpu-memory-utilization 0.7"}},
			want: &Preallocation{Engine: VLLM, Fraction: 0.7, Setting: "--gpu-memory-utilization", Model: "mistralai/Mistral-7B-Instruct-v0.3"},
		},
		"TGI, default fraction, model from MODEL_ID": {
			c:    Container{Image: "ghcr.io/huggingface/text-generation-inference:3.3.5", Env: map[string]string{"MODEL_ID": "meta-llama/Llama-3.1-8B"}},
			want: &Preallocation{Engine: TGI, Fraction: 1, Setting: "--cuda-memory-fraction", Default: true, Model: "meta-llama/Llama-3.1-8B"},
		},
		"TGI with CUDA_MEMORY_FRACTION": {
			c:    Container{Image: "ghcr.io/huggingface/text-generation-inference:3.3.5", Args: []string{"--model-id", "Qwen/Qwen2.5-14B-Instruct"}, Env: map[string]string{"CUDA_MEMORY_FRACTION": "0.4"}},
			want: &Preallocation{Engine: TGI, Fraction: 0.4, Setting: "CUDA_MEMORY_FRACTION", Env: true, Model: "Qwen/Qwen2.5-14B-Instruct"},
		},
		"JAX by its variables": {
			c:    Container{Image: "nvcr.io/nvidia/jax:25.04-py3", Env: map[string]string{"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"}},
			want: &Preallocation{Engine: JAX, Fraction: 0.3, Setting: "XLA_PYTHON_CLIENT_MEM_FRACTION", Env: true},
		},
		"JAX by its image, default fraction": {
			c:    Container{Image: "ghcr.io/nvidia/jax:maxtext"},
			want: &Preallocation{Engine: JAX, Fraction: 0.75, Setting: "XLA_PYTHON_CLIENT_MEM_FRACTION", Env: true, Default: true},
		},
		"JAX without preallocation": {
			c: Container{Image: "ghcr.io/nvidia/jax:maxtext", Env: map[string]string{"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}},
		},
		"TensorFlow maps the whole GPU": {
			c:    Container{Image: "tensorflow/tensorflow:2.20.0-gpu"},
			want: &Preallocation{Engine: TensorFlow, Fraction: 1, Setting: "TF_FORCE_GPU_ALLOW_GROWTH", Env: true, Default: true},
		},
		"TensorFlow that grows": {
			c: Container{Image: "tensorflow/tensorflow:2.20.0-gpu", Env: map[string]string{"TF_FORCE_GPU_ALLOW_GROWTH": "true"}},
		},
		"PyTorch allocates what it uses": {
			c: Container{Image: "pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime", Command: []string{"python", "train.py"}},
		},
		"a fraction out of range is the default": {
			c:    Container{Image: "vllm/vllm-openai", Args: []string{"--gpu-memory-utilization", "1.5"}},
			want: &Preallocation{Engine: VLLM, Fraction: 0.9, Setting: "--gpu-memory-utilization", Default: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Detect(tc.c)
			var gotp *Preallocation
			if ok {
				gotp = &got
			}
			if diff := cmp.Diff(tc.want, gotp); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyArgs(t *testing.T) {
	set := Setting{Engine: VLLM, Name: "--gpu-memory-utilization", Value: "0.24"}
	cases := map[string]struct {
		command, args         []string
		wantCommand, wantArgs []string
		wantErr               bool
	}{
		"flag and value as two arguments": {
			args: []string{"--model", "m", "--gpu-memory-utilization", "0.9"}, wantArgs: []string{"--model", "m", "--gpu-memory-utilization", "0.24"},
		},
		"flag=value": {
			command: []string{"vllm", "serve", "m"}, args: []string{"--gpu-memory-utilization=0.9"},
			wantCommand: []string{"vllm", "serve", "m"}, wantArgs: []string{"--gpu-memory-utilization=0.24"},
		},
		"not given: appended": {
			command: []string{"vllm", "serve", "m"}, wantCommand: []string{"vllm", "serve", "m"}, wantArgs: []string{"--gpu-memory-utilization=0.24"},
		},
		"in a shell line": {
			command:     []string{"sh", "-c", "vllm serve m --gpu-memory-utilization 0.9 --port 8000"},
			wantCommand: []string{"sh", "-c", "vllm serve m --gpu-memory-utilization=0.24 --port 8000"},
		},
		"a shell line without it": {
			command: []string{"/bin/bash", "-c", "vllm serve m"}, wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd, args, err := set.ApplyArgs(tc.command, tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff([2][]string{tc.wantCommand, tc.wantArgs}, [2][]string{cmd, args}); diff != "" {
				t.Errorf("command and args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFractionForAndSetting(t *testing.T) {
	if got := FractionFor(19500, 81559); got != 0.23 {
		t.Errorf("FractionFor(19500, 81559) = %v, want 0.23 (rounded down)", got)
	}
	if got := FractionFor(90000, gpu.MiB(81559)); got != 1 {
		t.Errorf("FractionFor above the GPU = %v, want 1", got)
	}
	cases := map[string]struct {
		p    Preallocation
		want string
	}{
		"vLLM":                         {Preallocation{Engine: VLLM, Setting: "--gpu-memory-utilization"}, "--gpu-memory-utilization=0.23"},
		"TGI by its flag":              {Preallocation{Engine: TGI, Setting: "--cuda-memory-fraction"}, "--cuda-memory-fraction=0.23"},
		"TGI by its variable":          {Preallocation{Engine: TGI, Setting: "CUDA_MEMORY_FRACTION", Env: true}, "CUDA_MEMORY_FRACTION=0.23"},
		"JAX":                          {Preallocation{Engine: JAX, Setting: "XLA_PYTHON_CLIENT_MEM_FRACTION", Env: true}, "XLA_PYTHON_CLIENT_MEM_FRACTION=0.23"},
		"TensorFlow grows as it needs": {Preallocation{Engine: TensorFlow, Setting: "TF_FORCE_GPU_ALLOW_GROWTH", Env: true}, "TF_FORCE_GPU_ALLOW_GROWTH=true"},
	}
	for name, tc := range cases {
		if got := tc.p.SettingFor(0.23).String(); got != tc.want {
			t.Errorf("%s: SettingFor(0.23) = %s, want %s", name, got, tc.want)
		}
	}
}

func TestModelFamily(t *testing.T) {
	cases := map[string]string{
		"meta-llama/Llama-3.1-8B-Instruct":   "llama-3.1-8b",
		"meta-llama/Meta-Llama-3.1-70B":      "llama-3.1-70b",
		"Qwen/Qwen2.5-14B-Instruct":          "qwen2.5-14b",
		"mistralai/Mistral-7B-Instruct-v0.3": "mistral-7b",
		"meta-llama/Llama-3.1-8Bx":           "",
		"google/gemma-3-27b-it":              "",
	}
	for id, want := range cases {
		got, _ := ModelFamily(id)
		if got != want {
			t.Errorf("ModelFamily(%q) = %q, want %q", id, got, want)
		}
	}
}
