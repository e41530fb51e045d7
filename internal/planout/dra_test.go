package planout_test

import (
	"context"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/planout"
	"github.com/gpupack/gpupack/internal/testcluster"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// draPlan plans the DRA fixture of gpupack plan's tests: H100 nodes whose
// GPUs NVIDIA's DRA driver offers, beside a device plugin node.
func draPlan(t *testing.T) (*plan.Plan, *cluster.Snapshot) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile("../cli/plan/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s, err := cluster.ParseFile(read("dra.cluster.yaml"), "dra.cluster.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	u, err := usage.ParseFacts(read("dra.usage.yaml"), "dra.usage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(context.Background(), s, u, plan.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

var draGVR = map[string]schema.GroupVersionResource{
	"DeviceClass":           {Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"},
	"ResourceClaim":         {Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"},
	"ResourceClaimTemplate": {Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"},
}

// TestDRAManifestsAccepted creates every object of the DRA plan's file on
// a real kube-apiserver (v1.37.2, no feature flags), whose validation must
// accept them all, and checks that its validation is live: a claim whose
// opaque config names no valid driver is refused.
func TestDRAManifestsAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	p, s := draPlan(t)
	files, err := planout.Files(p, s)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if f.Name == planout.FileDRA {
			objs = documents(t, f.Data)
		}
	}
	want := len(p.DRA.DeviceClasses) + len(p.DRA.Claims) + len(p.DRA.ClaimTemplates)
	if len(objs) != want || len(p.DRA.Claims) == 0 || len(p.DRA.ClaimTemplates) == 0 {
		t.Fatalf("%s holds %d objects; the plan has %d (%d claims, %d templates): want them all, some of each", planout.FileDRA, len(objs), want, len(p.DRA.Claims), len(p.DRA.ClaimTemplates))
	}

	c := testcluster.Start(t, testcluster.Options{})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	namespaces := map[string]bool{}
	resource := func(obj *unstructured.Unstructured) dynamic.ResourceInterface {
		gvr, ok := draGVR[obj.GetKind()]
		if !ok || obj.GetAPIVersion() != "resource.k8s.io/v1" {
			t.Fatalf("%s %s: unexpected apiVersion/kind %s", obj.GetKind(), obj.GetName(), obj.GetAPIVersion())
		}
		if ns := obj.GetNamespace(); ns != "" {
			if !namespaces[ns] {
				c.CreateNamespace(ns)
				namespaces[ns] = true
			}
			return dyn.Resource(gvr).Namespace(ns)
		}
		return dyn.Resource(gvr)
	}
	for _, obj := range objs {
		if _, err := resource(obj).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s %s/%s refused: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	// The apiserver validates what it can of a claim's config: the driver
	// name. (The opaque parameters are the driver's to validate; package
	// nvidiadra's test decodes them as it does.)
	for _, obj := range objs {
		if obj.GetKind() != "ResourceClaim" {
			continue
		}
		bad := obj.DeepCopy()
		bad.SetName("gpupack-broken")
		configs, _, _ := unstructured.NestedSlice(bad.Object, "spec", "devices", "config")
		if err := unstructured.SetNestedField(configs[0].(map[string]any), "not a driver", "opaque", "driver"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(bad.Object, configs, "spec", "devices", "config"); err != nil {
			t.Fatal(err)
		}
		if _, err := resource(bad).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("a claim whose opaque config names driver %q: got %v, want it refused as invalid", "not a driver", err)
		}
		break
	}
}
