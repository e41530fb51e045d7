package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// nodeBuilder makes Nodes as the device plugin and GPU feature discovery
// would leave them.
type nodeBuilder struct{ n *corev1.Node }

func makeNode(name string) nodeBuilder {
	return nodeBuilder{&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		}},
	}}
}

func (b nodeBuilder) alloc(name corev1.ResourceName, q string) nodeBuilder {
	b.n.Status.Allocatable[name] = resource.MustParse(q)
	return b
}

func (b nodeBuilder) label(k, v string) nodeBuilder { b.n.Labels[k] = v; return b }

func (b nodeBuilder) taint(k, v string, e corev1.TaintEffect) nodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: e})
	return b
}

func (b nodeBuilder) obj() *corev1.Node { return b.n }

// gfd labels a node as GPU feature discovery does.
func (b nodeBuilder) gfd(product, memoryMiB, count string) nodeBuilder {
	return b.label(LabelGPUProduct, product).label(LabelGPUMemory, memoryMiB).label(LabelGPUCount, count)
}

func TestBuildNodeGPUs(t *testing.T) {
	c := gpu.Default()
	h100, a100, l4 := c.MustLookup("H100-80GB"), c.MustLookup("A100-40GB"), c.MustLookup("L4")
	layout := func(profiles ...string) gpu.Layout {
		l, err := h100.MIG.Fit(profiles)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	repeat := func(g cluster.GPU, n int) []cluster.GPU {
		out := make([]cluster.GPU, n)
		for i := range out {
			out[i] = g
			out[i].Index = i
		}
		return out
	}
	cases := map[string]struct {
		node         *corev1.Node
		want         []cluster.GPU
		wantWarnings []string // substrings, one per warning
	}{
		"8 whole H100s, memory from the label": {
			node: makeNode("h").gfd("NVIDIA-H100-80GB-HBM3", "81559", "8").alloc(ResourceGPU, "8").obj(),
			want: repeat(cluster.GPU{Model: h100, Memory: 81559}, 8),
		},
		"allocatable below the label count (an unhealthy GPU)": {
			node: makeNode("h").gfd("NVIDIA-H100-80GB-HBM3", "81559", "8").alloc(ResourceGPU, "7").obj(),
			want: repeat(cluster.GPU{Model: h100, Memory: 81559}, 7),
		},
		"time-slicing: allocatable is GPUs x replicas": {
			node: makeNode("l").gfd("NVIDIA-L4-SHARED", "23034", "2").label(LabelGPUSharingStrategy, "time-slicing").
				label(LabelGPUReplicas, "4").alloc(ResourceGPU, "8").obj(),
			want: repeat(cluster.GPU{Model: l4, Memory: 23034, Sharing: cluster.TimeSliced, Replicas: 4}, 2),
		},
		"time-slicing without a replicas label: replicas from the count": {
			node: makeNode("l").gfd("NVIDIA-L4-SHARED", "23034", "2").label(LabelGPUSharingStrategy, "time-slicing").
				alloc(ResourceGPU, "8").obj(),
			want: repeat(cluster.GPU{Model: l4, Memory: 23034, Sharing: cluster.TimeSliced, Replicas: 4}, 2),
		},
		"MPS with a stray replica": {
			node: makeNode("l").gfd("NVIDIA-L4", "23034", "2").label(LabelGPUSharingStrategy, "mps").
				label(LabelGPUReplicas, "4").alloc(ResourceGPU, "9").obj(),
			want:         repeat(cluster.GPU{Model: l4, Memory: 23034, Sharing: cluster.MPS, Replicas: 4}, 2),
			wantWarnings: []string{"node l: allocatable nvidia.com/gpu 9 is not a multiple of 4 replicas"},
		},
		"time-slicing renamed to nvidia.com/gpu.shared": {
			node: makeNode("l").gfd("NVIDIA-L4", "23034", "2").label(LabelGPUSharingStrategy, "time-slicing").
				label(LabelGPUReplicas, "4").alloc(ResourceGPUShared, "8").obj(),
			want: repeat(cluster.GPU{Model: l4, Memory: 23034, Sharing: cluster.TimeSliced, Replicas: 4, SharedResource: true}, 2),
		},
		"MPS renamed, beside a whole GPU": {
			node: makeNode("l").gfd("NVIDIA-L4", "23034", "3").label(LabelGPUSharingStrategy, "mps").
				label(LabelGPUReplicas, "2").alloc(ResourceGPU, "1").alloc(ResourceGPUShared, "4").obj(),
			want: []cluster.GPU{
				{Index: 0, Model: l4, Memory: 23034},
				{Index: 1, Model: l4, Memory: 23034, Sharing: cluster.MPS, Replicas: 2, SharedResource: true},
				{Index: 2, Model: l4, Memory: 23034, Sharing: cluster.MPS, Replicas: 2, SharedResource: true},
			},
		},
		"renamed replicas without a strategy label are time slices": {
			node:         makeNode("l").gfd("NVIDIA-L4", "23034", "2").label(LabelGPUReplicas, "4").alloc(ResourceGPUShared, "7").obj(),
			want:         repeat(cluster.GPU{Model: l4, Memory: 23034, Sharing: cluster.TimeSliced, Replicas: 4, SharedResource: true}, 1),
			wantWarnings: []string{"node l: allocatable nvidia.com/gpu.shared 7 is not a multiple of 4 replicas"},
		},
		"MIG mixed, all-balanced: one 4g and one 3g on each GPU": {
			node: makeNode("m").gfd("NVIDIA-H100-80GB-HBM3", "81559", "8").label(LabelMIGStrategy, "mixed").
				alloc(ResourceMIGPrefix+"3g.40gb", "8").alloc(ResourceMIGPrefix+"4g.40gb", "8").obj(),
			want: repeat(cluster.GPU{Model: h100, Memory: 81559, Sharing: cluster.MIG, Layout: layout("4g.40gb", "3g.40gb")}, 8),
		},
		"MIG mixed, all-1g.10gb": {
			node: makeNode("m").gfd("NVIDIA-H100-80GB-HBM3", "81559", "2").label(LabelMIGStrategy, "mixed").
				alloc(ResourceMIGPrefix+"1g.10gb", "14").obj(),
			want: repeat(cluster.GPU{Model: h100, Memory: 81559, Sharing: cluster.MIG, Layout: layout("1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb")}, 2),
		},
		"MIG mixed with one GPU left whole": {
			node: makeNode("m").gfd("NVIDIA-H100-80GB-HBM3", "81559", "2").label(LabelMIGStrategy, "mixed").
				alloc(ResourceGPU, "1").alloc(ResourceMIGPrefix+"7g.80gb", "1").obj(),
			want: []cluster.GPU{
				{Index: 0, Model: h100, Memory: 81559},
				{Index: 1, Model: h100, Memory: 81559, Sharing: cluster.MIG, Layout: layout("7g.80gb")},
			},
		},
		"MIG mixed that no layout holds": {
			node: makeNode("m").gfd("NVIDIA-H100-80GB-HBM3", "81559", "2").label(LabelMIGStrategy, "mixed").
				alloc(ResourceMIGPrefix+"7g.80gb", "3").alloc(ResourceMIGPrefix+"9g.99gb", "1").obj(),
			want: repeat(cluster.GPU{Model: h100, Memory: 81559, Sharing: cluster.MIG, Layout: layout("7g.80gb")}, 2),
			wantWarnings: []string{
				"node m: 1 nvidia.com/mig-7g.80gb devices fit no layout of its 2 MIG GPUs",
				"node m: 1 nvidia.com/mig-9g.99gb devices fit no layout",
			},
		},
		"MIG single: each nvidia.com/gpu is a slice": {
			node: makeNode("s").gfd("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "4864", "14").label(LabelMIGStrategy, "single").
				label(LabelMIGConfig, "all-1g.5gb").alloc(ResourceGPU, "14").obj(),
			want: repeat(cluster.GPU{Model: a100, Memory: gpu.GiB(5)}, 14),
		},
		"nvidia.com/gpu: 0": {
			node: makeNode("z").gfd("NVIDIA-H100-80GB-HBM3", "81559", "8").alloc(ResourceGPU, "0").obj(),
		},
		"no product label": {
			node:         makeNode("n").alloc(ResourceGPU, "4").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted(UnknownNVIDIAModel, 0)}, 4),
			wantWarnings: []string{"node n: advertises GPUs but has no nvidia.com/gpu.product label"},
		},
		"unknown product counts, memory from its label": {
			node:         makeNode("u").gfd("NVIDIA-B300-SXM6-AC", "275040", "8").alloc(ResourceGPU, "8").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted("NVIDIA-B300-SXM6-AC", 275040), Memory: 275040}, 8),
			wantWarnings: []string{`node u: GPU product "NVIDIA-B300-SXM6-AC" (label nvidia.com/gpu.product) is not in gpupack's catalogue; its GPUs count with the 275040 MiB of its nvidia.com/gpu.memory label; their price and MIG geometry are unknown`},
		},
		"unknown product without a memory label": {
			node:         makeNode("u").label(LabelGPUProduct, "NVIDIA-X9").alloc(ResourceGPU, "2").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted("NVIDIA-X9", 0)}, 2),
			wantWarnings: []string{`GPU product "NVIDIA-X9" (label nvidia.com/gpu.product) is not in gpupack's catalogue; its GPUs count with unknown memory (no nvidia.com/gpu.memory label), so only whole-GPU requests fit them`},
		},
		"unknown extended resources are ignored": {
			node: makeNode("x").alloc("example.com/fpga", "2").obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, err := Build(c, []*corev1.Node{tc.node}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.Snapshot.Nodes[0].GPUs); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			checkWarnings(t, tc.wantWarnings, st.Warnings)
		})
	}
}

