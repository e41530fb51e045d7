package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	actuator "github.com/gpupack/gpupack/internal/actuator/kube"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// The planned cluster of the Karpenter test: an H100 node whose production
// ranker the plan moves onto MIG slices, and an L4 node that a training
// job fills.
const (
	h100Type, l4Type       = "p5.48xlarge", "g6.12xlarge"
	l4WholeProduct         = "NVIDIA-L4"
	migNodePool, l4Pool    = "gpupack-h100-mig", "gpupack-l4-whole"
	karpenterConsolidation = "10s"
)

var nodePoolResource = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}

// TestKarpenterProvisionsPlanNodePools runs Karpenter's kwok provider
// against the test cluster with the NodePools `gpupack plan` writes: a
// pending GPU pod that no node can hold gets a node of its pool, which
// kube-scheduler binds it to; a node of the MIG pool comes up with the
// plan's startup taint, which holds the pod off until mig-manager has
// partitioned the node and gpupack's apply controller releases it; and
// once the pods are gone Karpenter consolidates the nodes away.
func TestKarpenterProvisionsPlanNodePools(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane and Karpenter")
	}
	c := testcluster.Start(t, testcluster.Options{})
	c.StartKarpenter(karpenterInstanceTypes())
	client := c.Client()
	ctx := t.Context()
	created := createPlanNodePools(t, c)
	if want := []string{migNodePool, l4Pool}; !slices.Equal(created, want) {
		t.Fatalf("the plan's NodePools are %v, want %v", created, want)
	}
	// The L4 node of the snapshot, full: no node of the cluster can hold
	// another GPU pod.
	c.AddGPUNode("l4-a", testcluster.GPUNode{Product: l4WholeProduct, MemoryMiB: 23034, GPUs: 4,
		Labels: map[string]string{corev1.LabelInstanceTypeStable: l4Type, wellknown.LabelPool: "l4"}})
	c.CreateNamespace("ml")
	c.CreateNamespace("shop")
	mustCreatePod(t, c, makePod("ml", "train-0").gpus(testcluster.ResourceGPU, 4).node("l4-a").obj())

	var l4Node, migNode string
	t.Run("a pending whole-GPU pod gets a node of its NodePool", func(t *testing.T) {
		mustCreatePod(t, c, makePod("ml", "train-1").gpus(testcluster.ResourceGPU, 4).selector(testcluster.LabelGPUProduct, l4WholeProduct).obj())
		l4Node = waitBound(t, c, "ml", "train-1")
		n := getNode(t, c, l4Node)
		if n.Labels[karpenterNodePoolLabel] != l4Pool || n.Labels[corev1.LabelInstanceTypeStable] != l4Type || n.Annotations["kwok.x-k8s.io/node"] != "fake" {
			t.Errorf("node %s: labels %v, annotations %v: want a kwok node of NodePool %s, instance type %s", l4Node, n.Labels, n.Annotations, l4Pool, l4Type)
		}
	})
	t.Run("a MIG NodePool's node starts tainted until mig-manager has partitioned it", func(t *testing.T) {
		mustCreatePod(t, c, makePod("shop", "ranker-2").gpus(testcluster.ResourceMIG("1g.20gb"), 1).selector(gpuoperator.DevicePluginConfigLabel, "h100-mig").obj())
		migNode = waitNodeOfPool(t, c, migNodePool)
		// Karpenter puts the NodePool's startup taints on the node as it
		// registers it.
		waitRegistered(t, c, migNode)
		n := getNode(t, c, migNode)
		if !hasTaint(n, wellknown.TaintMIGPending) || n.Labels[gpuoperator.MIGConfigLabel] != "h100-mig-1" {
			t.Fatalf("node %s of %s: taints %v, labels %v: want the %s startup taint and the plan's mig-parted config", migNode, migNodePool, n.Spec.Taints, n.Labels, wellknown.TaintMIGPending)
		}
		poll(t, "kube-scheduler to refuse ranker-2 the tainted node", func(ctx context.Context) (bool, string, error) {
			p, err := client.CoreV1().Pods("shop").Get(ctx, "ranker-2", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if p.Spec.NodeName != "" {
				return false, "", fmt.Errorf("ranker-2 bound to %s while it carries the %s taint", p.Spec.NodeName, wellknown.TaintMIGPending)
			}
			// kube-scheduler names no taint in its message; the node's only
			// taint is the startup taint (checked below).
			cond := scheduledCondition(p)
			return cond != nil && strings.Contains(cond.Message, "untolerated taint"), fmt.Sprintf("%+v", cond), nil
		})
		if n := getNode(t, c, migNode); len(n.Spec.Taints) != 1 {
			t.Fatalf("node %s has taints %v, want only %s", migNode, n.Spec.Taints, wellknown.TaintMIGPending)
		}
		// mig-manager reports the config applied; gpupack's apply
		// controller then releases the node.
		patchNodeLabel(t, c, migNode, gpuoperator.MIGConfigStateLabel, gpuoperator.MIGStateSuccess)
		a := &actuator.Actuator{Client: client, Catalogue: gpu.Default(), Component: "gpupack-karpenter-test"}
		if released, err := a.ReleaseStartupTaints(ctx); err != nil || !slices.Equal(released, []string{migNode}) {
			t.Fatalf("released %v, %v: want %s", released, err, migNode)
		}
		if got := waitBound(t, c, "shop", "ranker-2"); got != migNode {
			t.Errorf("ranker-2 bound to %s, want the MIG node %s", got, migNode)
		}
	})
	t.Run("Karpenter consolidates the empty nodes away", func(t *testing.T) {
		if l4Node == "" || migNode == "" {
			t.Skip("no nodes were provisioned")
		}
		for _, p := range []types.NamespacedName{{Namespace: "ml", Name: "train-1"}, {Namespace: "shop", Name: "ranker-2"}} {
			if err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{l4Node, migNode} {
			poll(t, "Karpenter to remove node "+name, func(ctx context.Context) (bool, string, error) {
				n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, "", nil
				}
				if err != nil {
					return false, "", err
				}
				return false, fmt.Sprintf("taints %v, deleting %v", n.Spec.Taints, n.DeletionTimestamp != nil), nil
			})
		}
		if _, err := client.CoreV1().Nodes().Get(ctx, "l4-a", metav1.GetOptions{}); err != nil {
			t.Errorf("the node Karpenter does not own: %v", err)
		}
	})
}

