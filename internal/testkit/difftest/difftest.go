// Package difftest generates random GPU clusters and pending GPU pods, as the
// Kubernetes objects that NVIDIA's device plugin and GPU feature discovery
// make of them, for differential tests of gpupack's diagnosis against the
// real kube-scheduler (internal/e2e) and for fuzzing placement and diagnose.
//
// A case is a function of its seed and index alone (Generate), so a
// mismatch found on a control plane is reproduced by those two numbers, and
// Dump writes it in full for a regression file (ReadRegression).
//
// The generator covers what gpupack models of the scheduler's default
// profile: GPU nodes of several catalogue models, whole, MIG (mixed
// strategy), time-sliced and MPS, replicas renamed or not; CPU-only nodes;
// labels, taints, cordons, CPU, memory and pod capacity; bound pods that
// hold part of each node; pending pods that ask for whole GPUs, shared
// replicas or MIG slices, CPU and memory, with node selectors, required
// node affinity under every operator, and tolerations; with
// Options.PodRules, app labels and required pod anti-affinity on bound
// pods, and topology spread constraints and required pod (anti-)affinity
// on pending pods, drawn from a random stream of their own, so that the
// rest of a case is the same with or without them. Quotas and scheduling
// gates are not generated yet: each would be one more field of Options and
// one more step of pendingPod.
package difftest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// Options sizes a case; zero fields take the defaults.
type Options struct {
	// MaxNodes bounds the nodes of a case (default 10; at least 1 node).
	MaxNodes int
	// Pending is the number of pending pods (default 60).
	Pending int
	// PodRules gives pods app labels, bound pods required pod
	// anti-affinity, and pending pods topology spread constraints and
	// required pod (anti-)affinity. The rules are drawn from a stream of
	// their own: a case is the one without them plus the rules.
	PodRules bool
}

// Case is one generated cluster and the pods that wait on it.
type Case struct {
	Seed  uint64 `json:"seed"`
	Index int    `json:"index"`
	// Namespace holds every pod of the case.
	Namespace string         `json:"namespace"`
	Nodes     []*corev1.Node `json:"nodes"`
	Bound     []*corev1.Pod  `json:"bound,omitempty"`
	Pending   []*corev1.Pod  `json:"pending"`
}

// Label keys and values the generator puts on nodes and that pods select.
const (
	LabelPool = "gpupack.test/pool"
	LabelZone = "gpupack.test/zone"
	// LabelRank is numeric, for the Gt and Lt operators.
	LabelRank = "gpupack.test/rank"
)

