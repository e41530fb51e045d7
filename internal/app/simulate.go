package app

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/sim"
)

// Simulation names a trace experiment: the node and pod lists (CSV paths,
// or embedded names such as "openb:default"), the policies compared, the
// seed of the workload's copies and order, and GPU demand as a multiple of
// the cluster's GPU capacity.
type Simulation struct {
	Nodes, Pods string
	Policies    []string
	Seed        uint64
	Inflation   float64
	// Bounds asks for the workload's bounds beside the runs (the
	// place-if-fits cap and the hindsight packing): seconds more.
	Bounds bool
	// Progress, when set, returns the progress callback of one policy's
	// run (nil for none).
	Progress func(policy string) func(done, total int)
}

// DefaultSimulation is what `gpupack simulate` runs with no flags:
// gpupack's policy and FGD on the embedded openb trace.
func DefaultSimulation() Simulation {
	return Simulation{Nodes: "openb:" + openb.Nodes, Pods: "openb:" + openb.DefaultPods,
		Policies: []string{placement.DefaultPolicy, "fgd"}, Seed: 1, Inflation: sim.DefaultInflation}
}

// Trace is a loaded node and pod list, and the workload inflated from it.
type Trace struct {
	Nodes     []*cluster.Node
	Pods      []*cluster.Pod
	Workload  []*cluster.Pod
	Catalogue *gpu.Catalogue
}

// Simulate runs every policy on the trace, in order, then, when s.Bounds
// asks, the workload's bounds (nil otherwise); warnings go to stderr, and
// each, when set, sees each result (the bounds last) as soon as it is
// done.
func Simulate(ctx context.Context, s Simulation, stderr io.Writer, each func(any) error) ([]sim.Result, *sim.Bounds, error) {
	results, t, err := runPolicies(ctx, s, stderr, each)
	if err != nil || !s.Bounds {
		return results, nil, err
	}
	b, err := sim.WorkloadBounds(ctx, t.Nodes, t.Workload, t.Catalogue, s.Seed)
	if err != nil {
		return nil, nil, err
	}
	if each != nil {
		if err := each(b); err != nil {
			return nil, nil, err
		}
	}
	return results, &b, nil
}

// CheckPolicies refuses an unknown policy, or one named twice.
func CheckPolicies(policies []string) error {
	seen := map[string]bool{}
	for _, p := range policies {
		if _, err := placement.New(p, placement.Options{}); err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
		if seen[p] {
			return fmt.Errorf("--policy: %s is given twice; name each policy once", p)
		}
		seen[p] = true
	}
	return nil
}

// runPolicies loads the trace and runs every policy on it.
func runPolicies(ctx context.Context, s Simulation, stderr io.Writer, each func(any) error) ([]sim.Result, *Trace, error) {
	if err := CheckPolicies(s.Policies); err != nil {
		return nil, nil, err
	}
	c := gpu.Default()
	nodes, pods, err := LoadTrace(s.Nodes, s.Pods, c, stderr)
	if err != nil {
		return nil, nil, err
	}
	workload, err := sim.Inflate(pods, Capacity(nodes), s.Inflation, s.Seed)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Pods, err)
	}
	if len(workload) < len(pods) {
		fmt.Fprintf(stderr, "simulate: --inflation %g is below the pod list's own GPU demand; %d of its %d pods were dropped at random, so %d run\n", s.Inflation, len(pods)-len(workload), len(pods), len(workload))
	}
	t := &Trace{Nodes: nodes, Pods: pods, Workload: workload, Catalogue: c}
	var results []sim.Result
	for _, policy := range s.Policies {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		var progress func(done, total int)
		if s.Progress != nil {
			progress = s.Progress(policy)
		}
		res, err := sim.Run(ctx, nodes, workload, c, sim.Config{
			Policy: policy, Seed: s.Seed, Inflation: s.Inflation, Typical: pods, Progress: progress,
		})
		if err != nil {
			return nil, nil, err
		}
		results = append(results, res)
		if each != nil {
			if err := each(res); err != nil {
				return nil, nil, err
			}
		}
	}
	return results, t, nil
}

// Capacity is the nodes' GPU capacity.
func Capacity(nodes []*cluster.Node) gpu.Milli {
	var capacity gpu.Milli
	for _, n := range nodes {
		capacity += gpu.Milli(len(n.GPUs)) * gpu.WholeGPU
	}
	return capacity
}

// LoadTrace reads a node list and a pod list (paths or embedded names) and
// checks that the pods can be placed on the nodes' models (checkModels).
func LoadTrace(nodesName, podsName string, c *gpu.Catalogue, stderr io.Writer) ([]*cluster.Node, []*cluster.Pod, error) {
	nodes, err := loadNodes(nodesName, c)
	if err != nil {
		return nil, nil, err
	}
	pods, err := loadPods(podsName, c)
	if err != nil {
		return nil, nil, err
	}
	if err := checkModels(stderr, nodes, pods, nodesName, podsName); err != nil {
		return nil, nil, err
	}
	return nodes, pods, nil
}