func TestBuildNodeSchedulingFields(t *testing.T) {
	n := makeNode("t").alloc(corev1.ResourceMemory, "1536Mi").alloc(corev1.ResourceCPU, "7500m").
		taint("gpu", "reserved", corev1.TaintEffectNoSchedule).label("zone", "a").obj()
	n.Spec.Unschedulable = true
	st, err := Build(gpu.Default(), []*corev1.Node{n}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &cluster.Node{Name: "t", CPU: 7500, Memory: 1536, Labels: map[string]string{"zone": "a"}, Unschedulable: true,
		Taints: []cluster.Taint{{Key: "gpu", Value: "reserved", Effect: cluster.NoSchedule}}}
	if diff := cmp.Diff(want, st.Snapshot.Nodes[0]); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
}

// podBuilder makes Pods with fluent requests.
type podBuilder struct{ p *corev1.Pod }

func makePod(name string) podBuilder {
	return podBuilder{&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

func (b podBuilder) req(name corev1.ResourceName, q string) podBuilder {
	c := &b.p.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(q)
	return b
}

func (b podBuilder) limit(name corev1.ResourceName, q string) podBuilder {
	c := &b.p.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Limits[name] = resource.MustParse(q)
	return b
}

func (b podBuilder) container(requests corev1.ResourceList) podBuilder {
	b.p.Spec.Containers = append(b.p.Spec.Containers, corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests}})
	return b
}

func (b podBuilder) init(requests corev1.ResourceList, sidecar bool) podBuilder {
	c := corev1.Container{Name: "i", Resources: corev1.ResourceRequirements{Requests: requests}}
	if sidecar {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, c)
	return b
}

func (b podBuilder) node(name string) podBuilder { b.p.Spec.NodeName = name; return b }

func (b podBuilder) phase(p corev1.PodPhase) podBuilder { b.p.Status.Phase = p; return b }

func (b podBuilder) unschedulable(msg string, at time.Time) podBuilder {
	b.p.Status.Conditions = append(b.p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.NewTime(at)})
	return b
}

