package vram

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/gpu"
)

// Engine is a serving or training runtime that takes a share of each
// GPU's memory when it starts, whatever its model needs: the GPU then
// shows that share as used, so measured VRAM is the preallocation, not the
// need.
type Engine string

// The engines Detect knows, with the setting that sizes their share and
// its default:
//   - vLLM: --gpu-memory-utilization, 0.9 (vllm/engine/arg_utils.py,
//     EngineArgs.gpu_memory_utilization);
//   - Text Generation Inference: --cuda-memory-fraction or the variable
//     CUDA_MEMORY_FRACTION, 1.0 (its launcher's clap argument);
//   - JAX: XLA_PYTHON_CLIENT_MEM_FRACTION, 0.75 (JAX's "GPU memory
//     allocation" page); XLA_PYTHON_CLIENT_PREALLOCATE=false or
//     XLA_PYTHON_CLIENT_ALLOCATOR=platform turn preallocation off;
//   - TensorFlow: maps nearly all of each GPU's memory unless
//     TF_FORCE_GPU_ALLOW_GROWTH=true, which makes it grow as it needs.
const (
	VLLM       Engine = "vllm"
	TGI        Engine = "tgi"
	JAX        Engine = "jax"
	TensorFlow Engine = "tensorflow"
)

// The settings' names.
const (
	flagVLLMUtilization = "--gpu-memory-utilization"
	flagTGIFraction     = "--cuda-memory-fraction"
	envTGIFraction      = "CUDA_MEMORY_FRACTION"
	envJAXFraction      = "XLA_PYTHON_CLIENT_MEM_FRACTION"
	envJAXPreallocate   = "XLA_PYTHON_CLIENT_PREALLOCATE"
	envJAXAllocator     = "XLA_PYTHON_CLIENT_ALLOCATOR"
	envTFAllowGrowth    = "TF_FORCE_GPU_ALLOW_GROWTH"
)

// EngineVariables are the environment variables Detect reads.
var EngineVariables = []string{envTGIFraction, "MODEL_ID", envJAXFraction, envJAXPreallocate, envJAXAllocator, envTFAllowGrowth}

// Container is what detection reads of a container: its image, command,
// arguments and the environment variables with literal values.
type Container struct {
	Image   string
	Command []string
	Args    []string
	Env     map[string]string
}

// Preallocation is an engine found in a container and the share of each
// GPU's memory it takes.
type Preallocation struct {
	Engine Engine `json:"engine"`
	// Fraction is the share, 0..1, of each GPU's memory it takes at
	// start-up.
	Fraction float64 `json:"fraction"`
	// Setting is the flag or (Env) environment variable that sets it.
	Setting string `json:"setting"`
	Env     bool   `json:"env,omitempty"`
	// Default says the container does not set it: Fraction is the
	// engine's default.
	Default bool `json:"default,omitempty"`
	// Model is the model the container serves as its arguments name it
	// (vLLM's serve argument or --model, TGI's --model-id or MODEL_ID);
	// "" when none does.
	Model string `json:"model,omitempty"`
}

// Validate checks a preallocation read from a file: a known engine, its
// setting, and a fraction in (0, 1].
func (p Preallocation) Validate() error {
	if !slices.Contains([]Engine{VLLM, TGI, JAX, TensorFlow}, p.Engine) {
		return fmt.Errorf("engine %q is unknown (known: %s, %s, %s, %s)", p.Engine, VLLM, TGI, JAX, TensorFlow)
	}
	if p.Setting == "" {
		return fmt.Errorf("setting: name the flag or variable that sets %s's share (such as %s)", p.Engine, flagVLLMUtilization)
	}
	if _, ok := parseFraction(strconv.FormatFloat(p.Fraction, 'g', -1, 64)); !ok {
		return fmt.Errorf("fraction %g: want more than 0 and at most 1", p.Fraction)
	}
	return nil
}

// Detect finds a preallocating engine in the container: by its image,
// command and arguments (vLLM, TGI), environment (JAX) or image
// (TensorFlow, JAX). ok is false for a container that runs none, or one
// whose engine is told not to preallocate.
func Detect(c Container) (Preallocation, bool) {
	words := commandWords(c)
	image := strings.ToLower(c.Image)
	switch {
	case strings.Contains(image, "vllm") || slices.ContainsFunc(words, isVLLMWord):
		return detectFlag(words, c, Preallocation{Engine: VLLM, Fraction: 0.9, Setting: flagVLLMUtilization})
	case strings.Contains(image, "text-generation-inference") || slices.Contains(words, "text-generation-launcher"):
		p, _ := detectFlag(words, c, Preallocation{Engine: TGI, Fraction: 1, Setting: flagTGIFraction})
		if v, ok := c.Env[envTGIFraction]; ok && p.Default {
			if f, ok := parseFraction(v); ok {
				p.Fraction, p.Setting, p.Env, p.Default = f, envTGIFraction, true, false
			}
		}
		if p.Model == "" {
			p.Model = c.Env["MODEL_ID"]
		}
		return p, true
	case hasAny(c.Env, envJAXFraction, envJAXPreallocate, envJAXAllocator) || strings.Contains(image, "jax"):
		if strings.EqualFold(c.Env[envJAXPreallocate], "false") || strings.EqualFold(c.Env[envJAXAllocator], "platform") {
			return Preallocation{}, false
		}
		p := Preallocation{Engine: JAX, Fraction: 0.75, Setting: envJAXFraction, Env: true, Default: true}
		if f, ok := parseFraction(c.Env[envJAXFraction]); ok {
			p.Fraction, p.Default = f, false
		}
		return p, true
	case strings.Contains(image, "tensorflow") || hasAny(c.Env, envTFAllowGrowth):
		if strings.EqualFold(c.Env[envTFAllowGrowth], "true") {
			return Preallocation{}, false
		}
		return Preallocation{Engine: TensorFlow, Fraction: 1, Setting: envTFAllowGrowth, Env: true, Default: true}, true
	}
	return Preallocation{}, false
}

