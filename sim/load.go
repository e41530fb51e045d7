package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// MaxReplayCopies bounds how many copies AddReplayLoad makes, so that a
// load the trace cannot reach at that speedup is refused at once instead of
// running for hours.
const MaxReplayCopies = 2_000_000

// LoadInfo is what AddReplayLoad did.
type LoadInfo struct {
	TraceLoad float64 // offered load of the pod list alone
	Load      float64 // offered load with the copies
	Copies    int
}

// OfferedLoad is the GPU load that pods offer over their arrival window, as
// a ratio of capacity: the GPU-time they would hold inside the window on a
// cluster that never made them wait (each from its arrival, creation time
// divided by speedup, for its trace run time, cut at the last arrival),
// over capacity x window. Above 1 some pods must wait whatever the policy.
// It is 0 when every pod arrives at once.
func OfferedLoad(pods []*cluster.Pod, lifetimes []cluster.TraceLifetime, capacity gpu.Milli, speedup float64) float64 {
	if len(pods) == 0 || len(pods) != len(lifetimes) || capacity <= 0 {
		return 0
	}
	t0, t1 := arrivalWindow(lifetimes, speedup)
	if t1 <= t0 {
		return 0
	}
	var held float64
	for i, l := range lifetimes {
		held += offered(pods[i], l, speedup, t1)
	}
	return held / (float64(capacity) * (t1 - t0))
}

// arrivalWindow is the first and last arrival at that speedup.
func arrivalWindow(lifetimes []cluster.TraceLifetime, speedup float64) (t0, t1 float64) {
	lo, hi := lifetimes[0].CreatedSeconds, lifetimes[0].CreatedSeconds
	for _, l := range lifetimes {
		lo, hi = min(lo, l.CreatedSeconds), max(hi, l.CreatedSeconds)
	}
	return float64(lo) / speedup, float64(hi) / speedup
}

// offered is the milli-GPU seconds that one pod holds before t1 if placed
// on arrival.
func offered(p *cluster.Pod, l cluster.TraceLifetime, speedup, t1 float64) float64 {
	a := float64(l.CreatedSeconds) / speedup
	return float64(p.GPU.GPUMilli()) * max(0, min(a+float64(l.RunSeconds()), t1)-a)
}

// AddReplayLoad loads a churn replay beyond what the trace offers, as
// Inflate does for the experiment: it appends copies of random listed pods
// (drawn with seed, CPU-only pods included) until the offered load
// (OfferedLoad at speedup) reaches load, stopping at the copy that reaches
// it. A copy has its source's pod spec (CPU, memory, GPU shape, model
// constraint; name "<source>-copy-<n>") and run time, is scheduled on
// creation, and arrives at its source's creation time moved by a random
// offset within the arrival window (first to last listed creation time),
// wrapped around the window's end: copies arrive uniformly over the same
// window, so the load they add is steady. (Following the trace's own
// arrival rate instead would pile them where the trace's pods are dense:
// openb default creates 99% of its pods in the last 22% of its window.)
// The listed pods keep their times. The same seed gives the same copies.
func AddReplayLoad(pods []*cluster.Pod, lifetimes []cluster.TraceLifetime, capacity gpu.Milli, speedup, load float64, seed uint64) ([]*cluster.Pod, []cluster.TraceLifetime, LoadInfo, error) {
	var info LoadInfo
	switch {
	case len(pods) == 0:
		return nil, nil, info, errors.New("the pod list is empty")
	case len(pods) != len(lifetimes):
		return nil, nil, info, fmt.Errorf("%d pods but %d lifetimes; give one lifetime per pod, in the same order", len(pods), len(lifetimes))
	case math.IsNaN(load) || load <= 0 || load > 100:
		return nil, nil, info, fmt.Errorf("load %v: want the offered GPU load as a multiple of capacity, in (0, 100]", load)
	case math.IsNaN(speedup) || speedup <= 0 || speedup > 1e9:
		return nil, nil, info, fmt.Errorf("speedup %v: want how many times faster than the trace pods arrive, in (0, 1e9]", speedup)
	case capacity <= 0:
		return nil, nil, info, errors.New("the cluster has no GPUs to load")
	}
	t0, t1 := arrivalWindow(lifetimes, speedup)
	if t1 <= t0 {
		return nil, nil, info, errors.New("every pod arrives at the same time, so there is no window to load; use the plain simulation for such a trace")
	}
	target := load * float64(capacity) * (t1 - t0)
	var held float64
	for i, l := range lifetimes {
		held += offered(pods[i], l, speedup, t1)
	}
	info.TraceLoad = held / (float64(capacity) * (t1 - t0))
	if held >= target {
		return nil, nil, info, fmt.Errorf("the pod list alone offers %.3gx capacity at speedup %g, at or above the load %g asked for; ask for more, or leave the load out to replay the list as it is", info.TraceLoad, speedup, load)
	}
	if held == 0 {
		return nil, nil, info, errors.New("the pod list holds no GPU within its arrival window, so copies of it cannot load the cluster; use a pod list with GPU pods")
	}
	if need := (target - held) / (held / float64(len(pods))); need > MaxReplayCopies {
		return nil, nil, info, fmt.Errorf("the pod list offers %.3gx capacity at speedup %g, so a load of %g needs about %.3g copies of its pods, more than %d; raise the speedup (arrivals denser, run times kept) or lower the load", info.TraceLoad, speedup, load, need, MaxReplayCopies)
	}
	lo, hi := lifetimes[0].CreatedSeconds, lifetimes[0].CreatedSeconds
	for _, l := range lifetimes {
		lo, hi = min(lo, l.CreatedSeconds), max(hi, l.CreatedSeconds)
	}
	rng := rand.New(rand.NewPCG(seed, 0xd1342543de82ef95))
	outPods := slices.Clip(pods)
	outLife := slices.Clip(lifetimes)
	for held < target {
		src := rng.IntN(len(pods))
		// The source's creation time moved by a random offset within the
		// window, wrapped around its end: uniform over the window.
		at := lo + (lifetimes[src].CreatedSeconds-lo+rng.Int64N(hi-lo+1))%(hi-lo+1)
		run := lifetimes[src].RunSeconds()
		l := cluster.TraceLifetime{CreatedSeconds: at, ScheduledSeconds: at, DeletedSeconds: at + run}
		cp := *pods[src]
		cp.Name = fmt.Sprintf("%s-copy-%d", pods[src].Name, info.Copies)
		outPods = append(outPods, &cp)
		outLife = append(outLife, l)
		held += offered(&cp, l, speedup, t1)
		info.Copies++
	}
	info.Load = held / (float64(capacity) * (t1 - t0))
	return outPods, outLife, info, nil
}