func (b podBuilder) obj() *corev1.Pod { return b.p }

func TestBuildPods(t *testing.T) {
	list := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	cases := map[string]struct {
		pod          *corev1.Pod
		want         cluster.Pod
		wantWarnings []string
	}{
		"limits without requests count as requests": {
			pod:  makePod("p").limit(ResourceGPU, "2").limit(corev1.ResourceCPU, "4").limit(corev1.ResourceMemory, "16Gi").obj(),
			want: cluster.Pod{CPU: 4000, Memory: 16384, GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 2}},
		},
		"requests win over limits": {
			pod:  makePod("p").req(corev1.ResourceCPU, "500m").limit(corev1.ResourceCPU, "2").obj(),
			want: cluster.Pod{CPU: 500},
		},
		"nvidia.com/gpu: 0 is no GPU": {
			pod:  makePod("p").limit(ResourceGPU, "0").obj(),
			want: cluster.Pod{},
		},
		"unknown extended resources are ignored": {
			pod:  makePod("p").limit("example.com/fpga", "3").req(corev1.ResourceMemory, "100M").obj(),
			want: cluster.Pod{Memory: 96}, // 100e6 bytes, rounded up to MiB
		},
		"containers sum, init containers by their maximum, sidecars add": {
			pod: makePod("p").req(corev1.ResourceCPU, "1").container(list("cpu", "2", "nvidia.com/gpu", "1")).
				init(list("cpu", "8"), false).init(list("cpu", "1", "memory", "1Gi"), true).obj(),
			// regular 3 + sidecar 1 = 4 CPUs < the init container's 8 (started before the sidecar)
			want: cluster.Pod{CPU: 8000, Memory: 1024, GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}},
		},
		"pod overhead is added": {
			pod: func() *corev1.Pod {
				p := makePod("p").req(corev1.ResourceCPU, "1").obj()
				p.Spec.Overhead = list("cpu", "250m")
				return p
			}(),
			want: cluster.Pod{CPU: 1250},
		},
		"a MIG slice": {
			pod:  makePod("p").limit(ResourceMIGPrefix+"3g.40gb", "1").obj(),
			want: cluster.Pod{GPU: cluster.Request{Kind: cluster.MIGSlice, Profile: "3g.40gb"}},
		},
		"two MIG slices count as one": {
			pod:          makePod("p").limit(ResourceMIGPrefix+"1g.10gb", "2").obj(),
			want:         cluster.Pod{GPU: cluster.Request{Kind: cluster.MIGSlice, Profile: "1g.10gb"}},
			wantWarnings: []string{"pod ml/p: asks for MIG devices map[1g.10gb:2]; gpupack models one MIG slice per pod"},
		},
		"a shared GPU": {
			pod:  makePod("p").limit(ResourceGPUShared, "1").obj(),
			want: cluster.Pod{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1, SharedResource: true}},
		},
		"a shared GPU with its VRAM annotated": {
			pod: func() *corev1.Pod {
				p := makePod("p").limit(ResourceGPUShared, "1").obj()
				p.Annotations = map[string]string{wellknown.AnnotationGPUMemory: "10Gi"}
				return p
			}(),
			want: cluster.Pod{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1, SharedResource: true, Memory: 10240}},
		},
		"VRAM annotation rounds up to MiB": {
			pod: func() *corev1.Pod {
				p := makePod("p").limit(ResourceGPU, "2").obj()
				p.Annotations = map[string]string{wellknown.AnnotationGPUMemory: "20G"}
				return p
			}(),
			want: cluster.Pod{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 2, Memory: 19074}},
		},
		"malformed and absurd VRAM annotations are ignored": {
			pod: func() *corev1.Pod {
				p := makePod("p").limit(ResourceGPU, "1").obj()
				p.Annotations = map[string]string{wellknown.AnnotationGPUMemory: "1e40"}
				return p
			}(),
			want:         cluster.Pod{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}},
			wantWarnings: []string{`pod ml/p: annotation gpupack.io/gpu-memory="1e40" is not a quantity between 1 and 1Pi`},
		},
		"whole and shared GPUs count the whole": {
			pod:          makePod("p").limit(ResourceGPU, "1").limit(ResourceGPUShared, "1").obj(),
			want:         cluster.Pod{GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}},
			wantWarnings: []string{"pod ml/p: asks for nvidia.com/gpu and other GPU resources (nvidia.com/gpu.shared 1"},
		},
		"selector, affinity and tolerations": {
			pod: func() *corev1.Pod {
				p := makePod("p").limit(ResourceGPU, "1").obj()
				p.Spec.NodeSelector = map[string]string{LabelGPUProduct: "NVIDIA-A100-SXM4-40GB"}
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}},
				}}}
				p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "reserved", Effect: corev1.TaintEffectNoSchedule}, {Operator: corev1.TolerationOpExists}}
				return p
			}(),
			want: cluster.Pod{
				GPU:              cluster.Request{Kind: cluster.WholeGPUs, Count: 1},
				NodeSelector:     map[string]string{LabelGPUProduct: "NVIDIA-A100-SXM4-40GB"},
				RequiredAffinity: []cluster.Term{{MatchExpressions: []cluster.Requirement{{Key: "zone", Operator: "In", Values: []string{"a", "b"}}}}},
				Tolerations:      []cluster.Toleration{{Key: "gpu", Operator: "Equal", Value: "reserved", Effect: cluster.NoSchedule}, {Operator: "Exists"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, err := Build(gpu.Default(), nil, []*corev1.Pod{tc.pod}, nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Namespace, tc.want.Name = "ml", "p"
			if diff := cmp.Diff(&tc.want, st.Snapshot.Pods[0]); diff != "" {
				t.Errorf("pod (-want +got):\n%s", diff)
			}
			checkWarnings(t, tc.wantWarnings, st.Warnings)
		})
	}
}

