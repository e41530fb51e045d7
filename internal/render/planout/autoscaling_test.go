package planout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// pinnedCRDs are the upstream CRDs in testdata/crds, with the module,
// version and path each was copied from (testdata/crds/README.md).
var pinnedCRDs = []struct{ file, module, version, path string }{
	{"keda.sh_scaledobjects.yaml", "github.com/kedacore/keda/v2", "v2.20.2", "config/crd/bases/keda.sh_scaledobjects.yaml"},
	{"karpenter.sh_nodepools.yaml", "sigs.k8s.io/karpenter", "v1.14.1", "pkg/apis/crds/karpenter.sh_nodepools.yaml"},
}

// TestPinnedCRDsMatchModules checks that the CRDs in testdata are the
// modules' own files at the pinned versions.
func TestPinnedCRDsMatchModules(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches modules with go mod download")
	}
	for _, c := range pinnedCRDs {
		out, err := exec.Command("go", "mod", "download", "-json", c.module+"@"+c.version).Output()
		var info struct{ Dir, Error string }
		if jerr := json.Unmarshal(out, &info); err != nil || jerr != nil || info.Error != "" {
			if os.Getenv("GPUPACK_E2E") == "" {
				t.Skipf("go mod download %s@%s: %v %s (set GPUPACK_E2E to fail instead)", c.module, c.version, err, info.Error)
			}
			t.Fatalf("go mod download %s@%s: %v %s", c.module, c.version, err, info.Error)
		}
		want, err := os.ReadFile(filepath.Join(info.Dir, c.path))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("testdata", "crds", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/crds/%s differs from %s in %s@%s; copy it again", c.file, c.path, c.module, c.version)
		}
	}
}

// spotPlan is a plan with spot advice on labelled, tainted nodes: a ranker
// scaled on tokens/s, a nightly Job that suits spot, on two L4 nodes.
func spotPlan(t *testing.T) (*plan.Plan, *cluster.Snapshot) {
	t.Helper()
	m := gpu.Default().MustLookup("L4")
	taint := cluster.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: cluster.NoSchedule}
	var nodes []*cluster.Node
	for _, name := range []string{"l4-a", "l4-b"} {
		n := &cluster.Node{Name: name, CPU: 48000, Memory: gpu.GiB(192), Taints: []cluster.Taint{taint},
			Labels: map[string]string{"eks.amazonaws.com/nodegroup": "l4-serving", "node.kubernetes.io/instance-type": "g6.12xlarge", "nvidia.com/gpu.product": "NVIDIA-L4"}}
		for i := range 4 {
			n.GPUs = append(n.GPUs, cluster.GPU{Index: i, Model: m, Memory: m.Usable})
		}
		nodes = append(nodes, n)
	}
	tol := []cluster.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: cluster.NoSchedule}}
	serve := map[string]string{"app": "ranker", "app.kubernetes.io/component": "inference", "environment": "production"}
	var pods []*cluster.Pod
	add := func(ns, name, node string, count int, labels map[string]string) {
		pods = append(pods, &cluster.Pod{Namespace: ns, Name: name, CPU: 4000, Memory: gpu.GiB(16), NodeName: node, Labels: labels, Tolerations: tol,
			GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: count}})
	}
	add("shop", "ranker-0", "l4-a", 1, serve)
	add("shop", "ranker-1", "l4-a", 1, serve)
	add("ml", "nightly-1", "l4-b", 2, map[string]string{"job-name": "nightly"})
	s, err := cluster.NewSnapshot(gpu.Default(), nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	busy := func(a float64) usage.PodFacts {
		return usage.PodFacts{Measured: true, ActiveRatio: a, Pattern: usage.Busy, VRAMUsedP95: gpu.GiB(20), IdleHeldMeasured: true}
	}
	u := &usage.Facts{Window: 24 * time.Hour, Pods: map[string]usage.PodFacts{"shop/ranker-0": busy(0.9), "shop/ranker-1": busy(0.9), "ml/nightly-1": busy(0.9)}}
	o := plan.DefaultOptions()
	o.Autoscaling = &plan.AutoscalingInput{APIVersion: plan.AutoscalingAPIVersion, Kind: plan.AutoscalingKind, Prometheus: "https://thanos.monitoring:10902",
		Workloads: []plan.AppMetric{{Workload: "shop/ranker", Kind: "Deployment", Metric: "tokens_per_second", Query: `sum(rate(vllm:generation_tokens_total{namespace="shop"}[2m]))`, Target: 1500}}}
	p, err := plan.Make(context.Background(), s, u, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spot) == 0 || len(p.Autoscaling.ScaledObjects) == 0 {
		t.Fatalf("spot plan: spot %v, ScaledObjects %d: want spot advice and a ScaledObject", p.Spot, len(p.Autoscaling.ScaledObjects))
	}
	return p, s
}

