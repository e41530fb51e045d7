package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

func kueueGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: kube.KueueGroup, Version: kube.KueueVersion, Resource: resource}
}

// createKueue creates a Kueue object written as YAML, then writes its
// status (the status subresource), as Kueue's controller would; strict
// field validation makes the apiserver refuse any field that Kueue's CRD
// does not have, so the fields gpupack reads are Kueue's.
func createKueue(t *testing.T, dyn dynamic.Interface, resource, doc, status string) *unstructured.Unstructured {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	ctx := t.Context()
	client := dynamic.ResourceInterface(dyn.Resource(kueueGVR(resource)))
	if ns := u.GetNamespace(); ns != "" {
		client = dyn.Resource(kueueGVR(resource)).Namespace(ns)
	}
	created, err := client.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("create %s %s: %v", resource, u.GetName(), err)
	}
	if status == "" {
		return created
	}
	var st map[string]any
	if err := yaml.Unmarshal([]byte(status), &st); err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = st
	updated, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("write the status of %s %s: %v", resource, u.GetName(), err)
	}
	return updated
}

// TestLiveKueueGated: Kueue's real CRDs on the real control plane, with a
// ResourceFlavor, a ClusterQueue of 4 GPUs of which other Workloads hold 3,
// a LocalQueue, and two pods held by Kueue's admission gate, each with its
// Workload (owned by the pod, as Kueue's pod integration makes it). No
// Kueue controller runs: the test gates the pods and writes the Workloads'
// and the ClusterQueue's status itself, in Kueue's words. gpupack's live
// diagnosis names each pod's Workload and queues: for the pod that asks
// for 2 GPUs, that flavor h100 lacks 1 (nominal 4, reserved 3, 5 needed),
// with a patch that the apiserver accepts and that sets nominalQuota to
// 5; for the pod whose LocalQueue does not exist, that it does not. It
// reads as the deployed reader role, and its Watcher sees the same
// Workloads.
func TestLiveKueueGated(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("h100-0", testcluster.GPUNode{Product: h100Product, MemoryMiB: 81559, GPUs: 8})
	c.InstallKueueCRDs()
	const ns = "ml"
	c.CreateNamespace(ns)
	ctx, dyn := t.Context(), c.Dynamic()

	createKueue(t, dyn, "resourceflavors", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}\nspec: {nodeLabels: {nvidia.com/gpu.product: "+h100Product+"}}\n", "")
	createKueue(t, dyn, "clusterqueues", `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  cohortName: research
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: "32"}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: "4", borrowingLimit: "2"}
`, `conditions:
- {type: Active, status: "True", reason: Ready, message: Can admit new workloads, lastTransitionTime: "2026-12-04T00:00:00Z"}
flavorsReservation:
- name: h100
  resources:
  - {name: cpu, total: "3", borrowed: "0"}
  - {name: memory, total: 12Gi, borrowed: "0"}
  - {name: nvidia.com/gpu, total: "3", borrowed: "0"}
pendingWorkloads: 2
reservingWorkloads: 3
admittedWorkloads: 3
`)
	createKueue(t, dyn, "localqueues", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {namespace: ml, name: team}\nspec: {clusterQueue: team}\n", "")

	// The gated pods, and their Workloads as the pod integration makes them.
	for _, p := range []struct{ pod, queue, workload, pending string }{
		{"train-0", "team", "pod-train-0-5f1c2", "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed"},
		{"eval-0", "nightly", "pod-eval-0-9b3d7", "LocalQueue nightly doesn't exist"},
	} {
		pod := makePod(ns, p.pod).gpus(testcluster.ResourceGPU, 2).obj()
		pod.Labels = map[string]string{"kueue.x-k8s.io/queue-name": p.queue, "kueue.x-k8s.io/managed": "true"}
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
		created, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Kueue copies the pod's spec into its pod set, without the gate.
		spec := *pod.Spec.DeepCopy()
		spec.SchedulingGates = nil
		template, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		specYAML, err := yaml.Marshal(template["spec"])
		if err != nil {
			t.Fatal(err)
		}
		doc := fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  namespace: %s
  name: %s
  ownerReferences: [{apiVersion: v1, kind: Pod, name: %s, uid: %s}]
spec:
  queueName: %s
  podSets:
  - name: main
    count: 1
    template:
      spec: %s
`, ns, p.workload, created.Name, created.UID, p.queue, jsonLine(t, specYAML))
		createKueue(t, dyn, "workloads", doc, fmt.Sprintf(`conditions:
- {type: QuotaReserved, status: "False", reason: Pending, message: %q, lastTransitionTime: "2026-12-04T00:00:00Z"}
`, p.pending))
	}

	// gpupack reads as the deployed reader role (deploy/rbac.yaml) allows.
	applyRBAC(t, c.Client())
	reader := c.ClientAs("gpupack-system", "gpupack")
	st, err := kube.Load(ctx, reader, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot.Kueue == nil {
		t.Fatalf("no Kueue read; warnings %q", st.Warnings)
	}
	for _, w := range st.Warnings {
		if strings.Contains(strings.ToLower(w), "kueue") {
			t.Errorf("Load warned: %s", w)
		}
	}
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	findings := map[string]diagnose.Finding{}
	for _, f := range rep.Findings {
		findings[f.Pod] = f
	}
	train, eval := findings[ns+"/train-0"], findings[ns+"/eval-0"]
	if train.Cause != diagnose.Gated || train.Evidence.Kueue == nil || eval.Cause != diagnose.Gated || eval.Evidence.Kueue == nil {
		t.Fatalf("train-0: %s %+v; eval-0: %s %+v; warnings %q", train.Cause, train.Evidence.Kueue, eval.Cause, eval.Evidence.Kueue, st.Warnings)
	}
	gpus, reserved, needed, borrow := int64(2), int64(3), int64(5), int64(2)
	cpuReserved, cpuNeeded, memReserved, memNeeded := int64(3000), int64(4000), int64(12<<30), int64(16<<30)
	want := &diagnose.KueueFacts{
		Problem:      diagnose.KueueQuotaLacking,
		Workload:     &diagnose.Object{Kind: "Workload", Namespace: ns, Name: "pod-train-0-5f1c2"},
		LocalQueue:   &diagnose.Object{Kind: "LocalQueue", Namespace: ns, Name: "team"},
		ClusterQueue: &diagnose.Object{Kind: "ClusterQueue", Name: "team"},
		Cohort:       "research",
		Requests:     map[string]int64{"cpu": 1000, "memory": 4 << 30, "nvidia.com/gpu": gpus},
		Pending:      "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed",
		Flavors: []diagnose.KueueFlavorFit{{Flavor: "h100", Resources: []diagnose.KueueResourceFit{
			{Resource: "cpu", Nominal: 32000, Reserved: &cpuReserved, Requested: 1000, Needed: &cpuNeeded},
			{Resource: "memory", Nominal: 256 << 30, Reserved: &memReserved, Requested: 4 << 30, Needed: &memNeeded},
			{Resource: "nvidia.com/gpu", Nominal: 4, Reserved: &reserved, Requested: gpus, Needed: &needed, Lacks: 1, BorrowingLimit: &borrow},
		}}},
	}
	if diff := cmp.Diff(want, train.Evidence.Kueue, cmpopts.IgnoreUnexported(diagnose.KueueResourceFit{})); diff != "" {
		t.Errorf("train-0's Kueue evidence (-want +got):\n%s", diff)
	}
	if k := eval.Evidence.Kueue; k.Problem != diagnose.KueueNoLocalQueue || k.Workload == nil || k.Workload.Name != "pod-eval-0-9b3d7" || k.LocalQueue == nil || k.LocalQueue.Name != "nightly" {
		t.Errorf("eval-0's Kueue evidence %+v; want no-local-queue ml/nightly of Workload pod-eval-0-9b3d7", k)
	}
	t.Logf("train-0: %q", train.Fix)
	t.Logf("eval-0: %q", eval.Fix)

	// The remedy's patch, applied to the real apiserver, sets the quota.
	var patch *diagnose.Patch
	for _, r := range train.Remedies {
		if r.Kind == diagnose.KueueChange && r.Patch != nil {
			patch = r.Patch
		}
	}
	if patch == nil || patch.Type != diagnose.JSONPatch {
		t.Fatalf("no JSON patch among train-0's remedies %+v", train.Remedies)
	}
	patched, err := dyn.Resource(kueueGVR("clusterqueues")).Patch(ctx, "team", types.JSONPatchType, patch.Body, metav1.PatchOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("the remedy's patch %s: %v", patch.Body, err)
	}
	groups, _, _ := unstructured.NestedSlice(patched.Object, "spec", "resourceGroups")
	flavors, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "flavors")
	resources, _, _ := unstructured.NestedSlice(flavors[0].(map[string]any), "resources")
	if got := resources[2].(map[string]any)["nominalQuota"]; got != "5" {
		t.Errorf("nominalQuota of nvidia.com/gpu after the patch: %v, want 5", got)
	}

	// serve's Watcher sees the same Workloads from its informers.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := kube.NewWatcher(reader, gpu.Default())
	if err := w.Start(wctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Watcher to see the Workloads", func(context.Context) (bool, string, error) {
		ws, err := w.State()
		if err != nil {
			return false, "", err
		}
		k := ws.Snapshot.Kueue
		if k == nil {
			return false, fmt.Sprintf("no Kueue; warnings %q", ws.Warnings), nil
		}
		return len(k.Workloads) == 2 && len(k.ClusterQueues) == 1 && len(k.LocalQueues) == 1, fmt.Sprintf("kueue %+v", k), nil
	})
}

// jsonLine writes YAML as one line of JSON, which is YAML too.
func jsonLine(t *testing.T, doc []byte) string {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
