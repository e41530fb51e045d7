package gpupack

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/placement"
)

// holding is what one GPU of a rebuilt node state shows: which pods hold
// it (each pod of the cases has a namespace of its own, so the tenant names
// the holder) and which MIG slices and replicas are taken.
type holding struct {
	Holders  int
	Tenant   string
	Slices   uint64
	Replicas int
}

func holdings(st *placement.NodeState) []holding {
	out := make([]holding, len(st.GPUs))
	for i, g := range st.GPUs {
		out[i] = holding{Holders: g.Holders, Tenant: g.Tenant, Slices: g.UsedSlices, Replicas: g.UsedReplicas}
	}
	return out
}

// TestPluginAndLoaderAgree rebuilds a node's device state from the same
// pods twice, as diagnose --live does (kube.Build, placement.States) and
// as the plugin does (its NodeInfo, in the reverse order), and requires
// both to be the case's answer: a pod's gpupack.io/gpu-devices record is
// honoured unless it conflicts, and pods without one are placed alike.
func TestPluginAndLoaderAgree(t *testing.T) {
	// The MIG node's layout, as the loader lays it out: find its slices.
	migNode := node(t, "n", h100MIG)
	converted, _ := kube.ConvertNode(migNode, gpu.Default())
	var small []int // the 1g.10gb slices
	for i, sl := range converted.GPUs[0].Layout {
		if sl.Profile == "1g.10gb" {
			small = append(small, i)
		}
	}
	if len(small) != 2 {
		t.Fatalf("MIG layout %v: want two 1g.10gb slices", converted.GPUs[0].Layout)
	}
	slice := func(i int) string { return "0:" + itoa(small[i]) }

	gpuPod := func(ns, devices string) *v1.Pod {
		p := makePod("p").req("nvidia.com/gpu", 1).on("n", devices).obj()
		p.Namespace, p.UID = ns, types.UID("uid-"+ns)
		return p
	}
	migPod := func(ns, devices string) *v1.Pod {
		p := makePod("p").req("nvidia.com/mig-1g.10gb", 1).on("n", devices).obj()
		p.Namespace, p.UID = ns, types.UID("uid-"+ns)
		return p
	}
	cases := map[string]struct {
		node *v1.Node
		pods []*v1.Pod
		want []holding
	}{
		"a recorded GPU is honoured": {
			node: node(t, "n", h100x2),
			pods: []*v1.Pod{gpuPod("a", "1"), gpuPod("b", "")},
			want: []holding{{Holders: 1, Tenant: "b"}, {Holders: 1, Tenant: "a"}},
		},
		"an unrecorded pod listed first does not take a recorded GPU": {
			node: node(t, "n", h100x2),
			pods: []*v1.Pod{gpuPod("a", ""), gpuPod("b", "0")},
			want: []holding{{Holders: 1, Tenant: "b"}, {Holders: 1, Tenant: "a"}},
		},
		"two records of one GPU: the first by key keeps it, the other is moved": {
			node: node(t, "n", h100x2),
			pods: []*v1.Pod{gpuPod("b", "0"), gpuPod("a", "0")},
			want: []holding{{Holders: 1, Tenant: "a"}, {Holders: 1, Tenant: "b"}},
		},
		"a record of a GPU the node lacks is recomputed": {
			node: node(t, "n", h100x2),
			pods: []*v1.Pod{gpuPod("a", "5")},
			want: []holding{{Holders: 1, Tenant: "a"}, {}},
		},
		"a recorded MIG slice is honoured, the other pod gets the other slice": {
			node: migNode,
			pods: []*v1.Pod{migPod("a", ""), migPod("b", slice(0))},
			want: []holding{{Holders: 2, Slices: 1<<small[0] | 1<<small[1]}},
		},
		"a record naming a slice of another profile is recomputed": {
			node: migNode,
			pods: []*v1.Pod{migPod("a", "0:"+itoa(otherSlice(converted.GPUs[0].Layout, "1g.10gb")))},
			want: []holding{{Holders: 1, Tenant: "a", Slices: 1 << small[0]}},
		},
		"an overcommitted time-sliced GPU: the recorded pod, then the others by key until the replicas run out": {
			node: node(t, "n", l4Shared),
			pods: []*v1.Pod{gpuPod("c", ""), gpuPod("b", "0"), gpuPod("a", "")},
			want: []holding{{Holders: 2, Replicas: 2}},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			st, err := kube.Build(gpu.Default(), []*v1.Node{c.node}, c.pods, nil)
			if err != nil {
				t.Fatal(err)
			}
			states, _, err := placement.States(st.Snapshot)
			if err != nil {
				t.Fatal(err)
			}
			loader := holdings(states[0])

			pl, _ := newPlugin(t, []*v1.Node{c.node}, c.pods)
			reversed := slices.Clone(c.pods)
			slices.Reverse(reversed)
			ni := framework.NewNodeInfo(reversed...)
			ni.SetNode(c.node)
			plugin := holdings(pl.buildState(context.Background(), fwk.NodeInfo(ni)))

			if diff := cmp.Diff(c.want, loader); diff != "" {
				t.Errorf("live loader (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(loader, plugin); diff != "" {
				t.Errorf("plugin disagrees with the live loader (-loader +plugin):\n%s", diff)
			}
		})
	}
}

func otherSlice(l gpu.Layout, profile string) int {
	for i, sl := range l {
		if sl.Profile != profile {
			return i
		}
	}
	return -1
}

func itoa(i int) string { return strconv.Itoa(i) }