var (
	pools = []string{"a", "b", "c"}
	zones = []string{"z1", "z2"}
	// taints are the taints a node may carry; PreferNoSchedule never
	// keeps a pod off.
	taints = []corev1.Taint{
		{Key: "dedicated", Value: "team-x", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Value: "reserved", Effect: corev1.TaintEffectNoSchedule},
		{Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
		{Key: "soft", Value: "yes", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	unschedulableKey = corev1.TaintNodeUnschedulable
)

// product is a GPU model as GPU feature discovery labels it.
type product struct {
	label  string
	memory int64 // MiB of one GPU
	mig    bool
}

var (
	wholeProducts  = []product{{"NVIDIA-H100-80GB-HBM3", 81559, true}, {"NVIDIA-A100-SXM4-80GB", 81920, true}, {"NVIDIA-L40S", 46068, false}, {"NVIDIA-L4", 23034, false}, {"Tesla-T4", 15360, false}}
	migProducts    = []product{{"NVIDIA-A100-SXM4-40GB", 40960, true}, {"NVIDIA-A100-SXM4-80GB", 81920, true}, {"NVIDIA-H100-80GB-HBM3", 81559, true}, {"NVIDIA-A30", 24169, true}}
	sharedProducts = []product{{"NVIDIA-L4", 23034, false}, {"Tesla-T4", 15360, false}, {"NVIDIA-A10", 23028, false}}
	allProducts    = []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-L40S", "NVIDIA-L4", "Tesla-T4", "NVIDIA-A30", "NVIDIA-A10", "NVIDIA-B200"}
)

// gen is the state of one case's generation.
type gen struct {
	rng *rand.Rand
	c   *gpu.Catalogue
	cs  *Case
	// profiles are the MIG profiles the case's layouts offer, for pending
	// pods to ask for; pods counts the bound pods, to name them.
	profiles []string
	pods     int
	// rules draws the pods' cross-node rules (Options.PodRules); nil
	// without them.
	rules *rand.Rand
}

// Generate makes case index of seed. It is deterministic: the same seed,
// index and options give the same case.
func Generate(seed uint64, index int, opts Options) (*Case, error) {
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = 10
	}
	if opts.Pending <= 0 {
		opts.Pending = 60
	}
	if index < 0 {
		return nil, fmt.Errorf("difftest: case index %d is negative", index)
	}
	g := &gen{
		rng: rand.New(rand.NewPCG(seed, uint64(index))),
		c:   gpu.Default(),
		cs:  &Case{Seed: seed, Index: index, Namespace: fmt.Sprintf("dt-%d-%d", seed, index)},
	}
	if opts.PodRules {
		g.rules = rand.New(rand.NewPCG(seed^rulesStream, uint64(index)))
	}
	nodes := 1 + g.rng.IntN(opts.MaxNodes)
	for i := range nodes {
		if err := g.node(fmt.Sprintf("n%d-%d-%d", seed, index, i)); err != nil {
			return nil, err
		}
	}
	for i := range opts.Pending {
		g.cs.Pending = append(g.cs.Pending, g.pendingPod(fmt.Sprintf("w%d", i)))
	}
	return g.cs, nil
}

// rulesStream sets the pod rules' random stream apart from the case's.
const rulesStream = 0x9e3779b97f4a7c15

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (g *gen) chance(p float64) bool { return g.rng.Float64() < p }

// node adds one node and the pods bound to it.
func (g *gen) node(name string) error {
	var spec testcluster.GPUNode
	kind := g.rng.IntN(10)
	switch {
	case kind < 3: // whole GPUs
		p := pick(g.rng, wholeProducts)
		spec = testcluster.GPUNode{Product: p.label, MemoryMiB: p.memory, GPUs: pick(g.rng, []int64{1, 2, 4, 8})}
	case kind < 6: // MIG, mixed strategy
		var err error
		if spec, err = g.migNode(name); err != nil {
			return err
		}
	case kind < 9: // time-sliced or MPS
		p := pick(g.rng, sharedProducts)
		spec = testcluster.GPUNode{Product: p.label, MemoryMiB: p.memory, GPUs: pick(g.rng, []int64{1, 2, 4}),
			Sharing: pick(g.rng, []testcluster.SharingStrategy{testcluster.SharingTimeSlicing, testcluster.SharingMPS}), Replicas: pick(g.rng, []int64{2, 4, 8}), RenameByDefault: g.chance(0.4)}
	}
	var n *corev1.Node
	if kind == 9 { // no GPUs
		n = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "type": "kwok"}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{}},
		}
	} else {
		var err error
		if n, err = spec.Object(name); err != nil {
			return fmt.Errorf("difftest: node %s: %w", name, err)
		}
	}
	cpu := pick(g.rng, []int64{8, 16, 32, 64, 96})
	memGi := pick(g.rng, []int64{32, 64, 128, 256, 512})
	n.Status.Capacity[corev1.ResourceCPU] = *resource.NewQuantity(cpu, resource.DecimalSI)
	n.Status.Capacity[corev1.ResourceMemory] = resource.MustParse(strconv.FormatInt(memGi, 10) + "Gi")
	n.Status.Capacity[corev1.ResourcePods] = *resource.NewQuantity(110, resource.DecimalSI)
	if g.chance(0.8) {
		n.Labels[LabelPool] = pick(g.rng, pools)
	}
	if g.chance(0.7) {
		n.Labels[LabelZone] = pick(g.rng, zones)
	}
	if g.chance(0.7) {
		n.Labels[LabelRank] = strconv.Itoa(g.rng.IntN(10))
	}
	for _, t := range taints {
		if g.chance(0.12) {
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
	}
	n.Spec.Unschedulable = g.chance(0.1)

	bound := g.boundPods(n, cpu*1000, memGi*1024)
	if g.chance(0.15) {
		// The node holds as many pods as it takes, or one more.
		n.Status.Capacity[corev1.ResourcePods] = *resource.NewQuantity(int64(len(bound)+g.rng.IntN(2)), resource.DecimalSI)
	}
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	g.cs.Nodes = append(g.cs.Nodes, n)
	g.cs.Bound = append(g.cs.Bound, bound...)
	return nil
}