func TestBuildSkipsAndSchedulingFailures(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	nodes := []*corev1.Node{makeNode("n1").obj()}
	pods := []*corev1.Pod{
		makePod("done").node("n1").phase(corev1.PodSucceeded).obj(),
		makePod("failed").node("n1").phase(corev1.PodFailed).obj(),
		makePod("running").node("n1").phase(corev1.PodRunning).obj(),
		makePod("orphan").node("gone").phase(corev1.PodRunning).obj(),
		makePod("waiting").unschedulable("condition message", t0).obj(),
		makePod("fresh").obj(),
	}
	event := func(pod, uid, msg string, at time.Time) *corev1.Event {
		return &corev1.Event{
			Reason: ReasonFailedScheduling, Message: msg, LastTimestamp: metav1.NewTime(at),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ml", Name: pod, UID: types.UID(uid)},
		}
	}
	events := []*corev1.Event{
		event("waiting", "uid-waiting", "newer event", t0.Add(time.Minute)),
		event("waiting", "uid-waiting", "older event", t0.Add(-time.Minute)),
		event("fresh", "uid-of-an-earlier-pod", "about a deleted pod of the same name", t0),
		event("running", "uid-running", "before it was bound", t0),
	}
	events[1].Series = &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(t0.Add(30 * time.Second))}
	st, err := Build(gpu.Default(), nodes, pods, events)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range st.Snapshot.Pods {
		keys = append(keys, p.Key())
	}
	if diff := cmp.Diff([]string{"ml/running", "ml/waiting", "ml/fresh"}, keys); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	want := map[string]SchedulingFailure{"ml/waiting": {Message: "newer event", Time: t0.Add(time.Minute)}}
	if diff := cmp.Diff(want, st.SchedulingFailures); diff != "" {
		t.Errorf("scheduling failures (-want +got):\n%s", diff)
	}
	checkWarnings(t, []string{"pod ml/orphan: bound to node gone, which was not listed; left out"}, st.Warnings)
}

