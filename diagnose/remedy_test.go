package diagnose

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// diagnoseDoc diagnoses a snapshot written as YAML (nodes and pods, under
// the file's header) with optional usage entries, by pod.
func diagnoseDoc(t *testing.T, snapshot, usageDoc string) map[string]Finding {
	t.Helper()
	doc := "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\n" + snapshot
	s, err := cluster.ParseFile([]byte(doc), "test snapshot", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var u *Usage
	if usageDoc != "" {
		if u, err = usage.ParseFacts([]byte("apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\nwindow: 1h\n"+usageDoc), "test usage"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Diagnose(s, u)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Finding{}
	for _, f := range rep.Findings {
		out[f.Subject()] = f
	}
	return out
}

// jsonPatch is a patch written as the test expects it, compacted.
func jsonPatch(t *testing.T, typ, body string) *Patch {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(body)); err != nil {
		t.Fatalf("test patch %s: %v", body, err)
	}
	return &Patch{Type: typ, Body: b.Bytes()}
}

// TestRemedies checks, fix kind by fix kind, that each remedy is exactly
// the change the evidence calls for: the toleration the taint needs, key,
// operator, value and effect; the selector key the node's label answers;
// the affinity term relaxed no further than the node needs; the pods to
// delete; the gate by name; the MIG layout of the one GPU.
func TestRemedies(t *testing.T) {
	cases := map[string]struct {
		snapshot string
		usage    string
		pod      string
		want     func(t *testing.T) []Remedy
	}{
		"taints: one toleration each, Equal with a value, Exists without; PreferNoSchedule needs none; in place": {
			snapshot: `nodes:
- {name: l4-1, cpu: "32", memory: 128Gi, gpus: [{model: L4, count: 4}],
   taints: [{key: team, value: vision, effect: NoSchedule}, {key: soft, value: x, effect: PreferNoSchedule}, {key: example.com/gpu, effect: NoExecute}]}
pods:
- {namespace: ml, name: wait, gpu: {count: 1}}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				p := jsonPatch(t, JSONPatch, `[{"op":"add","path":"/spec/tolerations","value":[{"key":"team","operator":"Equal","value":"vision","effect":"NoSchedule"}]},
					{"op":"add","path":"/spec/tolerations/-","value":{"key":"example.com/gpu","operator":"Exists","effect":"NoExecute"}}]`)
				return []Remedy{{Kind: PodSpec, Targets: podTargets("ml", "wait"), Patch: p,
					Commands: []string{"kubectl patch pod -n ml wait --type=json -p '" + string(p.Body) + "'"},
					Note:     "a pod may gain tolerations, so this patches the pending pod; make the same change in the pod template of the workload that made it, or its next pod lacks it"}}
			},
		},
		"a pod with tolerations gains one more at the end": {
			snapshot: `nodes:
- {name: l4-1, cpu: "32", memory: 128Gi, gpus: [{model: L4, count: 4}], taints: [{key: team, value: vision, effect: NoSchedule}]}
pods:
- {namespace: ml, name: wait, gpu: {count: 1}, tolerations: [{key: other, operator: Exists}]}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				p := jsonPatch(t, JSONPatch, `[{"op":"add","path":"/spec/tolerations/-","value":{"key":"team","operator":"Equal","value":"vision","effect":"NoSchedule"}}]`)
				return []Remedy{{Kind: PodSpec, Targets: podTargets("ml", "wait"), Patch: p,
					Commands: []string{"kubectl patch pod -n ml wait --type=json -p '" + string(p.Body) + "'"},
					Note:     "a pod may gain tolerations, so this patches the pending pod; make the same change in the pod template of the workload that made it, or its next pod lacks it"}}
			},
		},
		"nodeSelector: a key the node labels otherwise takes its value, a key it lacks goes, a matching key stays": {
			snapshot: `nodes:
- {name: l4-1, cpu: "32", memory: 128Gi, labels: {nvidia.com/gpu.product: NVIDIA-L4, zone: eu-2}, gpus: [{model: L4, count: 4}]}
pods:
- {namespace: ml, name: wait, gpu: {count: 1}, nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100, pool: fast, zone: eu-2}}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				return []Remedy{{Kind: PodSpec, Targets: podTargets("ml", "wait"),
					Patch: jsonPatch(t, JSONPatch, `[{"op":"replace","path":"/spec/nodeSelector/nvidia.com~1gpu.product","value":"NVIDIA-L4"},{"op":"remove","path":"/spec/nodeSelector/pool"}]`),
					Note:  "a pod's nodeSelector and affinity cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it"}}
			},
		},
		"affinity: In gains the node's value, guarded by a test of the term": {
			snapshot: `nodes:
- {name: gpu-eu2, cpu: "96", memory: 1Ti, labels: {zone: eu-2, tier: a}, gpus: [{model: H100-80GB, count: 1}]}
pods:
- namespace: ml
  name: wait
  gpu: {count: 1}
  affinity: [{matchExpressions: [{key: tier, operator: In, values: [a]}, {key: zone, operator: In, values: [eu-1]}]}]
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				path := "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions"
				return []Remedy{{Kind: PodSpec, Targets: podTargets("ml", "wait"),
					Patch: jsonPatch(t, JSONPatch, `[{"op":"test","path":"`+path+`","value":[{"key":"tier","operator":"In","values":["a"]},{"key":"zone","operator":"In","values":["eu-1"]}]},
						{"op":"replace","path":"`+path+`","value":[{"key":"tier","operator":"In","values":["a"]},{"key":"zone","operator":"In","values":["eu-1","eu-2"]}]}]`),
					Note: "a pod's nodeSelector and affinity cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it"}}
			},
		},
		"affinity: the term with the fewest failures is relaxed; NotIn loses the node's value": {
			snapshot: `nodes:
- {name: gpu-eu2, cpu: "96", memory: 1Ti, labels: {zone: eu-2}, gpus: [{model: H100-80GB, count: 1}]}
pods:
- namespace: ml
  name: wait
  gpu: {count: 1}
  affinity:
  - {matchExpressions: [{key: zone, operator: In, values: [eu-1]}, {key: tier, operator: Exists}]}
  - {matchExpressions: [{key: zone, operator: NotIn, values: [eu-2, eu-3]}]}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				path := "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/1/matchExpressions"
				return []Remedy{{Kind: PodSpec, Targets: podTargets("ml", "wait"),
					Patch: jsonPatch(t, JSONPatch, `[{"op":"test","path":"`+path+`","value":[{"key":"zone","operator":"NotIn","values":["eu-2","eu-3"]}]},
						{"op":"replace","path":"`+path+`","value":[{"key":"zone","operator":"NotIn","values":["eu-3"]}]}]`),
					Note: "a pod's nodeSelector and affinity cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it"}}
			},
		},
		"affinity: a term left empty would match no node, so the requirement goes": {
			snapshot: `nodes:
- {name: gpu-1, cpu: "96", memory: 1Ti, gpus: [{model: H100-80GB, count: 1}]}
pods:
- namespace: ml
  name: wait
  gpu: {count: 1}
  affinity: [{matchExpressions: [{key: tier, operator: Exists}]}]
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				return []Remedy{{Kind: PodSpec, Targets: podTargets("ml", "wait"),
					Patch: jsonPatch(t, JSONPatch, `[{"op":"remove","path":"/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"}]`),
					Note:  "a pod's nodeSelector and affinity cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it"}}
			},
		},
		"a cordoned node is uncordoned, and the pod tolerates its taint": {
			snapshot: `nodes:
- {name: h100-2, cpu: "96", memory: 1Ti, unschedulable: true, taints: [{key: gpu, value: reserved, effect: NoSchedule}], gpus: [{model: H100-80GB, count: 1}]}
pods:
- {namespace: ml, name: wait, gpu: {count: 1}}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				p := jsonPatch(t, JSONPatch, `[{"op":"add","path":"/spec/tolerations","value":[{"key":"gpu","operator":"Equal","value":"reserved","effect":"NoSchedule"}]}]`)
				return []Remedy{
					{Kind: NodeChange, Targets: []Object{{Kind: "Node", Name: "h100-2"}}, Commands: []string{"kubectl uncordon h100-2"},
						Note: "uncordon the node only once the work it was cordoned for is done"},
					{Kind: PodSpec, Targets: podTargets("ml", "wait"), Patch: p,
						Commands: []string{"kubectl patch pod -n ml wait --type=json -p '" + string(p.Body) + "'"},
						Note:     "a pod may gain tolerations, so this patches the pending pod; make the same change in the pod template of the workload that made it, or its next pod lacks it"},
				}
			},
		},
		"held by GPUs too: the same patch, and the GPUs must be freed": {
			snapshot: `nodes:
- {name: l4-1, cpu: "32", memory: 128Gi, labels: {pool: b}, gpus: [{model: L4, count: 1}]}
pods:
- {namespace: ml, name: holder, gpu: {count: 1}, node: l4-1}
- {namespace: ml, name: wait, gpu: {count: 1}, nodeSelector: {pool: a}}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				return []Remedy{{Kind: PodSpec, Targets: podTargets("ml", "wait"),
					Patch: jsonPatch(t, JSONPatch, `[{"op":"replace","path":"/spec/nodeSelector/pool","value":"b"}]`),
					Note:  "a pod's nodeSelector and affinity cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it; the node is fully allocated too, so GPUs there must be freed as well"}}
			},
		},
		"a GPU model of the snapshot file: advice, with the taint's toleration beside it": {
			snapshot: `nodes:
- {name: a100-1, cpu: "64", memory: 512Gi, taints: [{key: team, value: x, effect: NoSchedule}], gpus: [{model: A100-40GB, count: 1}]}
pods:
- {namespace: ml, name: wait, gpu: {count: 1}, gpuModels: [H100-80GB]}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				p := jsonPatch(t, JSONPatch, `[{"op":"add","path":"/spec/tolerations","value":[{"key":"team","operator":"Equal","value":"x","effect":"NoSchedule"}]}]`)
				return []Remedy{
					{Kind: PodSpec, Targets: podTargets("ml", "wait"), Patch: p,
						Commands: []string{"kubectl patch pod -n ml wait --type=json -p '" + string(p.Body) + "'"},
						Note:     "a pod may gain tolerations, so this patches the pending pod; make the same change in the pod template of the workload that made it, or its next pod lacks it"},
					{Kind: Advice, Note: "gpuModels is a field of gpupack's snapshot file, not of the pod: allow A100-40GB there (a pod states a GPU model by a nodeSelector or affinity on the node's GPU label)"},
				}
			},
		},
		"idle-held holders are deleted, least active first, a command per namespace": {
			snapshot: `nodes:
- {name: h100-1, cpu: "96", memory: 1Ti, gpus: [{model: H100-80GB, count: 3}]}
pods:
- {namespace: ml, name: a, gpu: {count: 1}, node: h100-1}
- {namespace: lab, name: b, gpu: {count: 1}, node: h100-1}
- {namespace: ml, name: c, gpu: {count: 1}, node: h100-1}
- {namespace: ml, name: wait, gpu: {count: 1}}
`,
			usage: `pods:
- {pod: ml/a, activity: 0.02, pattern: idle-held}
- {pod: lab/b, activity: 0.0, pattern: idle-held}
- {pod: ml/c, activity: 0.01, pattern: idle-held}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				return []Remedy{
					{Kind: Reclaim, Targets: []Object{{"Pod", "lab", "b"}, {"Pod", "ml", "c"}, {"Pod", "ml", "a"}},
						Commands: []string{"kubectl delete pod -n lab b", "kubectl delete pod -n ml c a"},
						Note:     "a pod that a controller owns comes back when deleted: scale its workload down (or end the notebook or job) instead"},
					{Fix: 1, Kind: Advice, Note: adviceHardware},
				}
			},
		},
		"a custom gate is removed by name in place; Kueue's is advice; then the cause behind them": {
			snapshot: `schedulers: [default-scheduler]
nodes:
- {name: h100-1, cpu: "96", memory: 1Ti, labels: {pool: b}, gpus: [{model: H100-80GB, count: 1}]}
pods:
- {namespace: ml, name: held, gpu: {count: 1}, nodeSelector: {pool: a}, schedulingGates: [kueue.x-k8s.io/admission, example.com/quota-check]}
`,
			pod: "ml/held",
			want: func(t *testing.T) []Remedy {
				gate := jsonPatch(t, StrategicPatch, `{"spec":{"schedulingGates":[{"$patch":"delete","name":"example.com/quota-check"}]}}`)
				return []Remedy{
					{Kind: Advice, Note: "Kueue removes the gate itself, and the ClusterQueue and its quota are not in the snapshot"},
					{Fix: 1, Kind: SchedulingGate, Targets: podTargets("ml", "held"), Patch: gate,
						Commands: []string{"kubectl patch pod -n ml held --type=strategic -p '" + string(gate.Body) + "'"},
						Note:     "a pod's scheduling gates may be removed, so this patches the pending pod"},
					{Fix: 2, Kind: PodSpec, Targets: podTargets("ml", "held"),
						Patch: jsonPatch(t, JSONPatch, `[{"op":"replace","path":"/spec/nodeSelector/pool","value":"b"}]`),
						Note:  "a pod's nodeSelector and affinity cannot change once it exists: apply this to the pod template of the workload that made it (the same paths under /spec/template), or recreate the pod with it"},
				}
			},
		},
		"a scheduler that does not run: the default one, which does": {
			snapshot: `schedulers: [default-scheduler, gpupack]
nodes:
- {name: h100-1, cpu: "96", memory: 1Ti, gpus: [{model: H100-80GB, count: 2}]}
pods:
- {namespace: ml, name: lost, gpu: {count: 1}, schedulerName: volcano}
`,
			pod: "ml/lost",
			want: func(t *testing.T) []Remedy {
				return []Remedy{
					{Kind: PodSpec, Targets: podTargets("ml", "lost"),
						Patch: jsonPatch(t, JSONPatch, `[{"op":"replace","path":"/spec/schedulerName","value":"default-scheduler"}]`),
						Note:  "a pod's schedulerName cannot change once it exists: apply this to the pod template of the workload that made it (/spec/template/spec/schedulerName), or recreate the pod with it; or start the scheduler it names instead"},
					{Fix: 1, Kind: Advice, Note: "nothing more to change"},
				}
			},
		},
		"schedulers that run, none the default: a choice": {
			snapshot: `schedulers: [gpupack, kai]
nodes:
- {name: h100-1, cpu: "96", memory: 1Ti, gpus: [{model: H100-80GB, count: 2}]}
pods:
- {namespace: ml, name: lost, gpu: {count: 1}, schedulerName: volcano}
`,
			pod: "ml/lost",
			want: func(t *testing.T) []Remedy {
				return []Remedy{
					{Kind: Advice, Note: "several schedulers run: which one should take the pod is a choice"},
					{Fix: 1, Kind: Advice, Note: "nothing more to change"},
				}
			},
		},
		"MIG: the re-laid GPU gets the new counts, the node's other GPUs keep theirs": {
			snapshot: `nodes:
- name: h100-mig
  cpu: "96"
  memory: 1Ti
  gpus:
  - {model: H100-80GB, count: 1, sharing: mig, mig: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]}
  - {model: H100-80GB, count: 1, sharing: mig, mig: [7g.80gb]}
  - {model: H100-80GB, count: 1}
pods:
- {namespace: ml, name: a, gpu: {mig: 1g.10gb}, node: h100-mig, devices: [{gpu: 0, slice: 0}]}
- {namespace: ml, name: big, gpu: {mig: 7g.80gb}, node: h100-mig, devices: [{gpu: 1, slice: 0}]}
- {namespace: ml, name: whole, gpu: {count: 1}, node: h100-mig}
- {namespace: ml, name: wait, gpu: {mig: 3g.40gb}}
`,
			pod: "ml/wait",
			want: func(t *testing.T) []Remedy {
				config := `mig-configs:
  h100-mig-gpu0-3g-40gb:
  - devices:
    - 0
    mig-devices:
      1g.10gb: 4
      3g.40gb: 1
    mig-enabled: true
  - devices:
    - 1
    mig-devices:
      7g.80gb: 1
    mig-enabled: true
  - devices:
    - 2
    mig-enabled: false
version: v1
`
				return []Remedy{{Kind: MIGConfig, Targets: []Object{{Kind: "Node", Name: "h100-mig"}}, Config: config,
					Commands: []string{"kubectl label node h100-mig nvidia.com/mig.config=h100-mig-gpu0-3g-40gb --overwrite"},
					Note:     "add the h100-mig-gpu0-3g-40gb entry to the mig-parted config that the GPU operator's mig-manager reads, then label the node; mig-parted sets profile counts, not slice positions, and re-creates the GPU's MIG instances to apply them, so stop the pods on its running slices first (evidence names them), even those whose slices the layout keeps in place"}}
			},
		},
		"quota: hard raised to used plus the pod's request, from the quota's status; the idle holders counted against it reclaimed": {
			snapshot: `nodes:
- {name: h100-1, cpu: "96", memory: 1Ti, gpus: [{model: H100-80GB, count: 8}]}
pods:
- {namespace: ml, name: a, gpu: {count: 2}, node: h100-1}
- {namespace: ml, name: b, gpu: {count: 1}, node: h100-1}
- {namespace: ml, name: c, gpu: {count: 1}, node: h100-1}
- {namespace: web, name: d, gpu: {count: 1}, node: h100-1}
quotas:
- {namespace: ml, name: gpu-quota, hard: {requests.nvidia.com/gpu: 4}, used: {requests.nvidia.com/gpu: 4}}
quotaRefusals:
- workload: {kind: ReplicaSet, namespace: ml, name: train-7d9c5}
  pod: train-7d9c5-
  quota: gpu-quota
  requested: {requests.nvidia.com/gpu: 2}
  used: {requests.nvidia.com/gpu: 3}
  limited: {requests.nvidia.com/gpu: 4}
`,
			usage: `pods:
- {pod: ml/a, activity: 0.0, pattern: idle-held}
- {pod: ml/b, activity: 0.9, pattern: busy}
- {pod: web/d, activity: 0.0, pattern: idle-held}
`,
			pod: "replicaset ml/train-7d9c5",
			want: func(t *testing.T) []Remedy {
				p := jsonPatch(t, StrategicPatch, `{"spec":{"hard":{"requests.nvidia.com/gpu":"6"}}}`)
				return []Remedy{
					{Kind: QuotaChange, Targets: []Object{{Kind: "ResourceQuota", Namespace: "ml", Name: "gpu-quota"}}, Patch: p,
						Commands: []string{"kubectl patch resourcequota -n ml gpu-quota --type=strategic -p '" + string(p.Body) + "'"},
						Note:     "a quota is the namespace's share of the cluster's GPUs: raise it only where the GPUs are there to run the pods"},
					{Fix: 1, Kind: Reclaim, Targets: podTargets("ml", "a"), Commands: []string{"kubectl delete pod -n ml a"},
						Note: "a pod that a controller owns comes back when deleted: scale its workload down (or end the notebook or job) instead"},
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, ok := diagnoseDoc(t, tc.snapshot, tc.usage)[tc.pod]
			if !ok {
				t.Fatalf("no finding for %s", tc.pod)
			}
			if diff := cmp.Diff(tc.want(t), f.Remedies); diff != "" {
				t.Errorf("remedies (-want +got):\n%s\nfixes: %q", diff, f.Fix)
			}
		})
	}
}