var (
	scaledObjectGVR = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	nodePoolGVR     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
)

// TestAutoscalingManifestsAccepted creates every ScaledObject and NodePool
// of the demo plan and of a plan with spot advice on a real kube-apiserver
// holding the pinned upstream CRDs, whose schema and CEL rules must accept
// them, and checks that it refuses a NodePool that breaks them.
func TestAutoscalingManifestsAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	c := testcluster.Start(t, testcluster.Options{})
	dyn := c.Dynamic()
	ctx := t.Context()
	var crds []*unstructured.Unstructured
	for _, crd := range pinnedCRDs {
		b, err := os.ReadFile(filepath.Join("testdata", "crds", crd.file))
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, documents(t, b)[0])
	}
	c.InstallCRDs(crds...)
	demo, demoSnap, err := app.DemoPlan(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	spot, spotSnap := spotPlan(t)
	namespaces := map[string]bool{}
	for name, pl := range map[string]struct {
		p *plan.Plan
		s *cluster.Snapshot
	}{"demo": {demo, demoSnap}, "spot": {spot, spotSnap}} {
		files, err := planout.Files(pl.p, pl.s)
		if err != nil {
			t.Fatal(err)
		}
		created := map[schema.GroupVersionResource]int{}
		var remove []func() error
		for _, f := range files {
			if f.Name != planout.FileKEDA && f.Name != planout.FileKarpenter {
				continue
			}
			for _, obj := range documents(t, f.Data) {
				gvr := nodePoolGVR
				r := dyn.Resource(gvr).Namespace("")
				if obj.GetKind() == "ScaledObject" {
					gvr = scaledObjectGVR
					if ns := obj.GetNamespace(); !namespaces[ns] {
						c.CreateNamespace(ns)
						namespaces[ns] = true
					}
					r = dyn.Resource(gvr).Namespace(obj.GetNamespace())
				}
				if _, err := r.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s plan, %s: %s %s refused: %v", name, f.Name, obj.GetKind(), obj.GetName(), err)
					continue
				}
				created[gvr]++
				remove = append(remove, func() error { return r.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}) })
			}
		}
		if created[scaledObjectGVR] != len(pl.p.Autoscaling.ScaledObjects) || created[nodePoolGVR] != len(pl.p.Autoscaling.NodePools) || created[nodePoolGVR] == 0 {
			t.Errorf("%s plan: created %d ScaledObjects and %d NodePools, want %d and %d (and some NodePools)", name, created[scaledObjectGVR], created[nodePoolGVR], len(pl.p.Autoscaling.ScaledObjects), len(pl.p.Autoscaling.NodePools))
		}
		// The plans name some objects alike: free the names for the next.
		for _, rm := range remove {
			if err := rm(); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	// The CRDs' validation is live: a NodePool that breaks it is refused.
	b, err := spot.KarpenterNodePools()
	if err != nil {
		t.Fatal(err)
	}
	bad := documents(t, b)[0]
	bad.SetName("gpupack-broken")
	if err := unstructured.SetNestedField(bad.Object, "Sometimes", "spec", "disruption", "consolidationPolicy"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(nodePoolGVR).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a NodePool with consolidationPolicy Sometimes: got %v, want it refused as invalid", err)
	}
}

// documents splits a multi-document YAML file into objects.
func documents(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}
