package cluster

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/gpu"
)

// Limits beyond which a trace quantity is taken for a mistake.
const (
	maxTraceCPU    = gpu.CPUMilli(100_000_000) // 100,000 cores
	maxTraceMemory = gpu.MiB(1 << 30)          // 1 PiB
	maxTraceGPUs   = 64
)

// TraceError locates a problem in a trace CSV.
type TraceError struct {
	File   string
	Line   int
	Column string
	Err    error
}

func (e *TraceError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: column %s: %v", e.File, e.Line, e.Column, e.Err)
}

func (e *TraceError) Unwrap() error { return e.Err }

// csvTable reads a CSV with a header and looks columns up by name.
type csvTable struct {
	file string
	r    *csv.Reader
	cols map[string]int
	row  []string
}

func newCSVTable(r io.Reader, file string, required []string) (*csvTable, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = 0
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, &TraceError{File: file, Line: 1, Err: errors.New("empty file; want a CSV header line")}
	}
	if err != nil {
		return nil, csvError(file, err)
	}
	t := &csvTable{file: file, r: cr, cols: map[string]int{}}
	for i, h := range header {
		t.cols[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range required {
		if _, ok := t.cols[c]; !ok {
			return nil, &TraceError{File: file, Line: 1, Err: fmt.Errorf("missing column %q (header has %s; want %s)", c, quoteAll(header), strings.Join(required, ","))}
		}
	}
	return t, nil
}

// quoteAll lists a header's names for a message, each quoted with its
// control bytes escaped: they are the file's, and a terminal prints the
// message.
func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ",")
}

func csvError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &TraceError{File: file, Line: pe.Line, Column: strconv.Itoa(pe.Column), Err: pe.Err}
	}
	return fmt.Errorf("%s: %w", file, err)
}

// next reads the next row; it returns false at the end of the file.
func (t *csvTable) next() (bool, error) {
	row, err := t.r.Read()
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, csvError(t.file, err)
	}
	t.row = row
	return true, nil
}

func (t *csvTable) line() int {
	l, _ := t.r.FieldPos(0)
	return l
}

func (t *csvTable) get(col string) string { return strings.TrimSpace(t.row[t.cols[col]]) }

func (t *csvTable) errorf(col, format string, args ...any) error {
	return &TraceError{File: t.file, Line: t.line(), Column: col, Err: fmt.Errorf(format, args...)}
}

// int reads a non-negative integer column no larger than limit.
func (t *csvTable) int(col string, limit int64) (int64, error) {
	s := t.get(col)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, t.errorf(col, "%q is not a whole number", s)
	}
	if v < 0 {
		return 0, t.errorf(col, "%d is negative", v)
	}
	if v > limit {
		return 0, t.errorf(col, "%d is absurdly large (limit %d)", v, limit)
	}
	return v, nil
}

// cpuAndMemory reads the cpu_milli and memory_mib columns that node and pod
// lists share.
func (t *csvTable) cpuAndMemory() (gpu.CPUMilli, gpu.MiB, error) {
	cpu, err := t.int("cpu_milli", int64(maxTraceCPU))
	if err != nil {
		return 0, 0, err
	}
	mem, err := t.int("memory_mib", int64(maxTraceMemory))
	if err != nil {
		return 0, 0, err
	}
	return gpu.CPUMilli(cpu), gpu.MiB(mem), nil
}

// isNone reports the trace's ways of writing "no value".
func isNone(s string) bool {
	return s == "" || strings.EqualFold(s, "nan") || strings.EqualFold(s, "none")
}