// TestEveryFixHasRemedies: over the corpus, each fix has a remedy and
// each remedy belongs to a fix; advice has no artifact, and every other
// remedy has one, or a note saying why not.
func TestEveryFixHasRemedies(t *testing.T) {
	paths, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[RemedyKind]bool{}
	for _, path := range paths {
		s, u, _ := loadScenario(t, path)
		rep, err := Diagnose(s, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			has := make([]bool, len(f.Fix))
			for _, r := range f.Remedies {
				kinds[r.Kind] = true
				if r.Fix < 0 || r.Fix >= len(f.Fix) {
					t.Errorf("%s: %s: remedy %+v names fix %d of %d", path, f.Pod, r, r.Fix, len(f.Fix))
					continue
				}
				has[r.Fix] = true
				artifact := r.Patch != nil || r.Config != "" || len(r.Commands) > 0
				if r.Kind == Advice && (artifact || len(r.Targets) > 0) {
					t.Errorf("%s: %s: advice with an artifact: %+v", path, f.Pod, r)
				}
				if r.Kind != Advice && !artifact && !strings.HasPrefix(r.Note, "no patch written") {
					t.Errorf("%s: %s: %s remedy without an artifact or a reason: %+v", path, f.Pod, r.Kind, r)
				}
			}
			for i, ok := range has {
				if !ok {
					t.Errorf("%s: %s: fix %q has no remedy", path, f.Pod, f.Fix[i])
				}
			}
		}
	}
	for _, k := range []RemedyKind{PodSpec, SchedulingGate, QuotaChange, NodeChange, Reclaim, MIGConfig, Advice} {
		if !kinds[k] {
			t.Errorf("no corpus scenario has a remedy of kind %s", k)
		}
	}
}