// OpenTrace opens a trace file by path, or an embedded openb file when the
// name starts with "openb:" (e.g. "openb:default").
func OpenTrace(name string) (io.ReadCloser, string, error) {
	if strings.HasPrefix(name, "openb:") {
		return openb.Open(name)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, "", fmt.Errorf("cannot open %s: %w (give a CSV path, or an embedded file such as openb:default; embedded: %s)", name, err, strings.Join(openb.Names(), ", "))
	}
	return f, name, nil
}

func loadNodes(name string, c *gpu.Catalogue) ([]*cluster.Node, error) {
	r, src, err := OpenTrace(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return cluster.LoadTraceNodes(r, src, c)
}

func loadPods(name string, c *gpu.Catalogue) ([]*cluster.Pod, error) {
	r, src, err := OpenTrace(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return cluster.LoadTracePods(r, src, c)
}

// checkModels says which pods ask in gpu_spec only for models that no node
// of the node list has: they can never be placed and count as failed under
// every policy. It warns when some do (a sample of a trace may hold a few)
// and refuses a list where every GPU pod does, which can only be the wrong
// node list.
func checkModels(stderr io.Writer, nodes []*cluster.Node, pods []*cluster.Pod, nodesName, podsName string) error {
	have := map[string]bool{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if g.Model != nil {
				have[g.Model.Name] = true
			}
		}
	}
	var bad []*cluster.Pod
	gpuPods := 0
	for _, p := range pods {
		if !p.WantsGPU() {
			continue
		}
		gpuPods++
		if len(p.GPUModels) == 0 {
			continue
		}
		if !slices.ContainsFunc(p.GPUModels, func(m string) bool { return have[m] }) {
			bad = append(bad, p)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	models := slices.Sorted(maps.Keys(have))
	msg := fmt.Sprintf("%s: %d of its %d GPU pods (the first %s) ask in gpu_spec only for models that no node of %s has (%s; the nodes have %s)",
		podsName, len(bad), gpuPods, bad[0].Name, nodesName, strings.Join(bad[0].GPUModels, "|"), strings.Join(models, ", "))
	if len(bad) == gpuPods {
		return fmt.Errorf("%s; no GPU pod could ever be placed: fix gpu_spec or use the node list the pods were traced on", msg)
	}
	fmt.Fprintf(stderr, "simulate: %s; they can never be placed and count as failed under every policy\n", msg)
	return nil
}

// Replay is a churn experiment over a trace: the pod list replayed on its
// own clock (creation times divided by Speedup), each pod leaving after its
// traced run time; Load, when above 0, adds copies of listed pods until the
// offered GPU load over the arrival window is that multiple of capacity.
//
// Steady, when set, replaces the pod list's own arrivals with a stationary
// churn drawn from it (sim.SteadyChurn: Poisson arrivals of listed pods at
// an offered load below capacity, each with its trace run time), measured
// after its warm-up; Speedup and Load are then unused.
type Replay struct {
	Simulation
	Speedup, Load float64
	Steady        *sim.SteadyChurn
}

// RunReplay replays the trace under every policy, in order. loaded, when
// set, sees how far Load raised the offered load before the first run;
// each, when set, sees each result as soon as it is done.
func RunReplay(ctx context.Context, r Replay, stderr io.Writer, loaded func(sim.LoadInfo), each func(any) error) ([]sim.ReplayResult, error) {
	if err := CheckPolicies(r.Policies); err != nil {
		return nil, err
	}
	c := gpu.Default()
	nodes, pods, err := LoadTrace(r.Nodes, r.Pods, c, stderr)
	if err != nil {
		return nil, err
	}
	f, src, err := OpenTrace(r.Pods)
	if err != nil {
		return nil, err
	}
	lifetimes, err := cluster.LoadTraceLifetimes(f, src)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("--replay: %w", err)
	}
	listed := pods
	speedup, measureFrom := r.Speedup, 0.0
	switch {
	case r.Steady != nil:
		pods, lifetimes, err = r.Steady.Workload(pods, lifetimes, Capacity(nodes))
		if err != nil {
			return nil, fmt.Errorf("--churn: %w", err)
		}
		speedup, measureFrom = 1, r.Steady.WarmupSeconds
	case r.Load > 0:
		var info sim.LoadInfo
		pods, lifetimes, info, err = sim.AddReplayLoad(pods, lifetimes, Capacity(nodes), r.Speedup, r.Load, r.Seed)
		if err != nil {
			return nil, fmt.Errorf("--replay-load: %w", err)
		}
		if loaded != nil {
			loaded(info)
		}
	}
	var results []sim.ReplayResult
	for _, policy := range r.Policies {
		var progress func(done, total int)
		if r.Progress != nil {
			progress = r.Progress(policy)
		}
		res, err := sim.Replay(ctx, nodes, pods, lifetimes, c, sim.ReplayConfig{Policy: policy, Seed: r.Seed, Speedup: speedup, Typical: listed,
			Progress: progress, MeasureFromSeconds: measureFrom})
		if err != nil {
			return nil, err
		}
		if r.Steady != nil {
			// The churn's load is its arrival rate's: the trace's cut at
			// the last arrival would miss the long pods' tails.
			res.OfferedLoad = r.Steady.Load
		}
		results = append(results, res)
		if each != nil {
			if err := each(res); err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}