// checkWarnings checks that each warning contains the wanted substring, in order.
func checkWarnings(t *testing.T, want, got []string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("warnings = %q, want %d like %q", got, len(want), want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("warning %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

// TestBuildReadsRecordedDevices loads pods that gpupack-scheduler bound
// with their devices recorded (gpupack.io/gpu-devices): each is put on
// exactly those GPUs, pods without a record take what is left, and a
// malformed record is named and ignored.
func TestBuildReadsRecordedDevices(t *testing.T) {
	n := makeNode("h").gfd("NVIDIA-H100-80GB-HBM3", "81559", "5").alloc(ResourceGPU, "5").obj()
	pod := func(ns, gpus, devices string) *corev1.Pod {
		p := makePod("p").limit(ResourceGPU, gpus).node("h").phase(corev1.PodRunning).obj()
		p.Namespace = ns
		if devices != "" {
			p.Annotations = map[string]string{wellknown.AnnotationGPUDevices: devices}
		}
		return p
	}
	pending := makePod("waiting").limit(ResourceGPU, "1").obj()
	pending.Annotations = map[string]string{wellknown.AnnotationGPUDevices: "0"}
	pods := []*corev1.Pod{pod("a", "1", "3"), pod("b", "2", "1,2"), pod("c", "1", ""), pod("d", "1", "x"), pending}
	st, err := Build(gpu.Default(), []*corev1.Node{n}, pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkWarnings(t, []string{`pod d/p: gpupack.io/gpu-devices="x": GPU "x" is not an index`}, st.Warnings)
	devices := map[string][]cluster.Device{}
	for _, p := range st.Snapshot.Pods {
		devices[p.Key()] = p.Devices
	}
	want := map[string][]cluster.Device{"a/p": {{GPU: 3, Slice: -1}}, "b/p": {{GPU: 1, Slice: -1}, {GPU: 2, Slice: -1}}, "c/p": nil, "d/p": nil, "ml/waiting": nil}
	if diff := cmp.Diff(want, devices); diff != "" {
		t.Errorf("recorded devices (-want +got):\n%s", diff)
	}

	states, warnings, err := placement.States(st.Snapshot)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("States: %v, warnings %q", err, warnings)
	}
	var holders []string
	for _, g := range states[0].GPUs {
		holders = append(holders, g.Tenant)
	}
	if diff := cmp.Diff([]string{"c", "b", "b", "a", "d"}, holders); diff != "" {
		t.Errorf("holder of each GPU (-want +got):\n%s", diff)
	}
}

// TestBuildCloudNodes: nodes labelled as each managed cloud labels them,
// without GPU feature discovery, keep their GPUs, with a warning naming
// what was inferred.
func TestBuildCloudNodes(t *testing.T) {
	c := gpu.Default()
	model := c.MustLookup
	repeat := func(g cluster.GPU, n int) []cluster.GPU {
		out := make([]cluster.GPU, n)
		for i := range out {
			out[i] = g
			out[i].Index = i
		}
		return out
	}
	cases := map[string]struct {
		node         *corev1.Node
		want         []cluster.GPU
		wantWarnings []string
	}{
		"GKE": {
			node: makeNode("gke-l4").label(LabelGKEAccelerator, "nvidia-l4").label(LabelInstanceType, "g2-standard-24").
				alloc(ResourceGPU, "2").obj(),
			want:         repeat(cluster.GPU{Model: model("L4"), Memory: 23034}, 2),
			wantWarnings: []string{"node gke-l4: no GPU feature discovery labels; inferred model L4 from label cloud.google.com/gke-accelerator=nvidia-l4, 2 GPUs from label node.kubernetes.io/instance-type=g2-standard-24"},
		},
		"GKE time-sharing": {
			node: makeNode("gke-ts").label(LabelGKEAccelerator, "nvidia-tesla-t4").label(LabelGKEGPUSharingStrategy, "time-sharing").
				label(LabelGKEMaxSharedClients, "4").alloc(ResourceGPU, "8").obj(),
			want:         repeat(cluster.GPU{Model: model("T4"), Memory: 15360, Sharing: cluster.TimeSliced, Replicas: 4}, 2),
			wantWarnings: []string{"inferred model T4 from label cloud.google.com/gke-accelerator=nvidia-tesla-t4"},
		},
		"GKE MPS": {
			node: makeNode("gke-mps").label(LabelGKEAccelerator, "nvidia-h100-80gb").label(LabelGKEGPUSharingStrategy, "mps").
				label(LabelGKEMaxSharedClients, "3").label(LabelInstanceType, "a3-highgpu-1g").alloc(ResourceGPU, "3").obj(),
			want:         repeat(cluster.GPU{Model: model("H100-80GB"), Memory: 81559, Sharing: cluster.MPS, Replicas: 3}, 1),
			wantWarnings: []string{"inferred model H100-80GB from label cloud.google.com/gke-accelerator=nvidia-h100-80gb, 1 GPUs from label node.kubernetes.io/instance-type=a3-highgpu-1g"},
		},
		"GKE MIG partitions": {
			node: makeNode("gke-mig").label(LabelGKEAccelerator, "nvidia-tesla-a100").label(LabelGKEGPUPartitionSize, "1g.5gb").
				label(LabelInstanceType, "a2-highgpu-1g").alloc(ResourceGPU, "7").obj(),
			want:         repeat(cluster.GPU{Model: model("A100-40GB"), Memory: gpu.GiB(5)}, 7),
			wantWarnings: []string{"inferred model A100-40GB from label cloud.google.com/gke-accelerator=nvidia-tesla-a100"},
		},
		"GKE accelerator gpupack does not know": {
			node:         makeNode("gke-p4").label(LabelGKEAccelerator, "nvidia-tesla-p4").alloc(ResourceGPU, "1").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted("nvidia-tesla-p4", 0)}, 1),
			wantWarnings: []string{"inferred model nvidia-tesla-p4 from label cloud.google.com/gke-accelerator=nvidia-tesla-p4; the model is not in gpupack's catalogue, so its price and MIG geometry are unknown (add it to a --catalogue file) and only whole-GPU requests fit its GPUs (memory unknown)"},
		},
		"EKS with Karpenter": {
			node: makeNode("eks-k").label(LabelKarpenterGPUName, "a100").label(LabelKarpenterGPUMemory, "81920").
				label(LabelKarpenterGPUCount, "8").label(LabelInstanceType, "p4de.24xlarge").alloc(ResourceGPU, "8").obj(),
			want:         repeat(cluster.GPU{Model: model("A100-80GB"), Memory: 81920}, 8),
			wantWarnings: []string{"inferred model A100-80GB from label karpenter.k8s.aws/instance-gpu-name=a100, 8 GPUs from label karpenter.k8s.aws/instance-gpu-count=8"},
		},
		"EKS Auto Mode, a GPU gpupack does not know": {
			node: makeNode("eks-auto").label(LabelEKSAutoGPUName, "b300").label(LabelEKSAutoGPUMemory, "275040").
				label(LabelEKSAutoGPUCount, "8").alloc(ResourceGPU, "8").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted("b300", 275040), Memory: 275040}, 8),
			wantWarnings: []string{"inferred model b300 from label eks.amazonaws.com/instance-gpu-name=b300, memory from label eks.amazonaws.com/instance-gpu-memory=275040, 8 GPUs from label eks.amazonaws.com/instance-gpu-count=8; the model is not in gpupack's catalogue"},
		},
		"EKS managed node group": {
			node:         makeNode("eks-ng").label(LabelAWSAccelerator, "nvidia-tesla-v100").alloc(ResourceGPU, "4").obj(),
			want:         repeat(cluster.GPU{Model: model("V100-16GB"), Memory: 16384}, 4),
			wantWarnings: []string{"inferred model V100-16GB from label k8s.amazonaws.com/accelerator=nvidia-tesla-v100"},
		},
		"EKS, instance type only": {
			node:         makeNode("eks-g5").label(LabelInstanceType, "g5.48xlarge").alloc(ResourceGPU, "8").obj(),
			want:         repeat(cluster.GPU{Model: model("A10G"), Memory: 23028}, 8),
			wantWarnings: []string{"inferred model A10G from label node.kubernetes.io/instance-type=g5.48xlarge, 8 GPUs from label node.kubernetes.io/instance-type=g5.48xlarge"},
		},
		"AKS": {
			node: makeNode("aks").label("kubernetes.azure.com/accelerator", "nvidia").label("accelerator", "nvidia").
				label(LabelInstanceType, "Standard_NC40ads_H100_v5").alloc(ResourceGPU, "1").obj(),
			want:         repeat(cluster.GPU{Model: model("H100-NVL"), Memory: 95830}, 1),
			wantWarnings: []string{"node aks: no GPU feature discovery labels; inferred model H100-NVL from label node.kubernetes.io/instance-type=Standard_NC40ads_H100_v5"},
		},
		"AKS time-slicing by the GPU operator, count from the instance type": {
			node: makeNode("aks-ts").label(LabelInstanceType, "Standard_NC64as_T4_v3").label(LabelGPUSharingStrategy, "time-slicing").
				alloc(ResourceGPU, "16").obj(),
			want:         repeat(cluster.GPU{Model: model("T4"), Memory: 15360, Sharing: cluster.TimeSliced, Replicas: 4}, 4),
			wantWarnings: []string{"4 GPUs from label node.kubernetes.io/instance-type=Standard_NC64as_T4_v3"},
		},
		"EKS with Karpenter, a name the catalogue spells otherwise": {
			node: makeNode("eks-g7e").label(LabelKarpenterGPUName, "rtx-pro-server-6000").label(LabelKarpenterGPUMemory, "98304").
				label(LabelKarpenterGPUCount, "4").label(LabelInstanceType, "g7e.24xlarge").alloc(ResourceGPU, "4").obj(),
			want:         repeat(cluster.GPU{Model: model("RTX-PRO-6000"), Memory: 97887}, 4),
			wantWarnings: []string{"inferred model RTX-PRO-6000 from label karpenter.k8s.aws/instance-gpu-name=rtx-pro-server-6000, 4 GPUs from label karpenter.k8s.aws/instance-gpu-count=4"},
		},
		"EKS, P5 with one GPU": {
			node:         makeNode("eks-p5").label(LabelInstanceType, "p5.4xlarge").alloc(ResourceGPU, "1").obj(),
			want:         repeat(cluster.GPU{Model: model("H100-80GB"), Memory: 81559}, 1),
			wantWarnings: []string{"inferred model H100-80GB from label node.kubernetes.io/instance-type=p5.4xlarge, 1 GPUs from label node.kubernetes.io/instance-type=p5.4xlarge"},
		},
		"GKE G4": {
			node: makeNode("gke-g4").label(LabelGKEAccelerator, "nvidia-rtx-pro-6000").label(LabelInstanceType, "g4-standard-192").
				alloc(ResourceGPU, "4").obj(),
			want:         repeat(cluster.GPU{Model: model("RTX-PRO-6000"), Memory: 97887}, 4),
			wantWarnings: []string{"inferred model RTX-PRO-6000 from label cloud.google.com/gke-accelerator=nvidia-rtx-pro-6000, 4 GPUs from label node.kubernetes.io/instance-type=g4-standard-192"},
		},
		"AKS ND GB200 v6": {
			node:         makeNode("aks-gb200").label(LabelInstanceType, "Standard_ND128isr_NDR_GB200_v6").alloc(ResourceGPU, "4").obj(),
			want:         repeat(cluster.GPU{Model: model("GB200"), Memory: model("GB200").Usable}, 4),
			wantWarnings: []string{"inferred model GB200 from label node.kubernetes.io/instance-type=Standard_ND128isr_NDR_GB200_v6, 4 GPUs from label node.kubernetes.io/instance-type=Standard_ND128isr_NDR_GB200_v6"},
		},
		"no label names the model: the GPUs count as an unknown NVIDIA model": {
			node:         makeNode("bare").label(LabelInstanceType, "m5.large").alloc(ResourceGPU, "2").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted(UnknownNVIDIAModel, 0)}, 2),
			wantWarnings: []string{`node bare: advertises GPUs but has no nvidia.com/gpu.product label (is GPU feature discovery installed?) and no cloud label or instance type names its GPU model (cloud.google.com/gke-accelerator, eks.amazonaws.com/instance-gpu-name, karpenter.k8s.aws/instance-gpu-name, node.kubernetes.io/instance-type); its GPUs count as "unknown NVIDIA GPU" with unknown memory`},
		},
		"no label at all, time-sliced by a count label": {
			node: makeNode("bare-ts").label(LabelGPUSharingStrategy, "time-slicing").label(LabelGPUCount, "2").
				alloc(ResourceGPU, "8").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted(UnknownNVIDIAModel, 0), Sharing: cluster.TimeSliced, Replicas: 4}, 2),
			wantWarnings: []string{"node bare-ts: advertises GPUs but has no nvidia.com/gpu.product label"},
		},
		"GKE accelerator count": {
			node: makeNode("gke-count").label(LabelGKEAccelerator, "nvidia-tesla-t4").label(LabelGKEAcceleratorCount, "2").
				label(LabelGKEGPUSharingStrategy, "time-sharing").alloc(ResourceGPU, "6").obj(),
			want:         repeat(cluster.GPU{Model: model("T4"), Memory: 15360, Sharing: cluster.TimeSliced, Replicas: 3}, 2),
			wantWarnings: []string{"inferred model T4 from label cloud.google.com/gke-accelerator=nvidia-tesla-t4, 2 GPUs from label cloud.google.com/gke-accelerator-count=2"},
		},
		"EKS: the instance type is more precise than k8s.amazonaws.com/accelerator": {
			node: makeNode("eks-p4de").label(LabelAWSAccelerator, "nvidia-tesla-a100").label(LabelInstanceType, "p4de.24xlarge").
				alloc(ResourceGPU, "8").obj(),
			want:         repeat(cluster.GPU{Model: model("A100-80GB"), Memory: model("A100-80GB").Usable}, 8),
			wantWarnings: []string{"inferred model A100-80GB from label node.kubernetes.io/instance-type=p4de.24xlarge, 8 GPUs from label node.kubernetes.io/instance-type=p4de.24xlarge"},
		},
		"EKS: k8s.amazonaws.com/accelerator on an instance type gpupack does not list": {
			node: makeNode("eks-g5g").label(LabelAWSAccelerator, "nvidia-t4g").label(LabelInstanceType, "g5g.xlarge").
				alloc(ResourceGPU, "1").obj(),
			want:         repeat(cluster.GPU{Model: c.Unlisted("t4g", 0)}, 1),
			wantWarnings: []string{"inferred model t4g from label k8s.amazonaws.com/accelerator=nvidia-t4g; the model is not in gpupack's catalogue"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, err := Build(c, []*corev1.Node{tc.node}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.Snapshot.Nodes[0].GPUs); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			checkWarnings(t, tc.wantWarnings, st.Warnings)
		})
	}
}