// TestTwinRemediesNameTheirPod: pods that share a finding get remedies
// that name each its own pod.
func TestTwinRemediesNameTheirPod(t *testing.T) {
	got := diagnoseDoc(t, `nodes:
- {name: l4-1, cpu: "32", memory: 128Gi, gpus: [{model: L4, count: 4}], taints: [{key: team, value: vision, effect: NoSchedule}]}
pods:
- {namespace: ml, name: first, gpu: {count: 1}}
- {namespace: ml, name: twin, gpu: {count: 1}}
`, "")
	a, b := got["ml/first"].Remedies, got["ml/twin"].Remedies
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("remedies %+v and %+v, want one each", a, b)
	}
	if want := podTargets("ml", "twin"); !cmp.Equal(b[0].Targets, want) || !strings.Contains(b[0].Commands[0], " -n ml twin ") {
		t.Errorf("twin's remedy %+v names another pod", b[0])
	}
	if !strings.Contains(a[0].Commands[0], " -n ml first ") {
		t.Errorf("first pod's remedy %+v changed", a[0])
	}
	if string(a[0].Patch.Body) != string(b[0].Patch.Body) {
		t.Errorf("patches differ: %s and %s", a[0].Patch.Body, b[0].Patch.Body)
	}
}

// podTargets is the targets of a remedy for one pod.
func podTargets(ns, name string) []Object { return []Object{{Kind: "Pod", Namespace: ns, Name: name}} }

