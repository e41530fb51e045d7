package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// nodeBuilder makes test nodes fluently.
type nodeBuilder struct{ n cluster.Node }

func makeNode(name string) *nodeBuilder {
	return &nodeBuilder{cluster.Node{Name: name, CPU: 64000, Memory: 512 * 1024, Labels: map[string]string{}}}
}

func (b *nodeBuilder) gpus(model string, count int, sharing cluster.Sharing, replicas int, mig ...string) *nodeBuilder {
	m := gpu.Default().MustLookup(model)
	var layout gpu.Layout
	if sharing == cluster.MIG {
		var err error
		if layout, err = m.MIG.Fit(mig); err != nil {
			panic(err)
		}
	}
	for i := 0; i < count; i++ {
		b.n.GPUs = append(b.n.GPUs, cluster.GPU{Index: len(b.n.GPUs), Model: m, Memory: m.Usable, Sharing: sharing, Replicas: replicas, Layout: layout})
	}
	return b
}

// renamed offers the node's replicas as nvidia.com/gpu.shared.
func (b *nodeBuilder) renamed() *nodeBuilder {
	for i := range b.n.GPUs {
		b.n.GPUs[i].SharedResource = true
	}
	return b
}
func (b *nodeBuilder) label(k, v string) *nodeBuilder { b.n.Labels[k] = v; return b }
func (b *nodeBuilder) taint(k, v string) *nodeBuilder {
	b.n.Taints = append(b.n.Taints, cluster.Taint{Key: k, Value: v, Effect: cluster.NoSchedule})
	return b
}
func (b *nodeBuilder) cpu(c gpu.CPUMilli) *nodeBuilder { b.n.CPU = c; return b }
func (b *nodeBuilder) maxPods(n int) *nodeBuilder      { b.n.MaxPods = &n; return b }
func (b *nodeBuilder) cordon() *nodeBuilder            { b.n.Unschedulable = true; return b }
func (b *nodeBuilder) obj() *cluster.Node              { n := b.n; return &n }

type podBuilder struct{ p cluster.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{cluster.Pod{Namespace: "ml", Name: name, CPU: 1000, Memory: 1024}}
}
func (b *podBuilder) whole(n int) *podBuilder {
	b.p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: n}
	return b
}
func (b *podBuilder) milli(m gpu.Milli) *podBuilder {
	b.p.GPU = cluster.Request{Kind: cluster.Fraction, Milli: m}
	return b
}
func (b *podBuilder) shared(n int) *podBuilder {
	b.p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: n, SharedResource: true}
	return b
}
func (b *podBuilder) vram(m gpu.MiB) *podBuilder { b.p.GPU.Memory = m; return b }
func (b *podBuilder) memOnly(m gpu.MiB) *podBuilder {
	b.p.GPU = cluster.Request{Kind: cluster.GPUMemory, Memory: m}
	return b
}
func (b *podBuilder) mig(p string) *podBuilder {
	b.p.GPU = cluster.Request{Kind: cluster.MIGSlice, Profile: p}
	return b
}
func (b *podBuilder) models(m ...string) *podBuilder { b.p.GPUModels = m; return b }
func (b *podBuilder) selector(k, v string) *podBuilder {
	b.p.NodeSelector = map[string]string{k: v}
	return b
}
func (b *podBuilder) tolerate(k string) *podBuilder {
	b.p.Tolerations = append(b.p.Tolerations, cluster.Toleration{Key: k, Operator: "Exists"})
	return b
}
func (b *podBuilder) cpu(c gpu.CPUMilli) *podBuilder            { b.p.CPU = c; return b }
func (b *podBuilder) isolation(i cluster.Isolation) *podBuilder { b.p.Isolation = i; return b }
func (b *podBuilder) ns(n string) *podBuilder                   { b.p.Namespace = n; return b }
func (b *podBuilder) obj() *cluster.Pod                         { p := b.p; return &p }

