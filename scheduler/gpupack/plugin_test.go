package gpupack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	k8stesting "k8s.io/client-go/testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

func TestArgs(t *testing.T) {
	cases := map[string]struct {
		raw     string
		want    Args
		wantErr string
	}{
		"defaults":          {raw: ``, want: Args{Policy: "gpupack", WorkloadPods: defaultWorkloadPods}},
		"fgd":               {raw: `{"policy":"fgd","workloadPods":100}`, want: Args{Policy: "fgd", WorkloadPods: 100}},
		"unknown policy":    {raw: `{"policy":"tetris"}`, wantErr: `policy: unknown policy "tetris"`},
		"negative window":   {raw: `{"workloadPods":-3}`, wantErr: "workloadPods: -3"},
		"unknown field":     {raw: `{"polcy":"fgd"}`, wantErr: `unknown field "polcy"`},
		"wrong type":        {raw: `{"workloadPods":"many"}`, wantErr: "workloadPods"},
		"not an object arg": {raw: `[1]`, wantErr: "GPUPack args"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := decodeArgs(&runtime.Unknown{Raw: []byte(c.raw), ContentType: runtime.ContentTypeJSON})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCatalogueArg(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogue.yaml")
	if err := os.WriteFile(path, []byte("models: [{name: B300, product: NVIDIA B300 SXM6 AC, aliases: [NVIDIA-B300-SXM6-AC], usableMiB: 275040, pricePerHour: 7}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadCatalogue(Args{Catalogue: path})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Lookup("NVIDIA-B300-SXM6-AC"); !ok || m.Unlisted || !m.Priced {
		t.Errorf("B300 from the catalogue file = %+v, %v", m, ok)
	}
	if err := os.WriteFile(path, []byte("models: [{name: B300, usableMiB: -1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCatalogue(Args{Catalogue: path}); err == nil || !strings.Contains(err.Error(), "catalogue: "+path+":1: models[0].usableMiB") {
		t.Errorf("bad catalogue file: err = %v", err)
	}
}

// podBuilder makes test pods fluently, in the style of the scheduler's
// st.MakePod.
type podBuilder struct{ p v1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}}}}}
}
func (b *podBuilder) req(name string, n int64) *podBuilder {
	b.p.Spec.Containers[0].Resources.Requests[v1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
	return b
}
func (b *podBuilder) on(node, devices string) *podBuilder {
	b.p.Spec.NodeName = node
	if devices != "" {
		if b.p.Annotations == nil {
			b.p.Annotations = map[string]string{}
		}
		b.p.Annotations[wellknown.AnnotationGPUDevices] = devices
	}
	return b
}
func (b *podBuilder) vram(q string) *podBuilder {
	if b.p.Annotations == nil {
		b.p.Annotations = map[string]string{}
	}
	b.p.Annotations[wellknown.AnnotationGPUMemory] = q
	return b
}
func (b *podBuilder) obj() *v1.Pod { p := b.p; return &p }

func node(t *testing.T, name string, spec testcluster.GPUNode) *v1.Node {
	t.Helper()
	n, err := spec.Object(name)
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Allocatable = n.Status.Capacity
	return n
}

var (
	h100x2  = testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 2}
	h100MIG = testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 1,
		MIG: map[string]int64{"3g.40gb": 1, "1g.10gb": 2}, MIGConfig: "custom"}
	l4Shared = testcluster.GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 1, Sharing: testcluster.SharingTimeSlicing, Replicas: 2}
	// l4Renamed offers its time slices as nvidia.com/gpu.shared.
	l4Renamed = testcluster.GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 2, Sharing: testcluster.SharingTimeSlicing, Replicas: 4, RenameByDefault: true}
)

// newPlugin returns the plugin over a snapshot of the given objects, with
// a fake clientset holding the pods.
func newPlugin(t *testing.T, nodes []*v1.Node, pods []*v1.Pod, pending ...*v1.Pod) (*Plugin, *fake.Clientset) {
	t.Helper()
	ctx := context.Background()
	var objs []runtime.Object
	for _, p := range append(pods, pending...) {
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	fh, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "gpupack", frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(pods, nodes)), frameworkruntime.WithClientSet(client))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(ctx, nil, fh)
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*Plugin), client
}

