package sim

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// PlaceIfFitsCap caps the GPU allocation, at the end of the run, of every
// policy that places each pod that fits somewhere (every policy of this
// simulator does), over one workload: whatever it places where.
//
// The argument (docs/concepts/bounds.md has it in full). Take such a run
// and k, the arrival of its first free share that fails: a pod of one
// share of a GPU that asks for nothing but GPU compute, so that any GPU
// with room for its s milli could take it. Assume, as the cap does, that
// a free share fails only when no GPU has room for it (CPU and memory
// never stop one; Result.FirstFailedShare says per run whether that held).
// Then in that run:
//  1. every free share before k was placed (none failed before k);
//  2. at k no GPU has s milli free, and free capacity only shrinks, so no
//     pod of a whole GPU and no share of s or more is placed after k;
//  3. so the run's final packing holds every free share before k, at most
//     the whole-GPU pods that arrived before k, and beside them at most
//     the other shares before k and the shares after k smaller than s.
//
// The configuration LP of shareTally, with a whole-GPU supply, bounds the
// allocation of every such packing; the largest of those bounds over every
// possible k (and over the run in which no free share fails, every free
// share placed) caps every run. A span of arrivals is bounded at once by
// relaxing its LP (the free shares before its start forced, the shares of
// the span optional, the whole-GPU pods up to its end, the later shares
// below its largest size); a search splits the span of largest bound until
// that span is one arrival, whose exact LP then passes every other span's
// relaxation.
//
// CPU, memory and GPU models are left out of the packing, which only
// raises the cap. The assumption that CPU never stops a share is the one
// that could lower a run's true ceiling below its allocation: a run whose
// first failed free share found a GPU with room is not covered.
type PlaceIfFitsCap struct {
	// Ratio is the cap, GPU allocation over capacity, at most 1.
	Ratio float64 `json:"ratio"`
	// FirstShareFailure is the arrival (1-based, in order) whose free
	// share failing first gives the cap; 0 when it is the run where no
	// free share fails. ArrivedRatio is the GPU demand arrived before
	// it over the capacity. Both are 0 when Exact is false.
	FirstShareFailure int     `json:"first_share_failure"`
	ArrivedRatio      float64 `json:"arrived_ratio"`
	// Exact says the search closed on one arrival; otherwise Ratio is the
	// largest relaxed bound of a span of arrivals (still a cap, looser)
	// after maxCapLPs LPs.
	Exact bool `json:"exact"`
	// LPs is how many LPs the search solved.
	LPs int `json:"lps"`
}

// maxCapLPs bounds the cap's search: openb's seeds close in 60-120 LPs.
const maxCapLPs = 400

// capChunks is how many spans the search starts from.
const capChunks = 32

// freeShare says a demand is a share of one GPU that any GPU with room for
// its compute could take, but for CPU and memory: no model, memory,
// selector, affinity, spread or claim of its own.
func freeShare(d *placement.Demand) bool {
	p := d.Pod
	return d.Devices == 1 && d.GPU.Kind == cluster.Fraction && d.PerGPUMilli < gpu.WholeGPU && d.GPU.Memory == 0 &&
		len(p.GPUModels) == 0 && len(p.NodeSelector) == 0 && len(p.RequiredAffinity) == 0 && len(p.SpreadConstraints) == 0 &&
		len(p.PodAffinity) == 0 && len(p.PodAntiAffinity) == 0 && len(p.Claims) == 0
}

// capSearch is a workload read for the cap.
type capSearch struct {
	ds       []*placement.Demand
	gpus     int
	capacity float64
	// cands are the arrivals (0-based) of free shares, where a run's
	// first failure may be.
	cands []int
	lps   int
}

// capSpan is the candidates cands[a..b] and the bound over them.
type capSpan struct {
	a, b  int
	bound float64
}

// CapPlaceIfFits computes the PlaceIfFitsCap of the workload on the nodes.
// It fails, with no cap, when the nodes have no GPUs or the LP fails.
func CapPlaceIfFits(nodes []*cluster.Node, workload []*cluster.Pod, c *gpu.Catalogue) (PlaceIfFitsCap, error) {
	ds, err := demandsOf(workload, c)
	if err != nil {
		return PlaceIfFitsCap{}, err
	}
	s := &capSearch{ds: ds}
	for _, n := range nodes {
		s.gpus += len(n.GPUs)
	}
	if s.gpus == 0 {
		return PlaceIfFitsCap{}, errors.New("the cluster has no GPUs")
	}
	s.capacity = float64(s.gpus) * float64(gpu.WholeGPU)
	for k, d := range ds {
		if freeShare(d) {
			s.cands = append(s.cands, k)
		}
	}
	return s.search()
}