// migNode is a node of GPUs in MIG mode, each with the same layout. The
// mixed strategy advertises only the node's count of each profile, and the
// live loader rebuilds layouts from them first-fit; a layout it cannot
// rebuild (it warns) is drawn again, so that every case loads whole.
func (g *gen) migNode(name string) (testcluster.GPUNode, error) {
	for range 20 {
		p := pick(g.rng, migProducts)
		m := g.c.MustLookup(p.label)
		l := slices.Clone(pick(g.rng, m.MIG.MaximalLayouts()))
		// Drop some slices: a partial layout leaves memory unused, as
		// custom mig-parted configs do.
		for len(l) > 1 && g.chance(0.3) {
			i := g.rng.IntN(len(l))
			l = append(l[:i], l[i+1:]...)
		}
		gpus := pick(g.rng, []int64{1, 2, 4})
		spec := testcluster.GPUNode{Product: p.label, MemoryMiB: p.memory, GPUs: gpus, MIG: map[string]int64{}, MIGConfig: "custom-difftest"}
		for prof, n := range l.Counts() {
			spec.MIG[prof] = int64(n) * gpus
		}
		n, err := spec.Object(name)
		if err != nil {
			return spec, fmt.Errorf("difftest: node %s: %w", name, err)
		}
		if _, warnings := kube.ConvertNode(n, g.c); len(warnings) > 0 {
			continue
		}
		for prof := range spec.MIG {
			if !slices.Contains(g.profiles, prof) {
				g.profiles = append(g.profiles, prof)
			}
		}
		slices.Sort(g.profiles)
		return spec, nil
	}
	return testcluster.GPUNode{}, fmt.Errorf("difftest: node %s: no MIG layout in 20 draws that the live loader rebuilds", name)
}

// boundPods fills part of the node with pods bound to it: some of each of
// its extended resources, and part of its CPU and memory.
func (g *gen) boundPods(n *corev1.Node, cpuMilli, memMi int64) []*corev1.Pod {
	var out []*corev1.Pod
	add := func(res corev1.ResourceName, count int64) {
		if cpuMilli < 0 || memMi < 0 {
			return
		}
		c := pick(g.rng, []int64{0, 250, 1000, 2000, 4000})
		m := pick(g.rng, []int64{0, 512, 2048, 8192})
		if c > cpuMilli || m > memMi {
			c, m = 0, 0
		}
		cpuMilli, memMi = cpuMilli-c, memMi-m
		g.pods++
		p := g.boundPod(n, c, m)
		if res != "" {
			p.Spec.Containers[0].Resources.Limits[res] = *resource.NewQuantity(count, resource.DecimalSI)
		}
		out = append(out, p)
	}
	resources := make([]corev1.ResourceName, 0, len(n.Status.Capacity))
	for r := range n.Status.Capacity {
		if r == testcluster.ResourceGPU || r == testcluster.ResourceGPUShared || strings.HasPrefix(string(r), "nvidia.com/mig-") {
			resources = append(resources, r)
		}
	}
	slices.Sort(resources)
	for _, r := range resources {
		q := n.Status.Capacity[r]
		total := q.Value()
		used := int64(0)
		switch g.rng.IntN(3) {
		case 0:
		case 1:
			used = g.rng.Int64N(total + 1)
		default:
			used = total
		}
		for used > 0 {
			k := min(used, 1+g.rng.Int64N(min(used, 4)))
			if strings.HasPrefix(string(r), "nvidia.com/mig-") {
				k = 1 // gpupack models one slice per pod
			}
			add(r, k)
			used -= k
		}
	}
	for range g.rng.IntN(3) {
		add("", 0) // CPU-only pods
	}
	// Bound pods use CPU and memory beyond the small ones above: one pod
	// may take most of what is left.
	if g.chance(0.3) && cpuMilli > 0 {
		g.pods++
		out = append(out, g.boundPod(n, cpuMilli*int64(1+g.rng.IntN(10))/10, memMi*int64(g.rng.IntN(10))/10))
	}
	return out
}

// boundPod is a pod bound to n by its nodeName, as a controller or an
// earlier scheduling cycle left it; it tolerates every taint, so that a
// taint does not make it a misfit of its node.
func (g *gen) boundPod(n *corev1.Node, cpuMilli, memMi int64) *corev1.Pod {
	p := g.pod(fmt.Sprintf("b%d", g.pods), cpuMilli, memMi)
	p.Spec.NodeName = n.Name
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if g.rules != nil {
		p.Labels = map[string]string{LabelApp: pick(g.rules, apps)}
		if g.rules.Float64() < 0.15 {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.podTerm()}}}
		}
	}
	return p
}

