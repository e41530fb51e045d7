package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/sim"
)

const (
	// openbSampleNodes is how many nodes of the openb node list each run gets.
	openbSampleNodes = 200
	// openbSeed seeds sim.Inflate.
	openbSeed = 1
	// poolLabel keeps each run's pods on its own copy of the sample.
	poolLabel = "gpupack.io/e2e-pool"
	// mostAllocated is the stock profile that packs by NodeResourcesFit.
	mostAllocated = "mostallocated"
)

// TestOpenbAgainstMostAllocated replays the openb trace (Weng et al.,
// "Beware of Fragmentation", ATC'23) with the same binary twice: the stock
// plugins with NodeResourcesFit scoring MostAllocated (cpu 1, memory 1,
// nvidia.com/gpu 3, the weights of the Kubernetes docs' bin-packing example),
// then the gpupack profile of deploy/scheduler.yaml. It asserts that gpupack
// allocates at least as many whole GPUs, and that the workload overfills the
// cluster in both runs, without which the comparison says nothing.
//
// The cluster is every (eligible/200)-th node, in file order, of the
// embedded GPU node list whose model has a GPU feature discovery product
// label, with the node's CPU, memory and GPUs. The trace's undisclosed models
// G2 and G3 (588 of 1,213 nodes, 76% of the GPUs) have none, and gpupack
// leaves GPUs of unknown models out, so they cannot take part. Both runs get
// their own copy of the sample (nodes <profile>-NNN, label poolLabel), so
// the hardware is identical and no pod is deleted between runs.
//
// The workload is the default pod list inflated by sim.Inflate to
// sim.DefaultInflation (the paper's workload size) times the sample's GPUs,
// in Inflate's shuffled order, CPU-only pods kept, asked for as stock
// Kubernetes can: whole GPUs, a fraction rounded up to one, the trace's CPU
// and memory, and a GPU-model constraint as required node affinity on the
// product label. Pods are named by their index and all exist before the
// run's scheduler starts, so both queues see the same sequence; pods never
// leave, so a pod that fails once fails for good, and a run ends when every
// pod is bound or Unschedulable.
//
// Each run logs pods bound, GPU pods bound, whole GPUs allocated, and the
// trace's GPU demand of the bound pods: the paper's "GPU allocated".
func TestOpenbAgainstMostAllocated(t *testing.T) {
	if testing.Short() {
		t.Skip("openb trace on 2 x 200 nodes: not in -short")
	}
	catalogue := gpu.Default()
	sample := openbSample(t, catalogue, openbSampleNodes)
	var sampleGPUs int64
	for _, n := range sample {
		sampleGPUs += int64(len(n.GPUs))
	}
	workload := openbWorkload(t, catalogue, gpu.Milli(sampleGPUs)*gpu.WholeGPU)
	names := make([]string, len(workload))
	traceOf := make(map[string]*cluster.Pod, len(workload))
	for i, p := range workload {
		names[i] = fmt.Sprintf("p-%05d", i)
		traceOf[names[i]] = p
	}

	c := testcluster.Start(t, testcluster.Options{})
	cs := client(t, c)
	ctx := t.Context()
	var nodes []*corev1.Node
	for _, pool := range []string{mostAllocated, schedulerName} {
		for i, n := range sample {
			nodes = append(nodes, openbNode(t, catalogue, n, fmt.Sprintf("%s-%03d", pool, i), pool))
		}
	}
	testcluster.Parallel(t, len(nodes), func(i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, nodes[i], metav1.CreateOptions{})
		return err
	})

	replay := func(profile, config string) (openbResult, []corev1.Pod) {
		t.Helper()
		c.CreateNamespace(profile)
		pods := make([]*corev1.Pod, len(workload))
		for i, p := range workload {
			pods[i] = openbPod(t, catalogue, profile, names[i], p)
		}
		testcluster.Parallel(t, len(pods), func(i int) error {
			_, err := cs.CoreV1().Pods(profile).Create(ctx, pods[i], metav1.CreateOptions{})
			return err
		})
		proc := runScheduler(t, c, "scheduler-"+profile, config)
		waitAllDecided(t, cs, proc, profile, len(pods))
		proc.Stop()
		list, err := cs.CoreV1().Pods(profile).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return countOpenb(list.Items, traceOf), list.Items
	}
	stock, _ := replay(mostAllocated, mostAllocatedConfig(t, c.Kubeconfig()))
	packed, packedPods := replay(schedulerName, SchedulerConfig(t, c.Kubeconfig(), ""))

	t.Logf("openb default x%.1f (%d pods, %d GPU pods) on %d nodes with %d GPUs: %s: %s; %s: %s",
		sim.DefaultInflation, stock.pods, stock.gpuPods, len(sample), sampleGPUs,
		mostAllocated, stock.summary(sampleGPUs), schedulerName, packed.summary(sampleGPUs))

	nodeList, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: poolLabel + "=" + schedulerName})
	if err != nil {
		t.Fatal(err)
	}
	checkNoOverAllocation(t, nodeList.Items, packedPods)
	if packed.gpus < stock.gpus {
		t.Errorf("gpupack allocated %d of %d GPUs, fewer than %s's %d", packed.gpus, sampleGPUs, mostAllocated, stock.gpus)
	}
	for _, run := range []struct {
		profile string
		result  openbResult
	}{{mostAllocated, stock}, {schedulerName, packed}} {
		if run.result.gpuBound == run.result.gpuPods {
			t.Errorf("%s bound all %d GPU pods: the workload should overfill the cluster, or the comparison says nothing", run.profile, run.result.gpuPods)
		}
	}
}

