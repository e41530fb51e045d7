package placement

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
)

// TestRebuildNode: records are honoured unless they conflict, a rejected
// record is named, and the result does not depend on the pods' order.
func TestRebuildNode(t *testing.T) {
	n := makeNode("x").gpus("H100-80GB", 3, cluster.Exclusive, 0).obj()
	on := func(p *cluster.Pod, gpus ...int) *cluster.Pod {
		p.NodeName = "x"
		for _, g := range gpus {
			p.Devices = append(p.Devices, cluster.Device{GPU: g, Slice: -1})
		}
		return p
	}
	pods := []*cluster.Pod{
		on(makePod("p").ns("d").whole(1).obj()),    // unrecorded
		on(makePod("p").ns("c").whole(1).obj(), 2), // loses GPU 2 to b/p, which sorts first
		on(makePod("p").ns("b").whole(1).obj(), 2),
		on(makePod("p").ns("a").whole(1).obj(), 0),
	}
	want := []string{"a", "c", "b"} // c/p gets the default choice first, before d/p
	reversed := slices.Clone(pods)
	slices.Reverse(reversed)
	for _, order := range [][]*cluster.Pod{pods, reversed} {
		demands := make([]*Demand, len(order))
		for i, p := range order {
			demands[i] = demand(t, p)
		}
		st, misfits := RebuildNode(n, demands)
		var holders []string
		for _, g := range st.GPUs {
			holders = append(holders, g.Tenant)
		}
		if diff := cmp.Diff(want, holders); diff != "" {
			t.Errorf("holders (-want +got):\n%s", diff)
		}
		if len(misfits) != 2 {
			t.Fatalf("misfits %v: want c/p's rejected record and d/p, which fits nowhere", misfits)
		}
		if got := misfits[0].String(); !strings.HasPrefix(got, "pod c/p: its recorded devices (GPU 2) name") {
			t.Errorf("misfit %q does not name c/p's record", got)
		}
		if got := misfits[1].String(); !strings.HasPrefix(got, "pod d/p is bound to x but does not fit there: Insufficient nvidia.com/gpu") {
			t.Errorf("misfit %q does not say d/p does not fit", got)
		}
	}
}

// TestRebuildNodeCordoned: a cordon keeps new pods off a node, not the pods
// bound to it before, so they are placed without a misfit; a pod the node
// cannot hold still gets one.
func TestRebuildNodeCordoned(t *testing.T) {
	n := makeNode("x").gpus("H100-80GB", 2, cluster.Exclusive, 0).cordon().obj()
	bound := func(p *cluster.Pod) *Demand { p.NodeName = "x"; return demand(t, p) }
	st, misfits := RebuildNode(n, []*Demand{bound(makePod("a").whole(1).obj()), bound(makePod("b").obj())})
	if len(misfits) != 0 {
		t.Errorf("misfits %v on a cordoned node whose pods fit it", misfits)
	}
	if st.GPUs[0].Holders != 1 || st.Pods != 2 {
		t.Errorf("state %+v: want GPU 0 held by a/a, and both pods counted", st)
	}
	_, misfits = RebuildNode(n, []*Demand{bound(makePod("big").whole(3).obj())})
	if len(misfits) != 1 || !strings.Contains(misfits[0].String(), "Insufficient nvidia.com/gpu") {
		t.Errorf("misfits %v: want the 3-GPU pod's, in GPU words, not the cordon's", misfits)
	}
}
