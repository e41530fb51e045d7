package sim

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
)

// TestCompare runs the policies named in GPUPACK_COMPARE (comma-separated)
// on the traces of GPUPACK_COMPARE_TRACES (default: the four of the
// README) and seeds 1..GPUPACK_COMPARE_SEEDS (default 10), and prints the
// GPU allocation of each. It is the README's measurement, too slow for the
// test suite; it skips unless GPUPACK_COMPARE is set.
func TestCompare(t *testing.T) {
	policies := os.Getenv("GPUPACK_COMPARE")
	if policies == "" {
		t.Skip("set GPUPACK_COMPARE=policy,policy,... to run")
	}
	traces := []string{"default", "gpushare100", "multigpu50", "gpuspec33"}
	if v := os.Getenv("GPUPACK_COMPARE_TRACES"); v != "" {
		traces = strings.Split(v, ",")
	}
	seeds := 10
	if v := os.Getenv("GPUPACK_COMPARE_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("GPUPACK_COMPARE_SEEDS=%q: want a number of seeds", v)
		}
		seeds = n
	}
	c := gpu.Default()
	nf, src, _ := openb.Open(openb.Nodes)
	nodes, err := cluster.LoadTraceNodes(nf, src, c)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		trace, policy string
		seed          uint64
	}
	var mu sync.Mutex
	got := map[key]float64{}
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, trace := range traces {
		pf, src, err := openb.Open(trace)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := cluster.LoadTracePods(pf, src, c)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			w, err := Inflate(pods, capacityOf(nodes), DefaultInflation, seed)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				r, err := OfflinePack(context.Background(), nodes, w, c, Config{Seed: seed, Typical: pods})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[key{trace, OfflineName, seed}] = r.GPUAllocRatio
				mu.Unlock()
			}()
			for _, p := range strings.Split(policies, ",") {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					r, err := Run(context.Background(), nodes, w, c, Config{Policy: p, Seed: seed, Inflation: DefaultInflation, Typical: pods})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					got[key{trace, p, seed}] = r.GPUAllocRatio
					mu.Unlock()
				}()
			}
		}
	}
	wg.Wait()
	var b strings.Builder
	ps := append(strings.Split(policies, ","), OfflineName)
	for _, trace := range traces {
		fmt.Fprintf(&b, "%-12s seed", trace)
		for _, p := range ps {
			fmt.Fprintf(&b, " %9s", p)
		}
		b.WriteString("\n")
		sums := make([][2]float64, len(ps))
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			fmt.Fprintf(&b, "%-12s %4d", "", seed)
			for i, p := range ps {
				v := got[key{trace, p, seed}]
				sums[i][min(1, int(seed-1)/5)] += v
				fmt.Fprintf(&b, " %8.2f%%", 100*v)
			}
			b.WriteString("\n")
		}
		for half, label := range []string{"mean 1-5", "mean 6-10"} {
			fmt.Fprintf(&b, "%-17s", label)
			for i := range ps {
				n := min(5, max(0, seeds-5*half))
				fmt.Fprintf(&b, " %8.2f%%", 100*sums[i][half]/float64(max(n, 1)))
			}
			b.WriteString("\n")
		}
	}
	t.Log("\n" + b.String())
}