// LoadTraceNodes reads an openb node list (sn, cpu_milli, memory_mib, gpu,
// model). Nodes without GPUs are kept. GPUs are Fractional, as the trace's
// cluster shares them in milli-GPU.
func LoadTraceNodes(r io.Reader, file string, c *gpu.Catalogue) ([]*Node, error) {
	t, err := newCSVTable(r, file, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"})
	if err != nil {
		return nil, err
	}
	var nodes []*Node
	seen := map[string]int{}
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		name := t.get("sn")
		if name == "" {
			return nil, t.errorf("sn", "empty node name")
		}
		if prev, dup := seen[name]; dup {
			return nil, t.errorf("sn", "node %q already listed on line %d", name, prev)
		}
		seen[name] = t.line()
		cpu, mem, err := t.cpuAndMemory()
		if err != nil {
			return nil, err
		}
		count, err := t.int("gpu", maxTraceGPUs)
		if err != nil {
			return nil, err
		}
		n := &Node{Name: name, CPU: cpu, Memory: mem}
		if count > 0 {
			modelName := t.get("model")
			if isNone(modelName) {
				return nil, t.errorf("model", "node has %d GPUs but no model", count)
			}
			m, err := c.Resolve(modelName)
			if err != nil {
				return nil, t.errorf("model", "%v", err)
			}
			n.Labels = map[string]string{"nvidia.com/gpu.product": m.Name}
			n.GPUs = make([]GPU, count)
			for i := range n.GPUs {
				n.GPUs[i] = GPU{Index: i, Model: m, Memory: m.Usable, Sharing: Fractional}
			}
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, &TraceError{File: file, Line: 2, Err: errors.New("no nodes; the file has only a header")}
	}
	return nodes, nil
}

// LoadTracePods reads an openb pod list (name, cpu_milli, memory_mib,
// num_gpu, gpu_milli, gpu_spec, ...). A pod with num_gpu 1 and gpu_milli
// under 1000 asks for a Fraction; num_gpu N with gpu_milli 1000 for N whole
// GPUs; num_gpu 0 for none. gpu_spec is a "|"-separated list of models.
// Other columns (qos, phase, times) are ignored.
func LoadTracePods(r io.Reader, file string, c *gpu.Catalogue) ([]*Pod, error) {
	t, err := newCSVTable(r, file, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"})
	if err != nil {
		return nil, err
	}
	_, hasSpec := t.cols["gpu_spec"]
	var pods []*Pod
	seen := map[string]int{}
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		p := &Pod{Name: t.get("name")}
		if p.Name == "" {
			return nil, t.errorf("name", "empty pod name")
		}
		if prev, dup := seen[p.Name]; dup {
			return nil, t.errorf("name", "pod %q already listed on line %d", p.Name, prev)
		}
		seen[p.Name] = t.line()
		cpu, mem, err := t.cpuAndMemory()
		if err != nil {
			return nil, err
		}
		n, err := t.int("num_gpu", maxTraceGPUs)
		if err != nil {
			return nil, err
		}
		milli, err := t.int("gpu_milli", int64(gpu.WholeGPU))
		if err != nil {
			return nil, err
		}
		p.CPU, p.Memory = cpu, mem
		switch {
		case n == 0 && milli == 0:
		case n == 0:
			return nil, t.errorf("gpu_milli", "%d milli-GPU with num_gpu 0; set num_gpu to 1 for a GPU-sharing pod", milli)
		case milli == 0:
			return nil, t.errorf("gpu_milli", "0 with num_gpu %d; a GPU pod needs gpu_milli 1..1000", n)
		case milli == int64(gpu.WholeGPU):
			p.GPU = Request{Kind: WholeGPUs, Count: int(n)}
		case n == 1:
			p.GPU = Request{Kind: Fraction, Milli: gpu.Milli(milli)}
		default:
			return nil, t.errorf("gpu_milli", "%d milli-GPU on each of %d GPUs; fractions are supported on one GPU only", milli, n)
		}
		if hasSpec {
			if spec := t.get("gpu_spec"); !isNone(spec) && p.GPU.Kind != NoGPU {
				for _, name := range strings.Split(spec, "|") {
					m, err := c.Resolve(strings.TrimSpace(name))
					if err != nil {
						return nil, t.errorf("gpu_spec", "%v", err)
					}
					if !containsName(p.GPUModels, m.Name) {
						p.GPUModels = append(p.GPUModels, m.Name)
					}
				}
			}
		}
		pods = append(pods, p)
	}
	if len(pods) == 0 {
		return nil, &TraceError{File: file, Line: 2, Err: errors.New("no pods; the file has only a header")}
	}
	return pods, nil
}

func containsName(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
