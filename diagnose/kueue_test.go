package diagnose

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

func amount(v int64) *int64 { return &v }

// TestKueueFit checks the quota arithmetic: per flavor, in the order
// Kueue tries them, Needed is what other Workloads hold plus what the
// Workload asks; a flavor fits when no resource lacks; an unknown
// reservation is unknown, not 0; a resource no group covers is uncovered.
func TestKueueFit(t *testing.T) {
	cq := &cluster.KueueClusterQueue{Name: "team", Quotas: []cluster.KueueQuota{
		{Group: 0, Flavor: "on-demand", Resource: "cpu", Nominal: 8000, Reserved: amount(6000)},
		{Group: 0, Flavor: "on-demand", Resource: "memory", Nominal: 64 << 30, Reserved: amount(0)},
		{Group: 0, Flavor: "spot", Resource: "cpu", Nominal: 4000, Reserved: amount(0)},
		{Group: 0, Flavor: "spot", Resource: "memory", Nominal: 32 << 30},
		{Group: 1, Flavor: "h100", Resource: "nvidia.com/gpu", Nominal: 4, Reserved: amount(3), BorrowingLimit: amount(2)},
	}}
	cases := map[string]struct {
		asks      map[string]int64
		fits      []KueueFlavorFit
		uncovered []string
	}{
		"gpus lack, cpu fits on-demand": {
			asks: map[string]int64{"cpu": 2000, "nvidia.com/gpu": 2},
			fits: []KueueFlavorFit{
				{Group: 0, Flavor: "on-demand", Fits: true, Resources: []KueueResourceFit{{Resource: "cpu", Nominal: 8000, Reserved: amount(6000), Requested: 2000, Needed: amount(8000)}}},
				{Group: 0, Flavor: "spot", Fits: true, Resources: []KueueResourceFit{{Resource: "cpu", Nominal: 4000, Reserved: amount(0), Requested: 2000, Needed: amount(2000)}}},
				{Group: 1, Flavor: "h100", Resources: []KueueResourceFit{{Resource: "nvidia.com/gpu", Nominal: 4, Reserved: amount(3), Requested: 2, Needed: amount(5), Lacks: 1, BorrowingLimit: amount(2)}}},
			},
		},
		"unknown reservation, uncovered resource": {
			asks: map[string]int64{"memory": 40 << 30, "example.com/fpga": 1, "pods": 0},
			fits: []KueueFlavorFit{
				{Group: 0, Flavor: "on-demand", Fits: true, Resources: []KueueResourceFit{{Resource: "memory", Nominal: 64 << 30, Reserved: amount(0), Requested: 40 << 30, Needed: amount(40 << 30)}}},
				{Group: 0, Flavor: "spot", Resources: []KueueResourceFit{{Resource: "memory", Nominal: 32 << 30, Requested: 40 << 30}}},
			},
			uncovered: []string{"example.com/fpga"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fits, uncovered := kueueFit(cq, tc.asks)
			if diff := cmp.Diff(tc.fits, fits, cmpopts.IgnoreUnexported(KueueResourceFit{})); diff != "" {
				t.Errorf("flavors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.uncovered, uncovered); diff != "" {
				t.Errorf("uncovered (-want +got):\n%s", diff)
			}
		})
	}
	// The places in spec.resourceGroups that a patch replaces.
	fits, _ := kueueFit(cq, map[string]int64{"memory": 1, "nvidia.com/gpu": 1})
	var got [][3]int
	for _, f := range fits {
		got = append(got, f.Resources[0].index)
	}
	if diff := cmp.Diff([][3]int{{0, 0, 1}, {0, 1, 1}, {1, 0, 0}}, got); diff != "" {
		t.Errorf("indices (-want +got):\n%s", diff)
	}
}

// kueueWorld is a snapshot with one free GPU node and Kueue's objects:
// pod ml/train-0 owns Workload ml/train, queued in LocalQueue ml/team,
// which points at ClusterQueue team (4 GPUs of flavor h100, 3 reserved);
// the Workload asks for 2.
const kueueWorld = `nodes:
- {name: n1, cpu: "32", memory: 256Gi, gpus: [{model: H100-80GB, count: 8}]}
pods:
- {namespace: ml, name: train-0, gpu: {count: 2}, labels: {kueue.x-k8s.io/queue-name: team}, schedulingGates: [kueue.x-k8s.io/admission]}
kueue:
  flavors: [h100]
  workloads:
  - {namespace: ml, name: train, queue: team, pods: [train-0], requests: {nvidia.com/gpu: 2, cpu: 2000},
     pending: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed"}
`

// TestKueueFindings: a pod held by Kueue's admission gate is explained
// from Kueue's objects, each problem with its remedy.
func TestKueueFindings(t *testing.T) {
	cq := func(extra string) string {
		return "  clusterQueues:\n  - name: team\n    cohort: research\n" + extra +
			"    quotas:\n    - {group: 0, flavor: h100, resource: cpu, nominal: 16000, reserved: 0}\n    - {group: 0, flavor: h100, resource: nvidia.com/gpu, nominal: 4, reserved: 3, borrowingLimit: 2}\n"
	}
	lq := "  localQueues:\n  - {namespace: ml, name: team, clusterQueue: team}\n"
	cases := map[string]struct {
		kueue    string
		problem  KueueProblem
		fix      string
		remedy   Remedy
		flavors  int
		pending  bool
		noFacts  bool
		world    string
		notGated bool
	}{
		"quota lacks": {
			kueue: lq + cq(""), problem: KueueQuotaLacking, flavors: 1, pending: true,
			fix: "gate kueue.x-k8s.io/admission: raise in clusterqueue team the nominalQuota of flavor h100 for nvidia.com/gpu from 4 to 5 (3 held by other Workloads + 2 asked), enough to admit workload ml/train",
			remedy: Remedy{Kind: KueueChange, Targets: []Object{{Kind: "ClusterQueue", Name: "team"}},
				Patch:    jsonPatch(t, JSONPatch, `[{"op":"test","path":"/spec/resourceGroups/0/flavors/0/name","value":"h100"},{"op":"test","path":"/spec/resourceGroups/0/flavors/0/resources/1/name","value":"nvidia.com/gpu"},{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/1/nominalQuota","value":"5"}]`),
				Commands: []string{`kubectl patch clusterqueue team --type=json -p '[{"op":"test","path":"/spec/resourceGroups/0/flavors/0/name","value":"h100"},{"op":"test","path":"/spec/resourceGroups/0/flavors/0/resources/1/name","value":"nvidia.com/gpu"},{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/1/nominalQuota","value":"5"}]'`}},
		},
		"no local queue, one cluster queue": {
			kueue: cq(""), problem: KueueNoLocalQueue, pending: true,
			fix: "gate kueue.x-k8s.io/admission: localqueue ml/team does not exist: create it, pointing at a ClusterQueue (there are: team)",
			remedy: Remedy{Kind: KueueChange, Targets: []Object{{Kind: "LocalQueue", Namespace: "ml", Name: "team"}},
				Config: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: ml\n  name: team\nspec:\n  clusterQueue: team\n"},
		},
		"no cluster queue": {
			kueue: lq, problem: KueueNoClusterQueue, pending: true,
			fix:    "gate kueue.x-k8s.io/admission: localqueue ml/team points at clusterqueue team, which does not exist: create it with quota for cpu=2, nvidia.com/gpu=2, or point the LocalQueue at a ClusterQueue that exists (there is none)",
			remedy: Remedy{Kind: Advice},
		},
		"cluster queue stopped": {
			kueue: lq + cq("    stopPolicy: Hold\n"), problem: KueueClusterQueueStopped, pending: true,
			fix: "gate kueue.x-k8s.io/admission: clusterqueue team is stopped (stopPolicy Hold): set its stopPolicy to None",
			remedy: Remedy{Kind: KueueChange, Targets: []Object{{Kind: "ClusterQueue", Name: "team"}},
				Patch:    jsonPatch(t, JSONPatch, `[{"op":"test","path":"/spec/stopPolicy","value":"Hold"},{"op":"replace","path":"/spec/stopPolicy","value":"None"}]`),
				Commands: []string{`kubectl patch clusterqueue team --type=json -p '[{"op":"test","path":"/spec/stopPolicy","value":"Hold"},{"op":"replace","path":"/spec/stopPolicy","value":"None"}]'`}},
		},
		"cluster queue inactive: flavor missing": {
			kueue: lq + cq("    active: {status: false, reason: FlavorNotFound, message: \"Can't admit new workloads; references missing ResourceFlavor(s): h100\"}\n"),
			world: strings.Replace(kueueWorld, "flavors: [h100]", "flavors: [a100]", 1), problem: KueueClusterQueueInactive, pending: true,
			fix: "gate kueue.x-k8s.io/admission: clusterqueue team names the flavor(s) h100, which do not exist, so it admits nothing: create them (or remove them from its resourceGroups)",
			remedy: Remedy{Kind: KueueChange, Targets: []Object{{Kind: "ResourceFlavor", Name: "h100"}},
				Config: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: h100\n"},
		},
		"quota free": {
			kueue: lq + strings.Replace(cq(""), "reserved: 3", "reserved: 1", 1), problem: KueueQuotaFree, flavors: 1, pending: true,
			fix:    "gate kueue.x-k8s.io/admission: clusterqueue team has the quota for workload ml/train now: Kueue admits it on its next pass unless something outside quota holds it (Kueue says: couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed)",
			remedy: Remedy{Kind: Advice},
		},
		"usage unknown": {
			kueue: lq + strings.Replace(cq(""), ", reserved: 3", "", 1), problem: KueueUsageUnknown, flavors: 1, pending: true,
			fix:    "gate kueue.x-k8s.io/admission: clusterqueue team's status states no reservation for the flavors workload ml/train could take, so what its quota lacks is unknown (is Kueue's controller running? kubectl describe clusterqueue team)",
			remedy: Remedy{Kind: Advice},
		},
		"no workload": {
			kueue: lq + cq(""), world: strings.Replace(kueueWorld, "pods: [train-0]", "pods: [train-1]", 1), problem: KueueNoWorkload,
			fix:    "gate kueue.x-k8s.io/admission: no Workload owns the pod: Kueue's controller makes one for each pod it gates (the pod integration), so check that it runs (kubectl -n kueue-system get pods) and that the pod integration is enabled in its configuration",
			remedy: Remedy{Kind: Advice},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			world := kueueWorld
			if tc.world != "" {
				world = tc.world
			}
			f := diagnoseDoc(t, world+tc.kueue, "")["ml/train-0"]
			if f.Cause != Gated {
				t.Fatalf("cause %s, want %s", f.Cause, Gated)
			}
			k := f.Evidence.Kueue
			if k == nil {
				t.Fatal("no Kueue evidence")
			}
			if k.Problem != tc.problem || len(k.Flavors) != tc.flavors || (k.Pending != "") != tc.pending {
				t.Errorf("problem %s with %d flavors, pending %q; want %s with %d", k.Problem, len(k.Flavors), k.Pending, tc.problem, tc.flavors)
			}
			if tc.problem != KueueNoWorkload && (k.Workload == nil || k.Workload.Name != "train" || k.LocalQueue == nil || k.LocalQueue.Name != "team") {
				t.Errorf("workload %v, local queue %v: want ml/train in ml/team", k.Workload, k.LocalQueue)
			}
			if len(f.Fix) == 0 || f.Fix[0] != tc.fix {
				t.Fatalf("fix %q\nwant %q", f.Fix, tc.fix)
			}
			var first []Remedy
			for _, r := range f.Remedies {
				if r.Fix == 0 {
					r.Note = ""
					first = append(first, r)
				}
			}
			if diff := cmp.Diff([]Remedy{tc.remedy}, first); diff != "" {
				t.Errorf("remedy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKueueNotRead: without Kueue in the snapshot the gate gets the
// general advice, and no Kueue evidence.
func TestKueueNotRead(t *testing.T) {
	world, _, _ := strings.Cut(kueueWorld, "kueue:")
	f := diagnoseDoc(t, world, "")["ml/train-0"]
	if f.Cause != Gated || f.Evidence.Kueue != nil || len(f.Fix) == 0 || !strings.Contains(f.Fix[0], "are not in the snapshot") && !strings.Contains(f.Remedies[0].Note, "not in the snapshot") {
		t.Errorf("cause %s, evidence %+v, fix %q", f.Cause, f.Evidence.Kueue, f.Fix)
	}
}

// TestKueueTwinsKeepTheirWorkload: two pods alike but for their Workload
// do not share a finding.
func TestKueueTwinsKeepTheirWorkload(t *testing.T) {
	doc := kueueWorld + `  - {namespace: ml, name: eval, queue: team, pods: [eval-0], requests: {nvidia.com/gpu: 2}}
  localQueues:
  - {namespace: ml, name: team, clusterQueue: team}
`
	doc = strings.Replace(doc, "pods:\n- ", "pods:\n- {namespace: ml, name: eval-0, gpu: {count: 2}, labels: {kueue.x-k8s.io/queue-name: team}, schedulingGates: [kueue.x-k8s.io/admission]}\n- ", 1)
	fs := diagnoseDoc(t, doc, "")
	for pod, w := range map[string]string{"ml/train-0": "train", "ml/eval-0": "eval"} {
		if k := fs[pod].Evidence.Kueue; k == nil || k.Workload == nil || k.Workload.Name != w {
			t.Errorf("%s: kueue evidence %+v, want workload %s", pod, k, w)
		}
	}
}

// FuzzDiagnoseKueue: whatever Kueue section a snapshot file has (absurd
// amounts, missing fields, unknown flavors, queues that point nowhere), a
// file that reads diagnoses without panic, and each gated pod's finding
// has Kueue evidence with a fix.
func FuzzDiagnoseKueue(f *testing.F) {
	for _, seed := range []string{
		kueueWorld,
		kueueWorld + "  localQueues: [{namespace: ml, name: team, clusterQueue: team}]\n  clusterQueues: [{name: team, quotas: [{flavor: h100, resource: nvidia.com/gpu, nominal: 4611686018427387903, reserved: 4611686018427387903}]}]\n",
		kueueWorld + "  localQueues: [{namespace: ml, name: team, clusterQueue: team}]\n  clusterQueues: [{name: team, quotas: [{group: 3, flavor: ghost, resource: nvidia.com/gpu, nominal: 0}]}]\n",
		kueueWorld + "  localQueues: [{namespace: ml, name: team, clusterQueue: team}]\n  clusterQueues: [{name: team, active: {status: false}}]\n",
		strings.Replace(kueueWorld, "requests: {nvidia.com/gpu: 2, cpu: 2000}", "requests: {}", 1) + "  localQueues: [{namespace: ml, name: team, clusterQueue: team}]\n  clusterQueues: [{name: team}]\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		s, err := cluster.ParseFile([]byte("apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\n"+doc), "fuzz", gpu.Default())
		if err != nil {
			return
		}
		rep, err := Diagnose(s, nil)
		if err != nil {
			return
		}
		for _, fd := range rep.Findings {
			if fd.Cause == Gated && s.Kueue != nil && fd.Evidence.Kueue != nil && len(fd.Fix) == 0 {
				t.Errorf("%s: Kueue evidence %+v but no fix", fd.Pod, fd.Evidence.Kueue)
			}
		}
	})
}
