package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// SteadyChurn is a stationary churn workload for Replay: listed pods
// drawn at random (with Seed) arrive as a Poisson process at the rate
// that offers Load times the capacity, each running for its source's
// trace run time, from time 0 until the warm-up and the measured window
// have passed. Below a load of 1 the queue is stable: in the long run the
// cluster has room for what arrives, so the waits measure how well a
// policy packs, not an overload.
type SteadyChurn struct {
	// Load is the offered GPU load over capacity: arrival rate x the mean
	// GPU-time a listed pod asks for (GPUs x run time) / capacity.
	Load float64
	// WarmupSeconds is how long the cluster fills before the measurement
	// starts (ReplayConfig.MeasureFromSeconds); WindowSeconds how long it
	// is measured.
	WarmupSeconds, WindowSeconds float64
	Seed                         uint64
}

// Workload draws the churn's arrivals from the listed pods and their
// lifetimes: copies named "<source>-churn-<n>", each scheduled on arrival.
// It refuses a load outside (0, 1), lifetimes that ask for no GPU-time,
// and more than MaxReplayCopies arrivals.
func (s SteadyChurn) Workload(pods []*cluster.Pod, lifetimes []cluster.TraceLifetime, capacity gpu.Milli) ([]*cluster.Pod, []cluster.TraceLifetime, error) {
	switch {
	case len(pods) == 0 || len(pods) != len(lifetimes):
		return nil, nil, fmt.Errorf("%d pods and %d lifetimes: want one lifetime per pod, and some pods", len(pods), len(lifetimes))
	case math.IsNaN(s.Load) || s.Load <= 0 || s.Load >= 1:
		return nil, nil, fmt.Errorf("load %v: want the offered GPU load as a ratio of capacity in (0, 1), where the queue is stable", s.Load)
	case !(s.WindowSeconds > 0) || s.WarmupSeconds < 0:
		return nil, nil, fmt.Errorf("warm-up %v s, window %v s: want a window above 0 and a warm-up of 0 or more", s.WarmupSeconds, s.WindowSeconds)
	case capacity <= 0:
		return nil, nil, errors.New("the cluster has no GPUs")
	}
	var asked float64 // milli-GPU seconds, all listed pods
	for i, p := range pods {
		asked += float64(p.GPU.GPUMilli()) * float64(max(0, lifetimes[i].RunSeconds()))
	}
	if asked == 0 {
		return nil, nil, errors.New("the listed pods ask for no GPU-time, so no arrival rate loads the cluster")
	}
	rate := s.Load * float64(capacity) / (asked / float64(len(pods))) // arrivals per second
	end := s.WarmupSeconds + s.WindowSeconds
	if n := rate * end; n > MaxReplayCopies {
		return nil, nil, fmt.Errorf("a load of %g over %.0f h takes about %.3g arrivals, more than %d; shorten the window or use fewer nodes", s.Load, end/3600, n, MaxReplayCopies)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x8b2c7f4e1d3a9605))
	var outPods []*cluster.Pod
	var outLife []cluster.TraceLifetime
	for t := rng.ExpFloat64() / rate; t < end; t += rng.ExpFloat64() / rate {
		src := rng.IntN(len(pods))
		at := int64(t)
		cp := *pods[src]
		cp.Name = fmt.Sprintf("%s-churn-%d", pods[src].Name, len(outPods))
		outPods = append(outPods, &cp)
		outLife = append(outLife, cluster.TraceLifetime{CreatedSeconds: at, ScheduledSeconds: at, DeletedSeconds: at + max(0, lifetimes[src].RunSeconds())})
	}
	if len(outPods) < 2 {
		return nil, nil, fmt.Errorf("a load of %g over %.0f s brings %d arrivals; lengthen the window", s.Load, end, len(outPods))
	}
	return outPods, outLife, nil
}
