package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// HindsightName is the name a HindsightPacking goes by beside the
// policies.
const HindsightName = "hindsight"

// HindsightPacking is the best packing of a run's arrivals that a search
// with hindsight finds: a GPU allocation reachable offline, and so a lower
// estimate of the offline optimum. It is not a ceiling on what a policy
// can reach: an online policy may pass it (gpupack does on openb
// gpushare100 and gpuspec33). JSON names are the CLI's output format and
// match Result's.
type HindsightPacking struct {
	Policy            string  `json:"policy"` // always HindsightName
	Seed              uint64  `json:"seed"`
	GPUPodsPlaced     int     `json:"gpu_pods_placed"`
	GPUPodsFailed     int     `json:"gpu_pods_failed"`
	GPUMilliCapacity  int64   `json:"gpu_milli_capacity"`
	GPUMilliAllocated int64   `json:"gpu_milli_allocated"`
	GPUAllocRatio     float64 `json:"gpu_alloc_ratio"`
	WallSeconds       float64 `json:"wall_seconds"`
}

// HindsightPack packs the workload's GPU pods with hindsight, all of them
// known in advance, in three orders, and keeps the best: largest first
// (most GPU, then most CPU: the first-fit-decreasing order of offline bin
// packing), densest first (most GPU per CPU, which wins where CPU runs out
// first, as on gpushare100), and the arrival order itself. Each pod goes
// where fgd scores highest against the distribution of the GPU pods
// themselves (what is still to come is known). CPU-only pods are left out:
// they take no GPU, and leaving them out only makes room. Every packing is
// feasible, so the offline optimum is at least its allocation; it is a
// packing found by search, not a proof that no policy can do better.
// seed is reported.
func HindsightPack(ctx context.Context, nodes []*cluster.Node, workload []*cluster.Pod, c *gpu.Catalogue, seed uint64) (HindsightPacking, error) {
	start := time.Now()
	all, err := demandsOf(workload, c)
	if err != nil {
		return HindsightPacking{}, err
	}
	arrival := slices.DeleteFunc(all, func(d *placement.Demand) bool { return d.Devices == 0 })
	largest := slices.Clone(arrival)
	slices.SortStableFunc(largest, func(a, b *placement.Demand) int {
		return cmp.Or(cmp.Compare(demandMilli(b), demandMilli(a)), cmp.Compare(b.CPU, a.CPU))
	})
	densest := slices.Clone(arrival)
	slices.SortStableFunc(densest, func(a, b *placement.Demand) int {
		da := float64(demandMilli(a)) / float64(max(a.CPU, 1))
		db := float64(demandMilli(b)) / float64(max(b.CPU, 1))
		return cmp.Or(cmp.Compare(db, da), cmp.Compare(demandMilli(b), demandMilli(a)))
	})
	var best HindsightPacking
	for _, order := range [][]*placement.Demand{largest, densest, arrival} {
		res, err := pack(ctx, nodes, order)
		if err != nil {
			return HindsightPacking{}, err
		}
		if res.GPUMilliAllocated >= best.GPUMilliAllocated {
			best = res
		}
	}
	best.Seed = seed
	best.WallSeconds = time.Since(start).Seconds()
	return best, nil
}

// pack places the demands in order on empty nodes.
func pack(ctx context.Context, nodes []*cluster.Node, demands []*placement.Demand) (HindsightPacking, error) {
	res := HindsightPacking{Policy: HindsightName}
	states, maxCPU, maxGPU := newStates(nodes)
	for _, s := range states {
		res.GPUMilliCapacity += int64(s.GPUMilliCapacity())
	}
	if res.GPUMilliCapacity == 0 {
		return res, errors.New("the cluster has no GPUs")
	}
	policy, err := placement.New("fgd", placement.Options{Workload: placement.NewWorkload(demands, placement.TypicalCoverage), MaxNodeCPU: maxCPU, MaxNodeGPUMilli: maxGPU})
	if err != nil {
		return res, err
	}
	ties := Ties{} // the node list's own order: nodes of a kind are filled together
	memo := newScoreMemo(len(states), policy)
	for k, d := range demands {
		if k%64 == 0 {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("the hindsight packing stopped after %d of %d pods: %w", k, len(demands), err)
			}
		}
		n, a := place(d, states, policy, ties, memo)
		if n < 0 {
			res.GPUPodsFailed++
			continue
		}
		res.GPUPodsPlaced++
		for _, dev := range a.Devices {
			res.GPUMilliAllocated += int64(dev.Milli)
		}
	}
	res.GPUAllocRatio = float64(res.GPUMilliAllocated) / float64(res.GPUMilliCapacity)
	return res, nil
}

func demandMilli(d *placement.Demand) gpu.Milli { return gpu.Milli(d.Devices) * d.PerGPUMilli }