// TestHostileNames: a command never lets a name break out of its word,
// and a remedy for an object whose name Kubernetes would refuse (a
// snapshot file may hold any) has no artifact and says why.
func TestHostileNames(t *testing.T) {
	words := map[string]string{
		"plain":        "ml-a.b_c/d=e:f,g@h%i+j",
		"empty":        "''",
		"space":        "'a b'",
		"single quote": `'it'\''s'`,
		"newline":      "'a\nb'",
		"expansions":   "'$(rm -rf /)`x`$HOME'",
		"json":         `'[{"op":"remove"}]'`,
		"flag-like":    "--all",
	}
	in := map[string]string{"plain": "ml-a.b_c/d=e:f,g@h%i+j", "empty": "", "space": "a b", "single quote": "it's",
		"newline": "a\nb", "expansions": "$(rm -rf /)`x`$HOME", "json": `[{"op":"remove"}]`, "flag-like": "--all"}
	for name, want := range words {
		if got := shellWord(in[name]); got != want {
			t.Errorf("%s: shellWord(%q) = %s, want %s", name, in[name], got, want)
		}
	}
	cases := map[string]struct {
		objs []Object
		want string
	}{
		"valid":               {[]Object{{"Pod", "ml", "train-7b.v2"}, {"Node", "", "h100-1"}}, ""},
		"quote in a pod":      {[]Object{{"Pod", "ml", `a'b`}}, `pod name "a'b" is not a valid Kubernetes name`},
		"newline in a node":   {[]Object{{"Node", "", "n\n1"}}, `node name "n\n1" is not a valid Kubernetes name`},
		"a flag for a name":   {[]Object{{"Pod", "ml", "--all"}}, `pod name "--all" is not a valid Kubernetes name`},
		"dot in a namespace":  {[]Object{{"Pod", "a.b", "p"}}, `namespace "a.b" is not a valid Kubernetes name`},
		"upper case":          {[]Object{{"Node", "", "Node1"}}, `node name "Node1" is not a valid Kubernetes name`},
		"too long for a name": {[]Object{{"Node", "", strings.Repeat("a", 254)}}, `node name "` + strings.Repeat("a", 254) + `" is not a valid Kubernetes name`},
	}
	for name, tc := range cases {
		if got := invalidName(tc.objs); got != tc.want {
			t.Errorf("%s: invalidName = %q, want %q", name, got, tc.want)
		}
	}
	rs := []Remedy{{Kind: Reclaim, Targets: []Object{{"Pod", "ml", "ok"}, {"Pod", "ml", "x'; rm -rf /"}},
		Commands: []string{commandLine("kubectl", "delete", "pod", "-n", "ml", "ok", "x'; rm -rf /")}}}
	checkNames(rs)
	want := Remedy{Kind: Reclaim, Targets: rs[0].Targets, Note: `nothing to apply: pod name "x'; rm -rf /" is not a valid Kubernetes name`}
	if diff := cmp.Diff(want, rs[0]); diff != "" {
		t.Errorf("checked remedy (-want +got):\n%s", diff)
	}
}