// openbSample returns every (eligible/size)-th node of the embedded GPU
// node list whose model has a product label.
func openbSample(t testing.TB, c *gpu.Catalogue, size int) []*cluster.Node {
	t.Helper()
	f, file, err := openb.Open(openb.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := cluster.LoadTraceNodes(f, file, c)
	if err != nil {
		t.Fatal(err)
	}
	var eligible []*cluster.Node
	for _, n := range all {
		if m := n.GPUModel(); m != nil && productLabel(m) != "" {
			eligible = append(eligible, n)
		}
	}
	if len(eligible) < size {
		t.Fatalf("%s: %d of %d nodes have GPUs of a model with a product label, want at least %d", file, len(eligible), len(all), size)
	}
	sample := make([]*cluster.Node, size)
	for i := range sample {
		sample[i] = eligible[i*len(eligible)/size]
	}
	return sample
}

// openbWorkload is the embedded default pod list inflated to
// sim.DefaultInflation times capacity.
func openbWorkload(t *testing.T, c *gpu.Catalogue, capacity gpu.Milli) []*cluster.Pod {
	t.Helper()
	f, file, err := openb.Open(openb.DefaultPods)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pods, err := cluster.LoadTracePods(f, file, c)
	if err != nil {
		t.Fatal(err)
	}
	workload, err := sim.Inflate(pods, capacity, sim.DefaultInflation, openbSeed)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return workload
}

// productLabel is the model's GPU feature discovery product label (its NVML
// name with dashes for spaces); "" for a model without one.
func productLabel(m *gpu.Model) string { return strings.ReplaceAll(m.Product, " ", "-") }

// openbNode is the trace node as a kwok node of the pool, checked to convert
// back to the node's model, GPUs, CPU and memory.
func openbNode(t testing.TB, c *gpu.Catalogue, n *cluster.Node, name, pool string) *corev1.Node {
	t.Helper()
	m := n.GPUModel()
	spec := testcluster.GPUNode{Product: productLabel(m), MemoryMiB: int64(m.Usable), GPUs: int64(len(n.GPUs)), Labels: map[string]string{poolLabel: pool}}
	node, err := spec.Object(name)
	if err != nil {
		t.Fatalf("trace node %s: %v", n.Name, err)
	}
	for _, list := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(n.CPU), resource.DecimalSI)
		list[corev1.ResourceMemory] = *resource.NewQuantity(int64(n.Memory)<<20, resource.BinarySI)
		list[corev1.ResourcePods] = resource.MustParse("256") // never the limit: a pod asks for at least one core
	}
	got, warnings := kube.ConvertNode(node, c)
	if got.GPUModel() != m || len(got.GPUs) != len(n.GPUs) || got.CPU != n.CPU || got.Memory != n.Memory {
		t.Fatalf("trace node %s (%d x %s, %s CPU, %s) as %s with product label %q converts to %d GPUs of %v, %s CPU, %s (warnings: %v)",
			n.Name, len(n.GPUs), m.Name, n.CPU, n.Memory, name, spec.Product, len(got.GPUs), got.GPUModel(), got.CPU, got.Memory, warnings)
	}
	return node
}

