package placement

import (
	"testing"

	"github.com/gpupack/gpupack/cluster"
)

// TestDemandKey: pods that differ only in what GPU fitting and scoring do
// not read share a key and get the same FitsGPUs and Score from every
// policy but random on every node where both fit; a change to anything they read changes
// the key.
func TestDemandKey(t *testing.T) {
	base := func() *podBuilder { return makePod("p").cpu(4000).milli(300) }
	same := map[string]*cluster.Pod{
		"other name":      makePod("q").cpu(4000).milli(300).obj(),
		"node selector":   base().selector("zone", "a").obj(),
		"tolerations":     base().tolerate("dedicated").obj(),
		"same namespace":  base().ns("ml").obj(),
		"explicit models": base().obj(),
	}
	differ := map[string]*cluster.Pod{
		"cpu":       makePod("p").cpu(8000).milli(300).obj(),
		"fraction":  base().milli(400).obj(),
		"whole":     base().whole(1).obj(),
		"shared":    base().shared(1).obj(),
		"vram":      base().vram(4096).obj(),
		"mig":       base().mig("1g.10gb").obj(),
		"models":    base().models("T4").obj(),
		"isolation": base().isolation(cluster.ShareTenant).obj(),
		"tenant":    base().ns("other").obj(),
	}
	nodes := []*NodeState{
		place(t, makeNode("t4").gpus("T4", 2, cluster.Fractional, 0).label("zone", "a").obj(), makePod("a").milli(800).obj()),
		place(t, makeNode("t4b").gpus("T4", 4, cluster.Fractional, 0).cpu(16000).obj(), makePod("a").milli(500).ns("other").isolation(cluster.ShareTenant).obj()),
		place(t, makeNode("h100").gpus("H100-80GB", 8, cluster.Exclusive, 0).obj()),
	}
	var demands []*Demand
	for _, p := range []*cluster.Pod{base().obj(), makePod("a").milli(500).obj(), makePod("b").whole(1).obj()} {
		demands = append(demands, demand(t, p))
	}
	var policies []Policy
	for _, name := range Policies() {
		if name == "random" {
			continue
		}
		p, err := New(name, Options{Workload: NewWorkload(demands, 1), MaxNodeCPU: 64000, MaxNodeGPUMilli: 8000})
		if err != nil {
			t.Fatal(err)
		}
		policies = append(policies, p)
	}

	want := demand(t, base().obj())
	for name, p := range same {
		t.Run("same/"+name, func(t *testing.T) {
			d := demand(t, p)
			if d.Key() != want.Key() {
				t.Fatalf("key %+v, want %+v", d.Key(), want.Key())
			}
			for _, s := range nodes {
				if FitsGPUs(d, s) != FitsGPUs(want, s) {
					t.Errorf("%s: FitsGPUs differs", s.Node.Name)
				}
				if !Fits(d, s) || !Fits(want, s) {
					continue // policies score only where Fits holds
				}
				for _, pol := range policies {
					gotScore, gotGPU := pol.Score(d, s)
					wantScore, wantGPU := pol.Score(want, s)
					if gotScore != wantScore || gotGPU != wantGPU {
						t.Errorf("%s on %s: score %v GPU %d, want %v GPU %d", pol.Name(), s.Node.Name, gotScore, gotGPU, wantScore, wantGPU)
					}
				}
			}
		})
	}
	for name, p := range differ {
		t.Run("differ/"+name, func(t *testing.T) {
			if demand(t, p).Key() == want.Key() {
				t.Errorf("key unchanged by %s", name)
			}
		})
	}
}