// isVLLMWord: the vllm command, or its OpenAI server's module.
func isVLLMWord(w string) bool {
	return path.Base(w) == "vllm" || strings.HasPrefix(w, "vllm.entrypoints")
}

// detectFlag reads p's flag, and the model served, from the words.
func detectFlag(words []string, c Container, p Preallocation) (Preallocation, bool) {
	p.Default = true
	if v, ok := flagValue(words, p.Setting); ok {
		if f, ok := parseFraction(v); ok {
			p.Fraction, p.Default = f, false
		}
	}
	switch p.Engine {
	case VLLM:
		if v, ok := flagValue(words, "--model"); ok {
			p.Model = v
		} else if i := slices.Index(words, "serve"); i >= 0 && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
			p.Model = words[i+1]
		}
	case TGI:
		p.Model, _ = flagValue(words, "--model-id")
	}
	return p, true
}

// commandWords are the command's and arguments' words, each split at
// blanks, so that a shell's "-c" line is read too.
func commandWords(c Container) []string {
	var out []string
	for _, s := range append(slices.Clone(c.Command), c.Args...) {
		out = append(out, strings.Fields(s)...)
	}
	return out
}

// flagValue is the value of --flag=V or --flag V among the words.
func flagValue(words []string, flag string) (string, bool) {
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, flag+"="); ok {
			return strings.Trim(v, `"'`), true
		}
		if w == flag && i+1 < len(words) {
			return strings.Trim(words[i+1], `"'`), true
		}
	}
	return "", false
}

func parseFraction(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f, err == nil && f > 0 && f <= 1
}

func hasAny(env map[string]string, names ...string) bool {
	for _, n := range names {
		if _, ok := env[n]; ok {
			return true
		}
	}
	return false
}

// FractionFor is the share of a GPU of total memory that holds share,
// rounded down to hundredths (the engine must stay within its share), at
// least 0.01 and at most 1.
func FractionFor(share, total gpu.MiB) float64 {
	if total <= 0 {
		return 1
	}
	return min(1, max(0.01, math.Floor(100*float64(share)/float64(total))/100))
}

// Setting is what to set in a container so that its engine takes no more
// than its share: the flag (in the arguments) or variable, and its value.
type Setting struct {
	Engine Engine `json:"engine"`
	Name   string `json:"name"`
	Env    bool   `json:"env,omitempty"`
	Value  string `json:"value"`
}

// SettingFor is the setting that has the engine take fraction of each
// GPU's memory; TensorFlow, which has no such variable, grows as it needs
// instead.
func (p Preallocation) SettingFor(fraction float64) Setting {
	if p.Engine == TensorFlow {
		return Setting{Engine: p.Engine, Name: envTFAllowGrowth, Env: true, Value: "true"}
	}
	v := strconv.FormatFloat(fraction, 'f', -1, 64)
	if p.Engine == TGI && p.Env {
		return Setting{Engine: p.Engine, Name: envTGIFraction, Env: true, Value: v}
	}
	return Setting{Engine: p.Engine, Name: p.Setting, Env: p.Env, Value: v}
}

// String is how a person writes the setting: "--gpu-memory-utilization=0.24"
// or "XLA_PYTHON_CLIENT_MEM_FRACTION=0.24".
func (s Setting) String() string { return s.Name + "=" + s.Value }

// ApplyArgs sets a flag setting in a container's command line: it
// replaces the flag's value where the command or arguments give it (in a
// shell's "-c" line too), and otherwise appends it to the arguments. It
// returns the new command and arguments, or an error for a shell command
// line that does not give the flag: appending to it would not reach the
// engine.
func (s Setting) ApplyArgs(command, args []string) ([]string, []string, error) {
	if s.Env {
		return command, args, fmt.Errorf("%s is an environment variable, not a flag", s.Name)
	}
	flag := regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(s.Name) + `(=|\s+)("[^"]*"|'[^']*'|\S+)`)
	newCommand, newArgs := slices.Clone(command), slices.Clone(args)
	for _, list := range [][]string{newCommand, newArgs} {
		for i, w := range list {
			if w == s.Name && i+1 < len(list) {
				list[i+1] = s.Value
				return newCommand, newArgs, nil
			}
			if loc := flag.FindStringSubmatchIndex(w); loc != nil {
				list[i] = w[:loc[4]] + "=" + s.Value + w[loc[1]:]
				return newCommand, newArgs, nil
			}
		}
	}
	if isShell(command) {
		return command, args, fmt.Errorf("the container runs a shell command line that does not give %s; add %s to it", s.Name, s)
	}
	return newCommand, append(newArgs, s.String()), nil
}

// isShell says whether the command is a shell running a "-c" line.
func isShell(command []string) bool {
	return len(command) >= 2 && slices.Contains([]string{"sh", "bash", "ash", "dash", "zsh"}, path.Base(command[0])) && slices.Contains(command[1:], "-c")
}

// ModelFamily finds the built-in family (Families) of a model that a
// serving engine names by its Hugging Face id ("meta-llama/Llama-3.1-8B-
// Instruct" is llama-3.1-8b): the longest family that the id's last part
// starts with, as whole dash-separated parts.
func ModelFamily(id string) (string, bool) {
	name := strings.ToLower(path.Base(strings.TrimSpace(id)))
	name = strings.TrimPrefix(name, "meta-")
	best := ""
	for _, f := range Families() {
		if (name == f || strings.HasPrefix(name, f+"-")) && len(f) > len(best) {
			best = f
		}
	}
	return best, best != ""
}