// openbPod is the trace pod as stock Kubernetes can ask for it, on the
// namespace's pool and scheduled by the profile of the namespace's name.
func openbPod(t testing.TB, c *gpu.Catalogue, namespace, name string, p *cluster.Pod) *corev1.Pod {
	t.Helper()
	requests := map[string]int64{}
	if n := wholeGPUs(p); n > 0 {
		requests[string(kube.ResourceGPU)] = n
	}
	pod := gpuPod(namespace, name, requests)
	pod.Spec.SchedulerName = namespace
	pod.Spec.NodeSelector = map[string]string{poolLabel: namespace}
	res := &pod.Spec.Containers[0].Resources
	for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(p.CPU), resource.DecimalSI)
		list[corev1.ResourceMemory] = *resource.NewQuantity(int64(p.Memory)<<20, resource.BinarySI)
	}
	if len(p.GPUModels) > 0 {
		var products []string
		for _, model := range p.GPUModels {
			label := productLabel(c.MustLookup(model))
			if label == "" {
				t.Fatalf("trace pod %s asks for GPU model %s, which has no product label to select nodes by", p.Name, model)
			}
			products = append(products, label)
		}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: kube.LabelGPUProduct, Operator: corev1.NodeSelectorOpIn, Values: products}},
			}}},
		}}
	}
	return pod
}

// wholeGPUs is how many nvidia.com/gpu the trace pod asks for: a fraction
// of one GPU takes a whole one, as stock Kubernetes cannot share.
func wholeGPUs(p *cluster.Pod) int64 {
	switch p.GPU.Kind {
	case cluster.NoGPU:
		return 0
	case cluster.Fraction:
		return 1
	default:
		return int64(p.GPU.Count)
	}
}

// mostAllocatedConfig is stockConfig with the profile mostAllocated, whose
// NodeResourcesFit scores MostAllocated.
func mostAllocatedConfig(t testing.TB, kubeconfig string) string {
	t.Helper()
	var config map[string]any
	if err := yaml.Unmarshal([]byte(stockConfig(t, kubeconfig)), &config); err != nil {
		t.Fatal(err)
	}
	config["profiles"] = []any{map[string]any{
		"schedulerName": mostAllocated,
		"pluginConfig": []any{map[string]any{
			"name": "NodeResourcesFit",
			"args": map[string]any{"scoringStrategy": map[string]any{
				"type": "MostAllocated",
				"resources": []any{
					map[string]any{"name": "cpu", "weight": 1},
					map[string]any{"name": "memory", "weight": 1},
					map[string]any{"name": string(kube.ResourceGPU), "weight": 3},
				},
			}},
		}},
	}}
	out, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// waitAllDecided waits until each of the namespace's want pods is bound or
// Unschedulable, failing if the scheduler exits first.
func waitAllDecided(t *testing.T, cs kubernetes.Interface, sched *testcluster.Process, namespace string, want int) {
	t.Helper()
	decided := 0
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := sched.Exited(); err != nil {
			return false, err
		}
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		decided = 0
		for i := range list.Items {
			if p := &list.Items[i]; p.Spec.NodeName != "" || unschedulable(p) {
				decided++
			}
		}
		return decided == want, nil
	})
	if err != nil {
		t.Fatalf("%s: %d of %d pods bound or Unschedulable: %v", namespace, decided, want, err)
	}
}

func unschedulable(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// openbResult is what one run placed of the workload.
type openbResult struct {
	pods, bound, gpuPods, gpuBound int
	// gpus is the nvidia.com/gpu of the bound pods.
	gpus int64
	// traceDemand is the trace's GPU demand of the bound pods: a fraction
	// counts as itself, not as the whole GPU it took.
	traceDemand gpu.Milli
}

// countOpenb counts the run's pods; traceOf maps a pod's name to the trace
// pod it replays.
func countOpenb(pods []corev1.Pod, traceOf map[string]*cluster.Pod) openbResult {
	r := openbResult{pods: len(pods)}
	for i := range pods {
		p := &pods[i]
		trace := traceOf[p.Name]
		q := p.Spec.Containers[0].Resources.Requests[kube.ResourceGPU]
		if trace.WantsGPU() {
			r.gpuPods++
		}
		if p.Spec.NodeName == "" {
			continue
		}
		r.bound++
		r.gpus += q.Value()
		if trace.WantsGPU() {
			r.gpuBound++
			r.traceDemand += trace.GPU.GPUMilli()
		}
	}
	return r
}

func (r openbResult) summary(sampleGPUs int64) string {
	return fmt.Sprintf("%d pods bound (%d of %d GPU pods), %d GPUs allocated (%.1f%%), trace GPU demand %.1f GPUs (%.1f%%)",
		r.bound, r.gpuBound, r.gpuPods, r.gpus, 100*float64(r.gpus)/float64(sampleGPUs),
		r.traceDemand.Ratio(), 100*r.traceDemand.Ratio()/float64(sampleGPUs))
}