// pod is a pod of the case's namespace with CPU and memory requests.
func (g *gen) pod(name string, cpuMilli, memMi int64) *corev1.Pod {
	req := corev1.ResourceList{}
	if cpuMilli > 0 {
		req[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI)
	}
	if memMi > 0 {
		req[corev1.ResourceMemory] = *resource.NewQuantity(memMi<<20, resource.BinarySI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.cs.Namespace, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: corev1.ResourceList{}},
			}},
			TerminationGracePeriodSeconds: ptrTo(int64(0)),
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// pendingPod is one pod for the scheduler: a GPU request, CPU and memory,
// and rules.
func (g *gen) pendingPod(name string) *corev1.Pod {
	cpu := pick(g.rng, []int64{250, 500, 1000, 2000, 4000, 8000, 16000, 48000, 100000})
	mem := pick(g.rng, []int64{0, 1024, 4096, 16384, 65536, 200000, 600000})
	p := g.pod(name, cpu, mem)
	var res corev1.ResourceName
	count := int64(1)
	switch k := g.rng.IntN(20); {
	case k < 9:
		res = testcluster.ResourceGPU
		count = pick(g.rng, []int64{1, 1, 1, 2, 2, 3, 4, 8, 9, 16})
	case k < 13:
		res = testcluster.ResourceGPUShared
		count = pick(g.rng, []int64{1, 1, 2, 3, 4, 6, 9})
	default:
		var prof string
		if len(g.profiles) > 0 && g.chance(0.85) {
			prof = pick(g.rng, g.profiles)
		} else {
			// A profile that no layout of the case may offer.
			prof = pick(g.rng, []string{"1g.5gb", "7g.80gb", "4g.20gb", "1g.6gb", "2g.20gb"})
		}
		res = testcluster.ResourceMIG(prof)
	}
	p.Spec.Containers[0].Resources.Limits[res] = *resource.NewQuantity(count, resource.DecimalSI)
	if g.chance(0.3) {
		p.Spec.NodeSelector = map[string]string{}
		if g.chance(0.6) {
			p.Spec.NodeSelector[LabelPool] = pick(g.rng, append([]string{"d"}, pools...))
		}
		if g.chance(0.5) {
			p.Spec.NodeSelector[testcluster.LabelGPUProduct] = pick(g.rng, allProducts)
		}
		if g.chance(0.3) {
			p.Spec.NodeSelector[LabelZone] = pick(g.rng, zones)
		}
	}
	if g.chance(0.35) {
		var terms []corev1.NodeSelectorTerm
		for range 1 + g.rng.IntN(2) {
			var t corev1.NodeSelectorTerm
			for range 1 + g.rng.IntN(2) {
				t.MatchExpressions = append(t.MatchExpressions, g.requirement())
			}
			terms = append(terms, t)
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	if g.chance(0.45) {
		for range 1 + g.rng.IntN(3) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, g.toleration())
		}
	}
	if g.rules != nil {
		g.podRules(p)
	}
	return p
}

// LabelApp and LabelVersion are the pod labels the rules select.
const (
	LabelApp     = "gpupack.test/app"
	LabelVersion = "gpupack.test/version"
)

var apps = []string{"web", "db", "job"}

// podRules gives a pending pod labels, topology spread constraints and
// required pod (anti-)affinity, from the rules' stream.
func (g *gen) podRules(p *corev1.Pod) {
	r := g.rules
	chance := func(x float64) bool { return r.Float64() < x }
	p.Labels = map[string]string{}
	if chance(0.85) {
		p.Labels[LabelApp] = pick(r, apps)
	}
	if chance(0.5) {
		p.Labels[LabelVersion] = pick(r, []string{"v1", "v2"})
	}
	for range r.IntN(3) {
		if !chance(0.6) {
			continue
		}
		c := corev1.TopologySpreadConstraint{
			MaxSkew:           pick(r, []int32{1, 1, 2, 3}),
			TopologyKey:       pick(r, []string{LabelZone, LabelZone, corev1.LabelHostname}),
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     g.appSelector(p),
		}
		if chance(0.15) {
			c.WhenUnsatisfiable = corev1.ScheduleAnyway
		} else if chance(0.2) {
			c.MinDomains = ptrTo(int32(1 + r.IntN(4)))
		}
		if chance(0.2) {
			c.MatchLabelKeys = []string{LabelVersion}
		}
		if chance(0.3) {
			c.NodeAffinityPolicy = ptrTo(pick(r, []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}))
		}
		if chance(0.3) {
			c.NodeTaintsPolicy = ptrTo(pick(r, []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}))
		}
		// The apiserver takes one constraint per key and action.
		if !slices.ContainsFunc(p.Spec.TopologySpreadConstraints, func(o corev1.TopologySpreadConstraint) bool {
			return o.TopologyKey == c.TopologyKey && o.WhenUnsatisfiable == c.WhenUnsatisfiable
		}) {
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
		}
	}
	var affinity, anti []corev1.PodAffinityTerm
	if chance(0.2) {
		affinity = append(affinity, g.podTerm())
	}
	if chance(0.25) {
		anti = append(anti, g.podTerm())
	}
	if affinity == nil && anti == nil {
		return
	}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if affinity != nil {
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: affinity}
	}
	if anti != nil {
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: anti}
	}
}

