package kube

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// kueueYAML are Kueue v1beta2 objects as Kueue writes them: a pod's
// Workload (owned by the pod, as the pod integration makes it) with Kueue's
// status, its LocalQueue, a ClusterQueue with two resource groups and a
// cohort, and a ResourceFlavor.
const kueueYAML = `
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata:
    namespace: ml
    name: pod-train-0-3f2a1
    ownerReferences: [{apiVersion: v1, kind: Pod, name: train-0, uid: u1}, {apiVersion: batch/v1, kind: Job, name: j, uid: u2}]
  spec:
    queueName: team
    active: true
    podSets:
    - name: main
      count: 3
      template:
        spec:
          containers:
          - name: c
            resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {nvidia.com/gpu: "2"}}
          initContainers:
          - name: i
            resources: {requests: {cpu: "4"}}
  status:
    conditions:
    - {type: QuotaReserved, status: "False", reason: Pending, message: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 2 more needed", lastTransitionTime: "2026-12-04T00:00:00Z"}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {namespace: ml, name: stated}
  spec: {queueName: team, active: false, podSets: [{name: main, count: 9, template: {spec: {containers: [{name: c}]}}}]}
  status:
    admission: {clusterQueue: team, podSetAssignments: []}
    resourceRequests: [{name: main, resources: {nvidia.com/gpu: "4", cpu: "1"}}, {name: side, resources: {nvidia.com/gpu: "1", memory: 100Ei}}]
`

const kueueQueuesYAML = `
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: LocalQueue
  metadata: {namespace: ml, name: team}
  spec: {clusterQueue: team, stopPolicy: Hold}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: team}
  spec:
    cohortName: research
    resourceGroups:
    - coveredResources: [cpu, memory]
      flavors: [{name: default, resources: [{name: cpu, nominalQuota: "8"}, {name: memory, nominalQuota: 64Gi}]}]
    - coveredResources: [nvidia.com/gpu]
      flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: "4", borrowingLimit: "2", lendingLimit: "-1"}]}]
  status:
    conditions: [{type: Active, status: "True", reason: Ready, message: Can admit new workloads, lastTransitionTime: "2026-12-04T00:00:00Z"}]
    flavorsReservation:
    - {name: h100, resources: [{name: nvidia.com/gpu, total: "4", borrowed: "0"}]}
    - {name: default, resources: [{name: cpu, total: 1500m, borrowed: "0"}]}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: h100}
`

func unstructuredList(t *testing.T, doc string) []*unstructured.Unstructured {
	t.Helper()
	var items []map[string]any
	if err := yaml.Unmarshal([]byte(doc), &items); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, o := range items {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out
}

// TestConvertKueue: Kueue's objects are read into the snapshot's Kueue in
// Kueue's units: pods by owner reference, requests from Kueue's status
// where stated, else summed from the pod sets; quotas in spec order with
// their reservation, unknown where the status states none; an absurd or
// negative amount is left out with a warning.
func TestConvertKueue(t *testing.T) {
	var objs KueueObjects
	for _, u := range append(unstructuredList(t, kueueYAML), unstructuredList(t, kueueQueuesYAML)...) {
		var err error
		switch u.GetKind() {
		case "Workload":
			var w kueueWorkload
			if w, err = fromUnstructured[kueueWorkload](u); err == nil {
				objs.workloads = append(objs.workloads, w)
			}
		case "LocalQueue":
			var q kueueLocalQueue
			if q, err = fromUnstructured[kueueLocalQueue](u); err == nil {
				objs.localQueues = append(objs.localQueues, q)
			}
		case "ClusterQueue":
			var q kueueClusterQueue
			if q, err = fromUnstructured[kueueClusterQueue](u); err == nil {
				objs.clusterQueues = append(objs.clusterQueues, q)
			}
		case "ResourceFlavor":
			var f kueueObject
			if f, err = fromUnstructured[kueueObject](u); err == nil {
				objs.flavors = append(objs.flavors, f)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got, warnings := ConvertKueue(&objs)
	four, two, gpus, cpu := int64(4), int64(2), int64(4), int64(1500)
	want := &cluster.Kueue{
		Flavors: []string{"h100"},
		Workloads: []cluster.KueueWorkload{
			{Namespace: "ml", Name: "pod-train-0-3f2a1", Queue: "team", Pods: []string{"train-0"},
				Requests: map[string]int64{"cpu": 3 * 4000, "memory": 3 << 30, "nvidia.com/gpu": 6},
				Pending:  "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 2 more needed"},
			{Namespace: "ml", Name: "stated", Queue: "team", Inactive: true, ClusterQueue: "team",
				Requests: map[string]int64{"nvidia.com/gpu": 5, "cpu": 1000}},
		},
		LocalQueues: []cluster.KueueLocalQueue{{Namespace: "ml", Name: "team", ClusterQueue: "team", StopPolicy: "Hold"}},
		ClusterQueues: []cluster.KueueClusterQueue{{Name: "team", Cohort: "research",
			Active: &cluster.KueueCondition{Status: true, Reason: "Ready", Message: "Can admit new workloads"},
			Quotas: []cluster.KueueQuota{
				{Group: 0, Flavor: "default", Resource: "cpu", Nominal: 8000, Reserved: &cpu},
				{Group: 0, Flavor: "default", Resource: "memory", Nominal: 64 << 30},
				{Group: 1, Flavor: "h100", Resource: "nvidia.com/gpu", Nominal: four, BorrowingLimit: &two, Reserved: &gpus},
			}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kueue (-want +got):\n%s", diff)
	}
	wantWarnings := []string{
		"workload ml/stated: memory: absurd or negative, left out",
		"clusterqueue team: lendingLimit of flavor h100 for nvidia.com/gpu: -1 is absurd or negative, left out",
	}
	if diff := cmp.Diff(wantWarnings, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestLoadWithoutKueue: a cluster without Kueue's CRDs has no Kueue, and
// says nothing about it.
func TestLoadWithoutKueue(t *testing.T) {
	st, err := Load(t.Context(), fake.NewClientset(), gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot.Kueue != nil {
		t.Errorf("kueue = %+v, want none", st.Snapshot.Kueue)
	}
	for _, w := range st.Warnings {
		if strings.Contains(strings.ToLower(w), "kueue") {
			t.Errorf("warning %q about Kueue, which is not installed", w)
		}
	}
}

// TestKueueServedWarnings: a Kueue that serves only older versions, and a
// client that cannot reach Kueue's objects, are each a warning that says
// so; Load still reads the rest.
func TestKueueServedWarnings(t *testing.T) {
	cases := map[string]struct{ version, want string }{
		"only v1beta1":         {"v1beta1", "Kueue serves kueue.x-k8s.io v1beta1, not v1beta2 (Kueue before v0.15): gpupack reads no Kueue Workload"},
		"v1beta2, fake client": {"v1beta2", "the client has no HTTP connection of its own (a fake), so no Kueue object is read"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			d := client.Discovery().(*fakediscovery.FakeDiscovery)
			d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: KueueGroup + "/" + tc.version,
				APIResources: []metav1.APIResource{{Name: "workloads", Namespaced: true, Kind: "Workload"}}})
			st, err := Load(t.Context(), client, gpu.Default())
			if err != nil {
				t.Fatal(err)
			}
			if st.Snapshot.Kueue != nil || !slices.Contains(st.Warnings, tc.want) {
				t.Errorf("kueue %+v, warnings %q; want none and %q", st.Snapshot.Kueue, st.Warnings, tc.want)
			}
		})
	}
}