// karpenterNodePoolLabel is the label Karpenter puts on each node it
// launches: the NodePool's name.
const karpenterNodePoolLabel = "karpenter.sh/nodepool"

// karpenterPlan is the plan of the snapshot of the test's cluster, with
// the kwok provider's node class as the NodePools' node class.
func karpenterPlan(t *testing.T) (*plan.Plan, *cluster.Snapshot) {
	t.Helper()
	h100, l4 := gpu.Default().MustLookup("H100-80GB"), gpu.Default().MustLookup("L4")
	gpuNode := func(name string, m *gpu.Model, n int, instanceType, pool, product string) *cluster.Node {
		node := &cluster.Node{Name: name, CPU: 96000, Memory: gpu.GiB(1024), Labels: map[string]string{
			corev1.LabelInstanceTypeStable: instanceType, wellknown.LabelPool: pool, testcluster.LabelGPUProduct: product}}
		for i := range n {
			node.GPUs = append(node.GPUs, cluster.GPU{Index: i, Model: m, Memory: m.Usable})
		}
		return node
	}
	nodes := []*cluster.Node{gpuNode("h100-a", h100, 8, h100Type, "h100", h100Product), gpuNode("l4-a", l4, 4, l4Type, "l4", l4WholeProduct)}
	serve := map[string]string{"app": "ranker", "app.kubernetes.io/component": "inference", "environment": "production"}
	pods := []*cluster.Pod{
		{Namespace: "shop", Name: "ranker-0", NodeName: "h100-a", CPU: 2000, Labels: serve, GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}},
		{Namespace: "shop", Name: "ranker-1", NodeName: "h100-a", CPU: 2000, Labels: serve, GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}},
		{Namespace: "ml", Name: "train-0", NodeName: "l4-a", CPU: 2000, Labels: map[string]string{"app": "train"}, GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 4}},
	}
	s, err := cluster.NewSnapshot(gpu.Default(), nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	bursty := usage.PodFacts{Measured: true, ActiveRatio: 0.1, Pattern: usage.Bursty, VRAMUsedP95: gpu.GiB(12), IdleHeldRatio: 0.1, IdleHeldMeasured: true}
	u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{
		"shop/ranker-0": bursty, "shop/ranker-1": bursty,
		"ml/train-0": {Measured: true, ActiveRatio: 0.9, Pattern: usage.Busy, VRAMUsedP95: gpu.GiB(20), IdleHeldMeasured: true},
	}}
	o := plan.DefaultOptions()
	o.Autoscaling = &plan.AutoscalingInput{APIVersion: plan.AutoscalingAPIVersion, Kind: plan.AutoscalingKind,
		NodeClass: &plan.NodeClassRef{Group: testcluster.KWOKNodeClassGroup, Kind: testcluster.KWOKNodeClassKind, Name: testcluster.KWOKNodeClassName}}
	p, err := plan.Make(context.Background(), s, u, o)
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