// appSelector selects the pod's own app mostly, another app or every pod
// with an app label sometimes.
func (g *gen) appSelector(p *corev1.Pod) *metav1.LabelSelector {
	r := g.rules
	switch k := r.IntN(10); {
	case k < 6 && p.Labels[LabelApp] != "":
		return &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: p.Labels[LabelApp]}}
	case k < 9:
		return &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: pick(r, apps)}}
	default:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: LabelApp, Operator: metav1.LabelSelectorOpExists}}}
	}
}

// podTerm is a pod affinity term on an app by zone or hostname, in the
// pod's own namespace or, sometimes, every namespace.
func (g *gen) podTerm() corev1.PodAffinityTerm {
	r := g.rules
	t := corev1.PodAffinityTerm{
		TopologyKey:   pick(r, []string{LabelZone, corev1.LabelHostname}),
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: pick(r, apps)}},
	}
	if r.Float64() < 0.15 {
		t.NamespaceSelector = &metav1.LabelSelector{}
	}
	return t
}

// requirement is one node selector requirement under a random operator.
func (g *gen) requirement() corev1.NodeSelectorRequirement {
	switch g.rng.IntN(6) {
	case 0:
		return corev1.NodeSelectorRequirement{Key: LabelPool, Operator: corev1.NodeSelectorOpIn, Values: sample(g.rng, append([]string{"d"}, pools...))}
	case 1:
		key := pick(g.rng, []string{LabelPool, LabelZone, testcluster.LabelGPUProduct})
		values := map[string][]string{LabelPool: pools, LabelZone: zones, testcluster.LabelGPUProduct: allProducts}[key]
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: sample(g.rng, values)}
	case 2:
		return corev1.NodeSelectorRequirement{Key: pick(g.rng, []string{LabelPool, LabelZone, LabelRank, "gpupack.test/absent"}), Operator: corev1.NodeSelectorOpExists}
	case 3:
		return corev1.NodeSelectorRequirement{Key: pick(g.rng, []string{LabelPool, LabelZone, LabelRank, "gpupack.test/absent"}), Operator: corev1.NodeSelectorOpDoesNotExist}
	case 4:
		return corev1.NodeSelectorRequirement{Key: pick(g.rng, []string{LabelRank, testcluster.LabelGPUCount}), Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.Itoa(g.rng.IntN(9))}}
	default:
		return corev1.NodeSelectorRequirement{Key: pick(g.rng, []string{LabelRank, testcluster.LabelGPUCount}), Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.Itoa(1 + g.rng.IntN(9))}}
	}
}

// sample is a non-empty random subset of xs, in xs's order.
func sample(r *rand.Rand, xs []string) []string {
	var out []string
	for _, x := range xs {
		if r.IntN(2) == 0 {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		out = append(out, pick(r, xs))
	}
	return out
}

// toleration tolerates one of the taints the generator uses, the cordon,
// or every taint, under either operator.
func (g *gen) toleration() corev1.Toleration {
	switch k := g.rng.IntN(10); {
	case k == 0:
		return corev1.Toleration{Operator: corev1.TolerationOpExists}
	case k == 1:
		return corev1.Toleration{Key: unschedulableKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	case k < 5:
		t := pick(g.rng, taints)
		return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists}
	case k < 7:
		// The value may be wrong, and the effect another.
		t := pick(g.rng, taints)
		return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: pick(g.rng, []string{t.Value, "other"}),
			Effect: pick(g.rng, []corev1.TaintEffect{"", t.Effect, corev1.TaintEffectNoSchedule})}
	default:
		t := pick(g.rng, taints)
		return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect}
	}
}
