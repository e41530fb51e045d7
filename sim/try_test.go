package sim

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
)

func TestTry(t *testing.T) {
	if os.Getenv("TRY") == "" {
		t.Skip()
	}
	c := gpu.Default()
	f, name, _ := openb.Open(openb.Nodes)
	nodes, _ := cluster.LoadTraceNodes(f, name, c)
	var capm gpu.Milli
	for _, n := range nodes {
		capm += gpu.Milli(len(n.GPUs)) * 1000
	}
	for _, trace := range strings.Split(os.Getenv("TRACES"), ",") {
		pf, pname, _ := openb.Open(trace)
		pods, _ := cluster.LoadTracePods(pf, pname, c)
		for seed := uint64(1); seed <= 2; seed++ {
			w, _ := Inflate(pods, capm, 1.3, seed)
			for _, pol := range strings.Split(os.Getenv("POLS"), ",") {
				r, err := Run(nodes, w, c, Config{Policy: pol, Seed: seed, Inflation: 1.3, Typical: pods})
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("%s seed=%d %-8s alloc=%.4f failed=%d frag=%.0f %.2fs\n", trace, seed, pol, r.GPUAllocRatio, r.GPUPodsFailed, r.FragGPUMilli, r.WallSeconds)
			}
		}
	}
}