// search bounds the run with no failure, then the spans of candidates,
// splitting the span of largest bound until it is one candidate.
func (s *capSearch) search() (PlaceIfFitsCap, error) {
	none, err := s.noFailure()
	if err != nil {
		return PlaceIfFitsCap{}, err
	}
	var spans []capSpan
	for i := 0; i < len(s.cands); i += max(1, len(s.cands)/capChunks) {
		spans = append(spans, capSpan{a: i, b: min(len(s.cands), i+max(1, len(s.cands)/capChunks)) - 1})
	}
	for i := range spans {
		if spans[i].bound, err = s.spanBound(spans[i].a, spans[i].b); err != nil {
			return PlaceIfFitsCap{}, err
		}
	}
	for {
		top := -1
		for i, sp := range spans {
			if top < 0 || sp.bound > spans[top].bound {
				top = i
			}
		}
		if top < 0 || spans[top].bound <= none {
			return s.result(none, 0, true), nil
		}
		sp := spans[top]
		if sp.a == sp.b {
			return s.result(sp.bound, s.cands[sp.a]+1, true), nil
		}
		if s.lps >= maxCapLPs {
			return s.result(sp.bound, 0, false), nil
		}
		mid := (sp.a + sp.b) / 2
		left, right := capSpan{a: sp.a, b: mid}, capSpan{a: mid + 1, b: sp.b}
		if left.bound, err = s.spanBound(left.a, left.b); err != nil {
			return PlaceIfFitsCap{}, err
		}
		if right.bound, err = s.spanBound(right.a, right.b); err != nil {
			return PlaceIfFitsCap{}, err
		}
		spans = append(slices.Delete(spans, top, top+1), left, right)
	}
}

func (s *capSearch) result(bound float64, arrival int, exact bool) PlaceIfFitsCap {
	r := PlaceIfFitsCap{Ratio: min(1, bound), FirstShareFailure: arrival, Exact: exact, LPs: s.lps}
	if exact && arrival > 0 {
		for _, d := range s.ds[:arrival-1] {
			r.ArrivedRatio += float64(d.Devices) * float64(d.PerGPUMilli)
		}
		r.ArrivedRatio /= s.capacity
	}
	return r
}

// noFailure bounds the runs in which no free share fails: every free
// share placed, any other share and every whole-GPU pod beside them.
func (s *capSearch) noFailure() (float64, error) {
	return s.bound(len(s.ds), len(s.ds), gpu.WholeGPU)
}

// spanBound bounds the runs whose first free share fails at one of
// cands[a..b]: the free shares before cands[a] forced; every other share
// up to cands[b] optional, and every later one below the span's largest
// size; the whole-GPU pods before cands[b].
func (s *capSearch) spanBound(a, b int) (float64, error) {
	var largest gpu.Milli
	for _, k := range s.cands[a : b+1] {
		largest = max(largest, s.ds[k].PerGPUMilli)
	}
	return s.bound(s.cands[a], s.cands[b], largest)
}

// bound is the LP's bound with the free shares among the first forcedTo
// arrivals forced, every share among the first upTo+1 arrivals and the
// later ones below below allowed, and the whole-GPU pods among the first
// upTo; -Inf when the forced shares fit on no packing of the GPUs (no run
// places them all).
func (s *capSearch) bound(forcedTo, upTo int, below gpu.Milli) (float64, error) {
	forced, allowed := map[gpu.Milli]int64{}, map[gpu.Milli]int64{}
	var whole int64
	for k, d := range s.ds {
		switch {
		case d.Devices == 0:
		case d.PerGPUMilli >= gpu.WholeGPU:
			if k < upTo {
				whole += int64(d.Devices)
			}
		case k <= upTo || d.PerGPUMilli < below:
			allowed[d.PerGPUMilli] += int64(d.Devices)
			if k < forcedTo && freeShare(d) {
				forced[d.PerGPUMilli]++
			}
		}
	}
	s.lps++
	free, err := leastFree(allowed, forced, s.gpus, whole)
	if errors.Is(err, errInfeasible) {
		return math.Inf(-1), nil
	}
	if err != nil {
		return 0, err
	}
	return 1 - float64(free)/s.capacity, nil
}

// BoundsName is the name Bounds go by beside the policies' results.
const BoundsName = "bounds"

// Bounds are what a workload allows beside the policies' runs: the cap on
// every place-if-fits policy (an upper bound) and the hindsight packing (a
// lower estimate of the offline optimum). Each is nil, with its reason,
// when it could not be computed. JSON names are the CLI's output format.
type Bounds struct {
	Kind                string          `json:"kind"` // always BoundsName
	Seed                uint64          `json:"seed"`
	PlaceIfFitsCap      *PlaceIfFitsCap `json:"place_if_fits_cap"`
	PlaceIfFitsCapError string          `json:"place_if_fits_cap_error,omitempty"`
	// Hindsight is a packing found with hindsight: the offline optimum
	// is at least its allocation; an online policy may pass it.
	Hindsight      *HindsightPacking `json:"hindsight_packing"`
	HindsightError string            `json:"hindsight_packing_error,omitempty"`
	WallSeconds    float64           `json:"wall_seconds"`
}

// WorkloadBounds computes the workload's Bounds on the nodes. It fails
// only when ctx is done; a bound that cannot be computed is nil with its
// reason.
func WorkloadBounds(ctx context.Context, nodes []*cluster.Node, workload []*cluster.Pod, c *gpu.Catalogue, seed uint64) (Bounds, error) {
	start := time.Now()
	b := Bounds{Kind: BoundsName, Seed: seed}
	if cp, err := CapPlaceIfFits(nodes, workload, c); err != nil {
		b.PlaceIfFitsCapError = err.Error()
	} else {
		b.PlaceIfFitsCap = &cp
	}
	h, err := HindsightPack(ctx, nodes, workload, c, seed)
	switch {
	case ctx.Err() != nil:
		return b, ctx.Err()
	case err != nil:
		b.HindsightError = err.Error()
	default:
		b.Hindsight = &h
	}
	b.WallSeconds = time.Since(start).Seconds()
	return b, nil
}
