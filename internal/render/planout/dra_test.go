package planout_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// draPlan plans the DRA fixture of gpupack plan's tests: H100 nodes whose
// GPUs NVIDIA's DRA driver offers, beside a device plugin node.
func draPlan(t *testing.T) (*plan.Plan, *cluster.Snapshot) {
	t.Helper()
	return draPlanOf(t, "dra.cluster.yaml")
}

// draPlanOf plans a snapshot of gpupack plan's testdata with the DRA
// fixture's usage.
func draPlanOf(t *testing.T, snapshot string) (*plan.Plan, *cluster.Snapshot) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile("../../cli/plan/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s, err := cluster.ParseFile(read(snapshot), snapshot, gpu.Default())
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
	built, err := planout.DRAObjectsOf(p.DRA)
	if err != nil {
		t.Fatal(err)
	}
	want := len(built.DeviceClasses) + len(built.Claims) + len(built.ClaimTemplates)
	if len(objs) != want || len(built.Claims) == 0 || len(built.ClaimTemplates) == 0 {
		t.Fatalf("%s holds %d objects; the plan has %d (%d claims, %d templates): want them all, some of each", planout.FileDRA, len(objs), want, len(built.Claims), len(built.ClaimTemplates))
	}

	c := testcluster.Start(t, testcluster.Options{})
	dyn := c.Dynamic()
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
	// name. (The opaque parameters are the driver's to validate;
	// TestOpaqueConfigDecodesAsTheDriver decodes them as it does.)
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
	if !t.Failed() {
		checkDRAAllocation(t, c, p)
	}
}

// checkDRAAllocation lets the real kube-scheduler allocate the plan's claims
// from ResourceSlices of the driver's shape (no driver runs), with as many
// pods per workload as the plan moves: every pod of a shared workload must
// get the one GPU of its claim, on one node; every pod of a MIG workload a
// MIG device of its profile, from the claim template or through the
// profile's DeviceClass for the request workload-requests.yaml rewrites it
// to.
func checkDRAAllocation(t *testing.T, c *testcluster.Cluster, p *plan.Plan) {
	t.Helper()
	ctx := t.Context()
	mig := func(start int) testcluster.DRAMIG {
		return testcluster.DRAMIG{Profile: "2g.20gb", ProfileID: 14, Start: start, MemoryMiB: 20096}
	}
	h100 := func(minor int) testcluster.DRAGPU {
		return testcluster.DRAGPU{Minor: minor, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559}
	}
	migGPU := h100(2)
	migGPU.MIG = []testcluster.DRAMIG{mig(0), mig(2), mig(4)}
	c.AddDRANode("dra-a", h100(0), h100(1), migGPU)
	c.AddDRANode("dra-b", h100(0), h100(1))

	client := c.Client()
	pod := func(ns, name string, claim corev1.PodResourceClaim, limits corev1.ResourceList) {
		t.Helper()
		ctr := corev1.Container{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: limits}}
		pd := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{ctr}}}
		if claim.Name != "" {
			pd.Spec.ResourceClaims = []corev1.PodResourceClaim{claim}
			pd.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: claim.Name}}
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type group struct {
		ns, claim, profile string
		pods               []string
	}
	var groups []group
	for _, d := range p.Decisions {
		ns := strings.Split(d.Workload, "/")[0]
		var g group
		switch {
		case d.After.ResourceClaim != "":
			g = group{ns: ns, claim: d.After.ResourceClaim}
			for i := range d.Pods {
				name := fmt.Sprintf("%s-%d", d.After.ResourceClaim, i)
				pod(ns, name, corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: &d.After.ResourceClaim}, nil)
				g.pods = append(g.pods, name)
			}
		case d.After.ResourceClaimTemplate != "":
			g = group{ns: ns, profile: d.Profile}
			for i := range d.Pods {
				name := fmt.Sprintf("%s-%d", d.After.ResourceClaimTemplate, i)
				pod(ns, name, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: &d.After.ResourceClaimTemplate}, nil)
				g.pods = append(g.pods, name)
			}
			// The request workload-requests.yaml rewrites it to, served
			// by the profile's DeviceClass.
			name := d.After.ResourceClaimTemplate + "-extended"
			pod(ns, name, corev1.PodResourceClaim{}, corev1.ResourceList{corev1.ResourceName(d.After.Resource): resource.MustParse("1")})
			g.pods = append(g.pods, name)
		default:
			continue
		}
		groups = append(groups, g)
	}
	// The claims each pod holds once bound: its own, or the one the
	// scheduler made for its extended resource.
	claimsOf := func(pd *corev1.Pod) []string {
		var out []string
		for _, s := range pd.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				out = append(out, *s.ResourceClaimName)
			}
		}
		for _, rc := range pd.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				out = append(out, *rc.ResourceClaimName)
			}
		}
		if s := pd.Status.ExtendedResourceClaimStatus; s != nil {
			out = append(out, s.ResourceClaimName)
		}
		return out
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, g := range groups {
			for _, name := range g.pods {
				pd, err := client.CoreV1().Pods(g.ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || pd.Spec.NodeName == "" || len(claimsOf(pd)) == 0 {
					return false, err
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the plan's pods were not all bound with their claims: %v", err)
	}
	for _, g := range groups {
		devices, nodes := map[string]bool{}, map[string]bool{}
		for _, name := range g.pods {
			pd, err := client.CoreV1().Pods(g.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nodes[pd.Spec.NodeName] = true
			for _, claimName := range claimsOf(pd) {
				claim, err := client.ResourceV1().ResourceClaims(g.ns).Get(ctx, claimName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
					t.Fatalf("pod %s/%s: claim %s allocation %+v, want one device", g.ns, name, claimName, claim.Status.Allocation)
				}
				r := claim.Status.Allocation.Devices.Results[0]
				devices[r.Pool+"/"+r.Device] = true
				if g.profile != "" && !strings.Contains(r.Device, "-mig-"+strings.ReplaceAll(g.profile, ".", "")+"-") {
					t.Errorf("pod %s/%s: device %s is not a MIG %s device", g.ns, name, r.Device, g.profile)
				}
			}
		}
		switch {
		case g.claim != "" && (len(devices) != 1 || len(nodes) != 1):
			t.Errorf("claim %s/%s: its %d pods got devices %v on nodes %v; want the one GPU the plan shares among them", g.ns, g.claim, len(g.pods), devices, nodes)
		case g.profile != "" && len(devices) != len(g.pods):
			t.Errorf("MIG %s pods %v got devices %v; want one each", g.profile, g.pods, devices)
		}
	}
}