func demand(t testing.TB, p *cluster.Pod) *Demand {
	t.Helper()
	d, err := NewDemand(p, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// place assigns pods to a fresh node state with Fit, failing if one does not fit.
func place(t testing.TB, n *cluster.Node, pods ...*cluster.Pod) *NodeState {
	t.Helper()
	s := NewNodeState(n)
	for _, p := range pods {
		d := demand(t, p)
		a, rs := Fit(d, s)
		if len(rs) > 0 {
			t.Fatalf("setup: %s does not fit %s: %v", p.Name, n.Name, rs)
		}
		s.Assign(d, a)
	}
	return s
}

func TestFitReasons(t *testing.T) {
	h100 := makeNode("h100").gpus("H100-80GB", 8, cluster.Exclusive, 0).label("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3").obj()
	a100mig := makeNode("a100").gpus("A100-80GB", 1, cluster.MIG, 0, "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb").obj()
	l4ts := makeNode("l4").gpus("L4", 1, cluster.TimeSliced, 2).obj()
	l4mps := makeNode("l4mps").gpus("L4", 1, cluster.MPS, 4).obj()
	l4shared := makeNode("l4shared").gpus("L4", 2, cluster.TimeSliced, 2).renamed().obj()
	l4shared4 := makeNode("l4shared4").gpus("L4", 2, cluster.TimeSliced, 4).renamed().obj()
	t4frac := makeNode("t4").gpus("T4", 2, cluster.Fractional, 0).obj()
	tainted := makeNode("tainted").gpus("H100-80GB", 8, cluster.Exclusive, 0).taint("dedicated", "infer").obj()
	cpuOnly := makeNode("cpu").obj()
	ignore := cmpopts.IgnoreFields(Reason{}, "Detail")
	// GPUs hold what the driver reports, not the size they are sold by.
	h100Usable, l4Usable := int64(gpu.Default().MustLookup("H100-80GB").Usable), int64(gpu.Default().MustLookup("L4").Usable)

	cases := map[string]struct {
		state *NodeState
		pod   *cluster.Pod
		want  []Reason
		gpus  []int // devices of the assignment when it fits
	}{
		"whole gpus fit": {state: place(t, h100), pod: makePod("p").whole(2).obj(), gpus: []int{0, 1}},
		"too many gpus": {state: place(t, h100), pod: makePod("p").whole(9).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu", Requested: 9, Free: 8, Capacity: 8, Unit: "GPUs", Unresolvable: true}}},
		"all gpus held": {state: place(t, h100, makePod("a").whole(7).obj()), pod: makePod("p").whole(2).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu", Requested: 2, Free: 1, Capacity: 8, Unit: "GPUs"}}},
		"wrong model": {state: place(t, h100), pod: makePod("p").whole(1).models("A100-80GB").obj(), want: []Reason{
			{Code: GPUModelMismatch, Resource: "nvidia.com/gpu", Requested: 1, Capacity: 8, Unresolvable: true,
				Mismatch: &Mismatch{Wanted: []string{"A100-80GB"}, Offered: "H100-80GB"}}}},
		"selector": {state: place(t, h100), pod: makePod("p").whole(1).selector("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB").obj(), want: []Reason{
			{Code: NodeSelectorMismatch, Mismatch: &Mismatch{Key: "nvidia.com/gpu.product", Wanted: []string{"NVIDIA-A100-SXM4-80GB"}, Offered: "NVIDIA-H100-80GB-HBM3", HasKey: true}}}},
		"taint":           {state: place(t, tainted), pod: makePod("p").whole(1).obj(), want: []Reason{{Code: TaintNotTolerated}}},
		"taint tolerated": {state: place(t, tainted), pod: makePod("p").whole(1).tolerate("dedicated").obj(), gpus: []int{0}},
		"cpu and gpu": {state: place(t, h100, makePod("a").whole(8).obj()), pod: makePod("p").whole(1).cpu(100000).obj(), want: []Reason{
			{Code: InsufficientCPU, Resource: "cpu", Requested: 100000, Free: 63000, Capacity: 64000, Unit: "milli-CPU", Unresolvable: true},
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu", Requested: 1, Capacity: 8, Unit: "GPUs"}}},
		"vram too small": {state: place(t, h100), pod: makePod("p").whole(1).vram(100 * 1024).obj(), want: []Reason{
			{Code: InsufficientVRAM, Resource: "gpu-memory", Requested: 102400, Free: h100Usable, Capacity: h100Usable, Unit: "MiB", Unresolvable: true}}},
		"vram within nominal but beyond usable": {state: place(t, l4ts), pod: makePod("p").whole(1).vram(23 * 1024).obj(), want: []Reason{
			{Code: InsufficientVRAM, Resource: "gpu-memory", Requested: 23 * 1024, Free: l4Usable, Capacity: l4Usable, Unit: "MiB", Unresolvable: true}}},
		"no gpus on node": {state: place(t, cpuOnly), pod: makePod("p").whole(1).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu", Requested: 1, Unit: "GPUs", Unresolvable: true}}},
		"fraction on exclusive": {state: place(t, h100), pod: makePod("p").milli(250).obj(), want: []Reason{
			{Code: SharingModeMismatch, Resource: "nvidia.com/gpu", Requested: 1, Capacity: 8}}},
		"mig slice": {state: place(t, a100mig), pod: makePod("p").mig("1g.10gb").obj(), gpus: []int{0}},
		"mig slices taken": {state: place(t, a100mig, makePod("a").mig("1g.10gb").obj(), makePod("b").mig("1g.10gb").obj()), pod: makePod("p").mig("1g.10gb").obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/mig-1g.10gb", Requested: 1, Free: 0, Capacity: 2, Unit: "slices"}}},
		"mig profile not laid out": {state: place(t, a100mig), pod: makePod("p").mig("4g.40gb").obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/mig-4g.40gb", Requested: 1, Capacity: 0, Unit: "slices"}}},
		"mig profile of another model": {state: place(t, a100mig), pod: makePod("p").mig("1g.5gb").obj(), want: []Reason{
			{Code: SharingModeMismatch, Resource: "nvidia.com/mig-1g.5gb", Requested: 1, Unit: "slices", Unresolvable: true}}},
		"whole gpu on mig node": {state: place(t, a100mig), pod: makePod("p").whole(1).obj(), want: []Reason{
			{Code: SharingModeMismatch, Resource: "nvidia.com/gpu", Requested: 1, Capacity: 1}}},
		"time slice replica": {state: place(t, l4ts, makePod("a").whole(1).obj()), pod: makePod("p").whole(1).obj(), gpus: []int{0}},
		"time slices used up": {state: place(t, l4ts, makePod("a").whole(1).obj(), makePod("b").whole(1).obj()), pod: makePod("p").whole(1).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu", Requested: 1, Free: 0, Capacity: 2, Unit: "replicas"}}},
		"time slice free but vram full": {state: place(t, l4ts, makePod("a").whole(1).vram(20*1024).obj()), pod: makePod("p").whole(1).vram(8 * 1024).obj(), want: []Reason{
			{Code: InsufficientVRAM, Resource: "gpu-memory", Requested: 8192, Free: l4Usable - 20*1024, Capacity: l4Usable, Unit: "MiB"}}},
		"mps client limit": {state: place(t, l4mps), pod: makePod("p").whole(1).vram(8 * 1024).obj(), want: []Reason{
			{Code: InsufficientVRAM, Resource: "gpu-memory", Requested: 8192, Free: l4Usable, Capacity: l4Usable / 4, Unit: "MiB"}}},
		"shared replica":                   {state: place(t, l4shared, makePod("a").shared(1).obj()), pod: makePod("p").shared(1).obj(), gpus: []int{0}},
		"shared replicas on distinct gpus": {state: place(t, l4shared), pod: makePod("p").shared(2).obj(), gpus: []int{0, 1}},
		// The device plugin may give one container several replicas of one
		// GPU: 3 replicas on 2 GPUs x 4 fit while 3 are free, and when
		// only one is free the node could take the pod once two free.
		"shared replicas of one gpu": {state: place(t, l4shared4, makePod("a").shared(4).obj(), makePod("b").shared(1).obj()), pod: makePod("p").shared(3).obj(), gpus: []int{1, 1, 1}},
		"shared replicas held": {state: place(t, l4shared4, makePod("a").shared(4).obj(), makePod("b").shared(3).obj()), pod: makePod("p").shared(3).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu.shared", Requested: 3, Free: 1, Capacity: 8, Unit: "replicas"}}},
		"more shared replicas than the node offers": {state: place(t, l4shared4), pod: makePod("p").shared(9).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu.shared", Requested: 9, Free: 8, Capacity: 8, Unit: "replicas", Unresolvable: true}}},
		"node pod limit": {state: place(t, makeNode("full").gpus("H100-80GB", 8, cluster.Exclusive, 0).maxPods(2).obj(), makePod("a").obj(), makePod("b").obj()), pod: makePod("p").whole(1).obj(), want: []Reason{
			{Code: TooManyPods, Resource: "pods", Requested: 1, Free: 0, Capacity: 2, Unit: "pods"}}},
		"below the node pod limit": {state: place(t, makeNode("roomy").gpus("H100-80GB", 1, cluster.Exclusive, 0).maxPods(2).obj(), makePod("a").obj()), pod: makePod("p").whole(1).obj(), gpus: []int{0}},
		"cordoned": {state: place(t, makeNode("cordoned").gpus("H100-80GB", 1, cluster.Exclusive, 0).cordon().obj()), pod: makePod("p").whole(1).obj(), want: []Reason{
			{Code: NodeUnschedulable}}},
		"cordon tolerated": {state: place(t, makeNode("cordoned").gpus("H100-80GB", 1, cluster.Exclusive, 0).cordon().obj()), pod: makePod("p").whole(1).tolerate("node.kubernetes.io/unschedulable").obj(), gpus: []int{0}},
		"shared replicas used up": {state: place(t, l4shared, makePod("a").shared(2).obj(), makePod("b").shared(2).obj()), pod: makePod("p").shared(1).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu.shared", Requested: 1, Free: 0, Capacity: 4, Unit: "replicas"}}},
		"shared replica vram": {state: place(t, l4shared, makePod("a").shared(1).vram(16*1024).obj(), makePod("b").shared(1).vram(16*1024).obj()), pod: makePod("p").shared(1).vram(10 * 1024).obj(), want: []Reason{
			{Code: InsufficientVRAM, Resource: "gpu-memory", Requested: 10240, Free: l4Usable - 16*1024, Capacity: l4Usable, Unit: "MiB"}}},
		"whole gpu on renamed shared gpus": {state: place(t, l4shared), pod: makePod("p").whole(1).obj(), want: []Reason{
			{Code: SharingModeMismatch, Resource: "nvidia.com/gpu", Requested: 1, Capacity: 2}}},
		"shared request on exclusive gpus": {state: place(t, h100), pod: makePod("p").shared(1).obj(), want: []Reason{
			{Code: SharingModeMismatch, Resource: "nvidia.com/gpu.shared", Requested: 1, Capacity: 8}}},
		"shared request on time slices not renamed": {state: place(t, l4ts), pod: makePod("p").shared(1).obj(), want: []Reason{
			{Code: SharingModeMismatch, Resource: "nvidia.com/gpu.shared", Requested: 1, Capacity: 1}}},
		"fraction best fit": {state: place(t, t4frac, makePod("a").milli(500).obj()), pod: makePod("p").milli(400).obj(), gpus: []int{0}},
		"fraction too big": {state: place(t, t4frac, makePod("a").milli(700).obj(), makePod("b").milli(700).obj()), pod: makePod("p").milli(400).obj(), want: []Reason{
			{Code: InsufficientGPU, Resource: "nvidia.com/gpu", Requested: 400, Free: 300, Capacity: 1000, Unit: "milli-GPU"}}},
		"memory request on fractional": {state: place(t, t4frac, makePod("a").milli(500).obj()), pod: makePod("p").memOnly(12 * 1024).obj(), gpus: []int{1}},
		"isolation none refuses shared gpu": {state: place(t, makeNode("t4one").gpus("T4", 1, cluster.Fractional, 0).obj(), makePod("a").milli(300).obj()),
			pod: makePod("p").milli(300).isolation(cluster.ShareNone).obj(), want: []Reason{
				{Code: IsolationConflict, Resource: "nvidia.com/gpu", Requested: 1, Capacity: 1, Unit: "milli-GPU"}}},
		"tenant isolation": {state: place(t, makeNode("t4one").gpus("T4", 1, cluster.Fractional, 0).obj(), makePod("a").milli(300).isolation(cluster.ShareTenant).obj()),
			pod: makePod("p").milli(300).ns("other").obj(), want: []Reason{
				{Code: IsolationConflict, Resource: "nvidia.com/gpu", Requested: 1, Capacity: 1, Unit: "milli-GPU"}}},
		"same tenant shares": {state: place(t, makeNode("t4one").gpus("T4", 1, cluster.Fractional, 0).obj(), makePod("a").milli(300).isolation(cluster.ShareTenant).obj()),
			pod: makePod("p").milli(300).obj(), gpus: []int{0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := demand(t, tc.pod)
			a, got := Fit(d, tc.state)
			if diff := cmp.Diff(tc.want, got, ignore); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if Fits(d, tc.state) != (len(tc.want) == 0) {
				t.Errorf("Fits disagrees with Fit")
			}
			if len(nodeReasons(d, tc.state)) == 0 && FitsGPUs(d, tc.state) != (len(tc.want) == 0) {
				t.Errorf("FitsGPUs disagrees with Fit on a node that passes the node-level checks")
			}
			if len(tc.want) == 0 {
				var gpus []int
				for _, dev := range a.Devices {
					gpus = append(gpus, dev.GPU)
				}
				if diff := cmp.Diff(tc.gpus, gpus); diff != "" {
					t.Errorf("assigned GPUs (-want +got):\n%s", diff)
				}
			}
			for _, r := range got {
				if r.Message() == "" || r.String() == "" {
					t.Errorf("reason %v has no words", r.Code)
				}
			}
		})
	}
}

func TestSummary(t *testing.T) {
	got := Summary(4, [][]Reason{
		{{Code: InsufficientGPU, Resource: "nvidia.com/gpu"}},
		{{Code: InsufficientGPU, Resource: "nvidia.com/gpu"}, {Code: InsufficientCPU, Resource: "cpu"}},
		{{Code: TaintNotTolerated, Detail: "gpu: reserved"}},
		nil,
	})
	want := "1/4 nodes are available: 2 Insufficient nvidia.com/gpu, 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: reserved}."
	if got != want {
		t.Errorf("Summary =\n %s\nwant\n %s", got, want)
	}
}

// TestAssignNeverOvercommits fills nodes of every sharing mode with Fit and
// Assign until nothing fits, then checks each device against its capacity.
func TestAssignNeverOvercommits(t *testing.T) {
	nodes := []*cluster.Node{
		makeNode("frac").gpus("T4", 4, cluster.Fractional, 0).obj(),
		makeNode("ts").gpus("L4", 2, cluster.TimeSliced, 3).obj(),
		makeNode("renamed").gpus("L4", 2, cluster.MPS, 3).renamed().obj(),
		makeNode("mps").gpus("L4", 2, cluster.MPS, 4).obj(),
		makeNode("mig").gpus("H100-80GB", 2, cluster.MIG, 0, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb").obj(),
		makeNode("excl").gpus("H100-80GB", 4, cluster.Exclusive, 0).obj(),
	}
	pods := []*cluster.Pod{
		makePod("a").milli(300).obj(), makePod("b").whole(1).obj(), makePod("c").mig("1g.10gb").obj(),
		makePod("d").memOnly(3000).obj(), makePod("e").whole(2).obj(), makePod("f").mig("3g.40gb").obj(),
		makePod("g").shared(1).obj(),
	}
	for _, n := range nodes {
		s := NewNodeState(n)
		s.Node.CPU, s.FreeCPU = 1<<40, 1<<40
		s.FreeMemory = 1 << 40
		for round := 0; round < 100; round++ {
			for _, p := range pods {
				d := demand(t, p)
				if a, rs := Fit(d, s); len(rs) == 0 {
					s.Assign(d, a)
				}
			}
		}
		for i, g := range s.GPUs {
			spec := n.GPUs[i]
			if g.FreeMilli < 0 {
				t.Errorf("%s gpu %d: compute overcommitted (%d free)", n.Name, i, g.FreeMilli)
			}
			if g.FreeMemory < 0 {
				t.Errorf("%s gpu %d: memory overcommitted (%d free)", n.Name, i, g.FreeMemory)
			}
			if (spec.Sharing == cluster.TimeSliced || spec.Sharing == cluster.MPS) && g.UsedReplicas > spec.Replicas {
				t.Errorf("%s gpu %d: %d replicas used of %d", n.Name, i, g.UsedReplicas, spec.Replicas)
			}
			if spec.Sharing == cluster.Exclusive && g.Holders > 1 {
				t.Errorf("%s gpu %d: %d holders on an exclusive GPU", n.Name, i, g.Holders)
			}
			if g.Holders == 0 {
				t.Errorf("%s gpu %d: never used; the filler is broken", n.Name, i)
			}
		}
	}
}