// createPlanNodePools creates the NodePools of the plan's
// karpenter-nodepools.yaml, each with consolidateAfter shortened to
// karpenterConsolidation (the plan writes 5m) and all else as written,
// and returns their names.
func createPlanNodePools(t *testing.T, c *testcluster.Cluster) []string {
	t.Helper()
	p, s := karpenterPlan(t)
	files, err := planout.Files(p, s)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(files, func(f planout.File) bool { return f.Name == planout.FileKarpenter })
	if i < 0 {
		t.Fatalf("the plan wrote no %s", planout.FileKarpenter)
	}
	var names []string
	for _, doc := range strings.Split(string(files[i].Data), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", planout.FileKarpenter, err)
		}
		np := &unstructured.Unstructured{Object: obj}
		if err := unstructured.SetNestedField(np.Object, karpenterConsolidation, "spec", "disruption", "consolidateAfter"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Dynamic().Resource(nodePoolResource).Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
			t.Fatalf("NodePool %s refused: %v", np.GetName(), err)
		}
		names = append(names, np.GetName())
	}
	return names
}

// karpenterInstanceTypes are the kwok provider's instance types: the two
// of the planned nodes, on demand, each offering carrying the GPU product
// label that GPU feature discovery would put on its nodes. Karpenter
// launches a node for an extended resource only where an instance type
// declares it, so the H100 type declares 1g.20gb MIG slices, the profile
// the plan gives the ranker, beside its whole GPUs (on a cloud a
// NodeOverlay would add them).
func karpenterInstanceTypes() []testcluster.KarpenterInstanceType {
	gpuType := func(name, product string, resources corev1.ResourceList) testcluster.KarpenterInstanceType {
		resources[corev1.ResourceCPU] = resource.MustParse("96")
		resources[corev1.ResourceMemory] = resource.MustParse("1Ti")
		resources[corev1.ResourcePods] = resource.MustParse("110")
		return testcluster.KarpenterInstanceType{Name: name, Architecture: "amd64", OperatingSystems: []string{"linux"}, Resources: resources,
			Offerings: []testcluster.KarpenterOffering{{Price: 1, Available: true, Requirements: []corev1.NodeSelectorRequirement{
				{Key: plan.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-a"}},
				{Key: testcluster.LabelGPUProduct, Operator: corev1.NodeSelectorOpIn, Values: []string{product}},
			}}}}
	}
	return []testcluster.KarpenterInstanceType{
		gpuType(h100Type, h100Product, corev1.ResourceList{
			testcluster.ResourceGPU: resource.MustParse("8"), testcluster.ResourceMIG("1g.20gb"): resource.MustParse("24")}),
		gpuType(l4Type, l4WholeProduct, corev1.ResourceList{testcluster.ResourceGPU: resource.MustParse("4")}),
	}
}

func mustCreatePod(t *testing.T, c *testcluster.Cluster, p *corev1.Pod) {
	t.Helper()
	if _, err := c.Client().CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// waitBound waits until kube-scheduler has bound the pod, and returns its
// node.
func waitBound(t *testing.T, c *testcluster.Cluster, ns, name string) string {
	t.Helper()
	var node string
	poll(t, "pod "+ns+"/"+name+" to be bound", func(ctx context.Context) (bool, string, error) {
		p, err := c.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		node = p.Spec.NodeName
		cond := scheduledCondition(p)
		return node != "", fmt.Sprintf("%+v", cond), nil
	})
	return node
}

// waitNodeOfPool waits until a node of the NodePool exists, and returns
// its name.
func waitNodeOfPool(t *testing.T, c *testcluster.Cluster, pool string) string {
	t.Helper()
	var name string
	poll(t, "a node of NodePool "+pool, func(ctx context.Context) (bool, string, error) {
		nodes, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: karpenterNodePoolLabel + "=" + pool})
		if err != nil || len(nodes.Items) == 0 {
			return false, "none", err
		}
		name = nodes.Items[0].Name
		return true, "", nil
	})
	return name
}

// waitRegistered waits until kwok has made the node Ready and Karpenter has
// registered it (lifted its unregistered taint).
func waitRegistered(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	poll(t, "node "+name+" to be Ready and registered", func(ctx context.Context) (bool, string, error) {
		n, err := c.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		return ready && !hasTaint(n, "karpenter.sh/unregistered"), fmt.Sprintf("ready %v, taints %v", ready, n.Spec.Taints), nil
	})
}

func getNode(t *testing.T, c *testcluster.Cluster, name string) *corev1.Node {
	t.Helper()
	n, err := c.Client().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == key })
}

// patchNodeLabel sets one label of the node, as mig-manager does.
func patchNodeLabel(t *testing.T, c *testcluster.Cluster, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := c.Client().CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