// schedule runs the plugin's cycle for pod over every node of the snapshot,
// as the framework would: PreFilter, Filter, Score on the feasible nodes,
// Reserve and Bind on the best. It returns the node and the devices
// written on the Binding, or the per-node Filter messages.
func schedule(t *testing.T, pl *Plugin, client *fake.Clientset, pod *v1.Pod) (string, string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	infos, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	if _, st := pl.PreFilter(ctx, cs, pod, infos); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	failures := map[string]string{}
	var scores fwk.NodeScoreList
	for _, ni := range infos {
		if st := pl.Filter(ctx, cs, pod, ni); !st.IsSuccess() {
			failures[ni.Node().Name] = strings.Join(st.Reasons(), "; ")
			continue
		}
		s, st := pl.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score: %v", st)
		}
		scores = append(scores, fwk.NodeScore{Name: ni.Node().Name, Score: s})
	}
	if len(scores) == 0 {
		return "", "", failures
	}
	if st := pl.NormalizeScore(ctx, cs, pod, scores); !st.IsSuccess() {
		t.Fatal(st)
	}
	best := scores[0]
	for _, s := range scores {
		if s.Score < fwk.MinScore || s.Score > fwk.MaxScore {
			t.Errorf("normalised score %d of %s is outside 0..100", s.Score, s.Name)
		}
		if s.Score > best.Score {
			best = s
		}
	}
	if st := pl.Reserve(ctx, cs, pod, best.Name); !st.IsSuccess() {
		t.Fatalf("Reserve: %v", st)
	}
	client.ClearActions()
	st := pl.Bind(ctx, cs, pod, best.Name)
	if st.IsSkip() {
		return best.Name, "", failures
	}
	if !st.IsSuccess() {
		t.Fatalf("Bind: %v", st)
	}
	for _, a := range client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "binding" {
			b := c.GetObject().(*v1.Binding)
			if b.Target.Name != best.Name {
				t.Errorf("bound to %s, want %s", b.Target.Name, best.Name)
			}
			return best.Name, b.Annotations[wellknown.AnnotationGPUDevices], failures
		}
	}
	t.Fatalf("Bind made no binding: %v", client.Actions())
	return "", "", nil
}