// TestCloudTables: every model the cloud tables name is in the built-in
// catalogue (an instance type's model is looked up with MustLookup), every
// instance type has whole GPUs, and the cloud labels' names resolve to the
// model the table gives their instance types.
func TestCloudTables(t *testing.T) {
	c := gpu.Default()
	for it, g := range instanceGPUs {
		if _, ok := c.Lookup(g.model); !ok {
			t.Errorf("instance type %s: model %q is not in the built-in catalogue", it, g.model)
		}
		if g.count < 1 {
			t.Errorf("instance type %s: %d GPUs", it, g.count)
		}
	}
	for name, tables := range map[string]map[string]string{"gkeAccelerators": gkeAccelerators, "karpenterGPUs": karpenterGPUs} {
		for k, m := range tables {
			if _, ok := c.Lookup(m); !ok {
				t.Errorf("%s[%q]: model %q is not in the built-in catalogue", name, k, m)
			}
		}
	}
	// The label a node of each instance type carries names the model the
	// table gives it: GKE's accelerator, Karpenter's GPU name and memory.
	for _, tc := range []struct {
		instanceType string
		labels       map[string]string
	}{
		{"a2-highgpu-8g", map[string]string{LabelGKEAccelerator: "nvidia-tesla-a100"}},
		{"a2-ultragpu-8g", map[string]string{LabelGKEAccelerator: "nvidia-a100-80gb"}},
		{"a3-megagpu-8g", map[string]string{LabelGKEAccelerator: "nvidia-h100-mega-80gb"}},
		{"a3-ultragpu-8g", map[string]string{LabelGKEAccelerator: "nvidia-h200-141gb"}},
		{"a4-highgpu-8g", map[string]string{LabelGKEAccelerator: "nvidia-b200"}},
		{"a4x-highgpu-4g", map[string]string{LabelGKEAccelerator: "nvidia-gb200"}},
		{"g2-standard-96", map[string]string{LabelGKEAccelerator: "nvidia-l4"}},
		{"p3dn.24xlarge", map[string]string{LabelKarpenterGPUName: "v100", LabelKarpenterGPUMemory: "32768"}},
		{"p4d.24xlarge", map[string]string{LabelKarpenterGPUName: "a100", LabelKarpenterGPUMemory: "40960"}},
		{"p5en.48xlarge", map[string]string{LabelKarpenterGPUName: "h200", LabelKarpenterGPUMemory: "144384"}},
		{"p6-b200.48xlarge", map[string]string{LabelKarpenterGPUName: "b200", LabelKarpenterGPUMemory: "183359"}},
		{"g5.xlarge", map[string]string{LabelKarpenterGPUName: "a10g", LabelKarpenterGPUMemory: "22888"}},
		{"g6e.xlarge", map[string]string{LabelEKSAutoGPUName: "l40s", LabelEKSAutoGPUMemory: "45776"}},
		{"g7e.2xlarge", map[string]string{LabelEKSAutoGPUName: "rtx-pro-server-6000", LabelEKSAutoGPUMemory: "98304"}},
	} {
		cg, ok := fromCloudLabels(tc.labels, c)
		if !ok {
			t.Errorf("%s: labels %v name no model", tc.instanceType, tc.labels)
			continue
		}
		if want := instanceGPUs[tc.instanceType].model; cg.model.Name != want {
			t.Errorf("%s: labels %v name %s, the instance type %s", tc.instanceType, tc.labels, cg.model.Name, want)
		}
	}
}