func TestPlugin(t *testing.T) {
	cases := map[string]struct {
		nodes       []*v1.Node
		held        []*v1.Pod
		pod         *v1.Pod
		wantNode    string
		wantDevices string
		wantFailure map[string]string
	}{
		"whole GPU next to a recorded one": {
			nodes:    []*v1.Node{node(t, "a", h100x2)},
			held:     []*v1.Pod{makePod("old").req("nvidia.com/gpu", 1).on("a", "0").obj()},
			pod:      makePod("new").req("nvidia.com/gpu", 1).obj(),
			wantNode: "a", wantDevices: "1",
		},
		"the recorded GPU is the one taken, not the default choice": {
			nodes:    []*v1.Node{node(t, "a", h100x2)},
			held:     []*v1.Pod{makePod("old").req("nvidia.com/gpu", 1).on("a", "1").obj()},
			pod:      makePod("new").req("nvidia.com/gpu", 1).obj(),
			wantNode: "a", wantDevices: "0",
		},
		"hand-edited annotations that collide are recomputed": {
			nodes: []*v1.Node{node(t, "a", h100x2)},
			held: []*v1.Pod{
				makePod("x").req("nvidia.com/gpu", 1).on("a", "0").obj(),
				makePod("y").req("nvidia.com/gpu", 1).on("a", "0").obj(),
			},
			pod:         makePod("new").req("nvidia.com/gpu", 1).obj(),
			wantFailure: map[string]string{"a": "Insufficient nvidia.com/gpu"},
		},
		"a free 1g.10gb MIG slice": {
			nodes:    []*v1.Node{node(t, "mig", h100MIG), node(t, "a", h100x2)},
			held:     []*v1.Pod{makePod("old").req("nvidia.com/mig-1g.10gb", 1).on("mig", "0:1").obj()},
			pod:      makePod("new").req("nvidia.com/mig-1g.10gb", 1).obj(),
			wantNode: "mig", wantDevices: "0:2",
			wantFailure: map[string]string{"a": "node(s) didn't offer nvidia.com/mig-1g.10gb"},
		},
		"a time slice, packed beside its sibling": {
			nodes:    []*v1.Node{node(t, "l4-1", l4Shared), node(t, "l4-2", l4Shared)},
			held:     []*v1.Pod{makePod("old").req("nvidia.com/gpu", 1).on("l4-2", "0").obj()},
			pod:      makePod("new").req("nvidia.com/gpu", 1).obj(),
			wantNode: "l4-2", wantDevices: "0",
		},
		"a renamed time slice goes where its VRAM fits": {
			nodes: []*v1.Node{node(t, "l4", l4Renamed)},
			held: []*v1.Pod{
				makePod("big").req("nvidia.com/gpu.shared", 1).vram("16Gi").on("l4", "0").obj(),
				makePod("small").req("nvidia.com/gpu.shared", 1).vram("4Gi").on("l4", "1").obj(),
			},
			pod:      makePod("new").req("nvidia.com/gpu.shared", 1).vram("12Gi").obj(),
			wantNode: "l4", wantDevices: "1",
		},
		"renamed time slices whose VRAM is taken": {
			nodes: []*v1.Node{node(t, "l4", l4Renamed)},
			held: []*v1.Pod{
				makePod("x").req("nvidia.com/gpu.shared", 1).vram("16Gi").on("l4", "0").obj(),
				makePod("y").req("nvidia.com/gpu.shared", 1).vram("16Gi").on("l4", "1").obj(),
			},
			pod:         makePod("new").req("nvidia.com/gpu.shared", 1).vram("12Gi").obj(),
			wantFailure: map[string]string{"l4": "Insufficient GPU memory"},
		},
		"a whole GPU does not take a renamed time slice": {
			nodes:       []*v1.Node{node(t, "l4", l4Renamed)},
			pod:         makePod("new").req("nvidia.com/gpu", 1).obj(),
			wantFailure: map[string]string{"l4": "node(s) didn't offer nvidia.com/gpu"},
		},
		"a GPU the catalogue does not list counts by its node's labels": {
			nodes:    []*v1.Node{node(t, "b300", testcluster.GPUNode{Product: "NVIDIA-B300-SXM6-AC", MemoryMiB: 275040, GPUs: 2})},
			held:     []*v1.Pod{makePod("old").req("nvidia.com/gpu", 1).on("b300", "0").obj()},
			pod:      makePod("new").req("nvidia.com/gpu", 1).obj(),
			wantNode: "b300", wantDevices: "1",
		},
		"two GPUs do not fit one free": {
			nodes:       []*v1.Node{node(t, "a", h100x2)},
			held:        []*v1.Pod{makePod("old").req("nvidia.com/gpu", 1).on("a", "0").obj()},
			pod:         makePod("new").req("nvidia.com/gpu", 2).obj(),
			wantFailure: map[string]string{"a": "Insufficient nvidia.com/gpu"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			pl, client := newPlugin(t, c.nodes, c.held, c.pod)
			gotNode, gotDevices, failures := schedule(t, pl, client, c.pod)
			if gotNode != c.wantNode || gotDevices != c.wantDevices {
				t.Errorf("placed on %q devices %q, want %q devices %q (failures %v)", gotNode, gotDevices, c.wantNode, c.wantDevices, failures)
			}
			if c.wantFailure == nil {
				c.wantFailure = map[string]string{}
			}
			if diff := cmp.Diff(c.wantFailure, failures); diff != "" {
				t.Errorf("Filter failures (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReserveUntilAnnotated checks that a reserved share is not given twice
// while the pod is assumed on the node but not yet annotated, and that
// Unreserve gives it back.
func TestReserveUntilAnnotated(t *testing.T) {
	n := node(t, "a", h100x2)
	first := makePod("first").req("nvidia.com/gpu", 1).obj()
	pl, _ := newPlugin(t, []*v1.Node{n}, nil, first)
	ctx := context.Background()
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, first, nil); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := pl.Reserve(ctx, cs, first, "a"); !st.IsSuccess() {
		t.Fatal(st)
	}
	reserved := wellknown.FormatDevices(pl.reserved[first.UID].devices)

	// The framework now shows the pod assumed on the node, without the
	// annotation: a second pod must get the other GPU, a third none.
	assumed := first.DeepCopy()
	assumed.Spec.NodeName = "a"
	ni := framework.NewNodeInfo(assumed)
	ni.SetNode(n)
	st := pl.nodeState(ctx, ni).state
	taken := 0
	for _, g := range st.GPUs {
		if !g.Idle() {
			taken++
		}
	}
	if taken != 1 || reserved == "" {
		t.Fatalf("reserved %q: %d GPUs taken on the assumed node, want 1", reserved, taken)
	}
	pl.Unreserve(ctx, cs, first, "a")
	if _, ok := pl.reserved[first.UID]; ok {
		t.Error("Unreserve kept the reservation")
	}
}

func TestPostFilterExplains(t *testing.T) {
	n := node(t, "a", h100x2)
	held := []*v1.Pod{
		makePod("x").req("nvidia.com/gpu", 1).on("a", "0").obj(),
		makePod("y").req("nvidia.com/gpu", 1).on("a", "1").obj(),
	}
	pod := makePod("new").req("nvidia.com/gpu", 1).obj()
	pl, _ := newPlugin(t, []*v1.Node{n}, held, pod)
	ctx := context.Background()
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
		t.Fatal(st)
	}
	_, st := pl.PostFilter(ctx, cs, pod, nil)
	want := "gpupack: new needs 1 GPU; 0/1 nodes are available: 1 Insufficient nvidia.com/gpu. Closest: Insufficient nvidia.com/gpu (requested 1, free 0, capacity 2 GPUs)."
	if st.Code() != fwk.Unschedulable || st.Message() != want {
		t.Errorf("PostFilter = %v %q, want Unschedulable %q", st.Code(), st.Message(), want)
	}
}

// TestMemoFollowsDemand: what Filter and Score remember on a node is for
// one demand key; pods of another shape get their own answer, and pods of
// the same shape the same one.
func TestMemoFollowsDemand(t *testing.T) {
	n := node(t, "a", h100x2)
	held := []*v1.Pod{makePod("x").req("nvidia.com/gpu", 1).on("a", "0").obj()}
	one, two, again := makePod("one").req("nvidia.com/gpu", 1).obj(), makePod("two").req("nvidia.com/gpu", 2).obj(), makePod("again").req("nvidia.com/gpu", 1).obj()
	pl, _ := newPlugin(t, []*v1.Node{n}, held, one, two, again)
	ctx := context.Background()
	ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pod  *v1.Pod
		fits bool
	}{{one, true}, {two, false}, {again, true}, {two, false}} {
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, cs, c.pod, nil); !st.IsSuccess() {
			t.Fatal(st)
		}
		if st := pl.Filter(ctx, cs, c.pod, ni); st.IsSuccess() != c.fits {
			t.Errorf("%s: Filter = %v, want fits %v", c.pod.Name, st, c.fits)
		}
		if c.fits {
			if _, st := pl.Score(ctx, cs, c.pod, ni); !st.IsSuccess() {
				t.Errorf("%s: Score = %v", c.pod.Name, st)
			}
		}
	}
	if e := pl.nodeState(ctx, ni); !e.memo.fitsKnown || e.memo.fits {
		t.Errorf("memo after the last pod = %+v, want the two-GPU pod's answer (no fit)", e.memo)
	}
}

// BenchmarkFilterScore is Filter and Score of one pod on one 8-GPU node:
// "unchanged node" is the common case, a node evaluated again for a pod of
// the shape it last answered for; "other shape" alternates two shapes, so
// that every call computes.
func BenchmarkFilterScore(b *testing.B) {
	for _, bc := range []struct {
		name   string
		shapes []int64
	}{{"unchanged node", []int64{1}}, {"other shape", []int64{1, 2}}} {
		b.Run(bc.name, func(b *testing.B) {
			t := &testing.T{}
			n := node(t, "a", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 8})
			held := []*v1.Pod{makePod("x").req("nvidia.com/gpu", 1).on("a", "0").obj(), makePod("y").req("nvidia.com/gpu", 2).on("a", "3,4").obj()}
			var pods []*v1.Pod
			var states []fwk.CycleState
			for i, gpus := range bc.shapes {
				pods = append(pods, makePod(fmt.Sprintf("new-%d", i)).req("nvidia.com/gpu", gpus).obj())
			}
			pl, _ := newPlugin(t, []*v1.Node{n}, held, pods...)
			ctx := context.Background()
			for _, pod := range pods {
				cs := framework.NewCycleState()
				pl.PreFilter(ctx, cs, pod, nil)
				states = append(states, cs)
			}
			ni, _ := pl.handle.SnapshotSharedLister().NodeInfos().Get("a")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := i % len(pods)
				i++
				if st := pl.Filter(ctx, states[k], pods[k], ni); !st.IsSuccess() {
					b.Fatal(st)
				}
				pl.Score(ctx, states[k], pods[k], ni)
			}
		})
	}
}
