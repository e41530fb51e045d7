package cluster

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/gpu"
)

func TestParseFileRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseFile(data, "small.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.GPUCount(); got != 14 {
		t.Errorf("GPUCount = %d, want 14", got)
	}
	if t4, _ := s.Node("t4-1"); !t4.GPUs[1].SharedResource || t4.GPUs[1].Sharing != MPS {
		t.Errorf("t4-1 GPU 1 = %+v, want MPS offered as the shared resource", t4.GPUs[1])
	}
	n, _ := s.Node("h100-1")
	if got, want := n.GPUs[7].Layout.String(), "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4"; got != want {
		t.Errorf("MIG layout = %s, want %s", got, want)
	}
	if err := n.GPUs[7].Model.MIG.Validate(n.GPUs[7].Layout); err != nil {
		t.Errorf("layout: %v", err)
	}
	if got := len(s.Pending()); got != 1 {
		t.Errorf("pending = %d, want 1", got)
	}
	again, out := readBack(t, s)
	out2, _ := MarshalFile(again)
	if diff := cmp.Diff(string(out), string(out2)); diff != "" {
		t.Errorf("round trip changed the file (-first +second):\n%s", diff)
	}
}

func TestParseFileErrors(t *testing.T) {
	head := "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\n"
	node := "nodes:\n- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: T4, count: 1}]}\n"
	cases := map[string]parseErrorCase{
		"unknown field":     {head + node + "extra: 1\n", "unknown field"},
		"wrong version":     {"apiVersion: v0\nkind: ClusterSnapshot\n", "apiVersion"},
		"unknown model":     {head + "nodes:\n- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: RTX-9999, count: 1}]}\n", "nodes[0]: gpus[0]: model: unknown GPU model"},
		"bad cpu":           {head + "nodes:\n- {name: n, cpu: lots, memory: 8Gi}\n", "nodes[0]: cpu"},
		"negative memory":   {head + "nodes:\n- {name: n, cpu: \"1\", memory: -5Gi}\n", "nodes[0]: memory"},
		"mig on t4":         {head + "nodes:\n- {name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: T4, count: 1, sharing: mig, mig: [1g.5gb]}]}\n", "does not support MIG"},
		"bad mig layout":    {head + "nodes:\n- {name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: A100-40GB, count: 1, sharing: mig, mig: [4g.20gb, 4g.20gb]}]}\n", "gpus[0]: mig"},
		"missing node":      {head + node + "pods:\n- {name: p, gpu: {count: 1}, node: ghost}\n", "not in the snapshot"},
		"bad fraction":      {head + node + "pods:\n- {name: p, gpu: {milli: 1500}}\n", "pods[0] (p): gpu: milli"},
		"contradictory":     {head + node + "pods:\n- {name: p, gpu: {mig: 1g.10gb, count: 1}}\n", "cannot also ask"},
		"empty request":     {head + node + "pods:\n- {name: p, gpu: {}}\n", "empty GPU request"},
		"device range":      {head + node + "pods:\n- {name: p, gpu: {count: 1}, node: n, devices: [{gpu: 3}]}\n", "pods[0].devices[0].gpu"},
		"duplicate pod":     {head + node + "pods:\n- {name: p}\n- {name: p}\n", "listed twice"},
		"bad taint":         {head + "nodes:\n- {name: n, cpu: \"1\", memory: 1Gi, taints: [{key: a, effect: Never}]}\n", "taints[0].effect"},
		"mps clients":       {head + "nodes:\n- {name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: L4, count: 1, sharing: mps, replicas: 64}]}\n", "at most 48"},
		"not yaml":          {"nodes: [\n", "small.yaml"},
		"shared exclusive":  {head + "nodes:\n- {name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: L4, count: 1, sharedResource: true}]}\n", "gpus[0]: sharedResource"},
		"shared no count":   {head + node + "pods:\n- {name: p, gpu: {milli: 500, shared: true}}\n", "gpu: shared"},
		"count as string":   {head + "nodes:\n- name: n\n  cpu: \"8\"\n  memory: 8Gi\n  gpus:\n  - {model: T4, count: \"8\"}\n", `small.yaml:8: nodes[0].gpus[0].count: "8" is a string; want an integer`},
		"fraction count":    {head + node + "pods:\n- {name: p, gpu: {count: 1.5}}\n", "small.yaml:6: pods[0].gpu.count: 1.5 is not a whole number; want an integer"},
		"count overflow":    {head + "nodes:\n- {name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: T4, count: 99999999999999999999}]}\n", "small.yaml:4: nodes[0].gpus[0].count: 99999999999999999999 is out of range"},
		"nodes a mapping":   {head + "nodes: {n: 1}\n", "small.yaml:3: nodes: a mapping; want a list"},
		"json type":         {`{"apiVersion": "gpupack.io/v1alpha1", "kind": "ClusterSnapshot",` + "\n" + `"nodes": [{"name": "n", "cpu": "1", "memory": "1Gi", "unschedulable": "yes"}]}`, `small.yaml:2: nodes[0].unschedulable: "yes" is a string; want true or false`},
		"unknown, line":     {head + node + "pods:\n- {name: p, nodeName: n}\n", `small.yaml:6: pods[0]: unknown field "nodeName"`},
		"case differs":      {head + node + "pods:\n- {Name: p}\n", `unknown field "Name"`},
		"second document":   {head + node + "---\n" + head + "nodes: []\n", "small.yaml:5: a second document"},
		"trailing garbage":  {`{"apiVersion": "gpupack.io/v1alpha1", "kind": "ClusterSnapshot", "nodes": []} ]`, "text after the end of the document"},
		"repeated field":    {head + node + "nodes: []\n", "small.yaml:5: nodes: given twice (first at line 3)"},
		"slash in name":     {head + node + "pods:\n- {namespace: ml/x, name: p}\n", `pods[0] (p): namespace: "ml/x"`},
		"zero maxSkew":      {head + node + "pods:\n- {name: p, topologySpreadConstraints: [{maxSkew: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]}\n", "pods[0] (p): topologySpreadConstraints[0].maxSkew: 0"},
		"bad unsatisfiable": {head + node + "pods:\n- {name: p, topologySpreadConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: Never}]}\n", "topologySpreadConstraints[0].whenUnsatisfiable"},
		"bad policy":        {head + node + "pods:\n- {name: p, topologySpreadConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: honor}]}\n", "nodeTaintsPolicy"},
		"affinity no key":   {head + node + "pods:\n- {name: p, podAffinity: [{labelSelector: {matchLabels: {app: a}}}]}\n", "podAffinity[0].topologyKey: missing"},
		"selector Gt":       {head + node + "pods:\n- {name: p, podAntiAffinity: [{topologyKey: z, labelSelector: {matchExpressions: [{key: a, operator: Gt, values: [\"1\"]}]}}]}\n", "podAntiAffinity[0].labelSelector: matchExpressions[0].operator"},
	}
	checkParseErrors(t, "small.yaml", cases)
}

func TestParseFileDefaultNamespace(t *testing.T) {
	doc := "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes: []\npods: [{name: p}, {namespace: ml, name: p}]\n"
	s, err := ParseFile([]byte(doc), "c.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.Pods {
		got = append(got, p.Key())
	}
	if diff := cmp.Diff([]string{"default/p", "ml/p"}, got); diff != "" {
		t.Errorf("pod keys (-want +got):\n%s", diff)
	}
}

func FuzzParseFile(f *testing.F) {
	data, _ := os.ReadFile("testdata/small.yaml")
	f.Add(data)
	f.Add([]byte("apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes: [{name: n, cpu: 1, memory: 1Gi}]\n"))
	dra, _ := os.ReadFile("testdata/dra.yaml")
	f.Add(dra)
	head := "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\n"
	for _, seed := range []string{
		head + "nodes: [{name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: T4, count: \"8\"}]}]\n",
		head + "nodes: [{name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: T4, count: -1}]}]\n",
		head + "nodes: [{name: n, cpu: \"1\", memory: 1Gi, gpus: [{model: T4, count: 99999999999999999999}]}]\n",
		head + "nodes: []\n---\n" + head + "nodes: []\n",
		`{"apiVersion": "gpupack.io/v1alpha1", "kind": "ClusterSnapshot", "nodes": []} garbage`,
		head + "nodes: [&n {name: n, cpu: \"1\", memory: 1Gi}]\npods: [{name: p, node: n, <<: {gpu: {count: 1}}}, *n]\n",
		head + "nodes: []\npods: [{name: p, gpu: {count: 1.5}}]\n",
		head + "nodes: []\nkueue: {workloads: [{namespace: ml, name: w, queue: q, requests: {cpu: 4611686018427387903}}], clusterQueues: [{name: q, quotas: [{flavor: f, resource: nvidia.com/gpu, nominal: 4, reserved: 3}]}]}\n",
		head + "nodes: []\nquotas: [{namespace: ml, name: q, hard: {requests.nvidia.com/gpu: 4}, used: {requests.nvidia.com/gpu: 4}}]\nquotaRefusals: [{workload: {kind: Job, namespace: ml, name: j}, quota: q, requested: {requests.nvidia.com/gpu: 1}, used: {requests.nvidia.com/gpu: 4}, limited: {requests.nvidia.com/gpu: 4}}]\n",
		head + "namespaces: {ml: {team: a}}\nnodes: []\npods: [{name: p, labels: {app: w}, topologySpreadConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, minDomains: 2, labelSelector: {matchExpressions: [{key: app, operator: In, values: [w]}]}, matchLabelKeys: [app]}], podAffinity: [{topologyKey: z, labelSelector: {}, namespaceSelector: {matchLabels: {team: a}}}], podAntiAffinity: [{topologyKey: h, mismatchLabelKeys: [app], labelSelector: {matchLabels: {app: w}}}]}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseFile(data, "fuzz", gpu.Default())
		if err != nil {
			return
		}
		out, err := MarshalFile(s)
		if err != nil {
			t.Fatalf("parsed snapshot cannot be written: %v", err)
		}
		again, err := ParseFile(out, "again", gpu.Default())
		if err != nil {
			t.Fatalf("written snapshot cannot be read back: %v\n%s", err, out)
		}
		for i := range s.Pods {
			if diff := cmp.Diff(s.Pods[i].Claims, again.Pods[i].Claims, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("pod %d's claims changed in the round trip (-first +second):\n%s", i, diff)
			}
		}
	})
}

func TestQuantities(t *testing.T) {
	cpu := map[string]gpu.CPUMilli{"8": 8000, "0.5": 500, "250m": 250, "1.25": 1250}
	for in, want := range cpu {
		if got, err := ParseCPU(in); err != nil || got != want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	mem := map[string]gpu.MiB{"64Gi": 65536, "512Mi": 512, "1Ti": 1 << 20, "1G": 954, "1048576": 1, "1.5Gi": 1536}
	for in, want := range mem {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "NaN", "Inf", "1e400"} {
		if _, err := ParseCPU(bad); err == nil {
			t.Errorf("ParseCPU(%q) accepted", bad)
		}
		if _, err := ParseMemory(bad); err == nil {
			t.Errorf("ParseMemory(%q) accepted", bad)
		}
	}
}

// TestParseFileUnlisted: a GPU the catalogue does not list is read back
// from a snapshot when the file says it is unlisted, and written so again.
func TestParseFileUnlisted(t *testing.T) {
	doc := "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes:\n" +
		"- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: NVIDIA-B300-SXM6-AC, count: 2, memory: 275040Mi, unlisted: true}]}\n"
	c, err := gpu.ParseCatalogue([]byte("currency: EUR\nmodels: [{name: T4, usableMiB: 15360}]"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseFile([]byte(doc), "u.yaml", c)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Nodes[0].GPUs[1]
	if !g.Model.Unlisted || g.Model.Name != "NVIDIA-B300-SXM6-AC" || g.Memory != 275040 {
		t.Errorf("GPU = %+v (model %+v), want the unlisted B300 with 275040 MiB", g, g.Model)
	}
	out, err := MarshalFile(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "unlisted: true") || !strings.Contains(string(out), "memory: ") {
		t.Errorf("written file lost the unlisted model:\n%s", out)
	}
	fresh, _ := gpu.ParseCatalogue([]byte("currency: EUR\nmodels: [{name: T4, usableMiB: 15360}]"), "c.yaml")
	if _, err := ParseFile([]byte(strings.Replace(doc, ", unlisted: true", "", 1)), "u.yaml", fresh); err == nil || !strings.Contains(err.Error(), "add `unlisted: true`") {
		t.Errorf("an unknown model without unlisted: err = %v", err)
	}
}

// TestUnlistedMIGProfileReadsBack: a pod that asks for a MIG profile no
// catalogue model has, as a live pod may, is written with unlisted: true and
// reads back; without it the profile is refused as a likely typo.
func TestUnlistedMIGProfileReadsBack(t *testing.T) {
	n := &Node{Name: "n", CPU: 8000, Memory: 8192}
	p := &Pod{Namespace: "ml", Name: "odd", GPU: Request{Kind: MIGSlice, Profile: "5g.60gb"}}
	s, err := NewSnapshot(gpu.Default(), []*Node{n}, []*Pod{p})
	if err != nil {
		t.Fatal(err)
	}
	back, out := readBack(t, s)
	if got := back.Pods[0].GPU; got != p.GPU {
		t.Errorf("read back %+v, want %+v", got, p.GPU)
	}
	typo := strings.Replace(string(out), "unlisted: true", "", 1)
	if _, err := ParseFile([]byte(typo), "typo.yaml", gpu.Default()); err == nil || !strings.Contains(err.Error(), "unlisted: true") {
		t.Errorf("an unknown profile without unlisted: err = %v", err)
	}
}

// TestParseFileDRA: DRA devices and claims (v1alpha2) are read, written and
// read back unchanged, MIG slice devices follow their slices when Fit
// reorders the layout, and a v1alpha1 file still reads.
func TestParseFileDRA(t *testing.T) {
	data, err := os.ReadFile("testdata/dra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseFile(data, "dra.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := s.Node("dra-1")
	if got := len(n.GPUs); got != 3 {
		t.Fatalf("GPUs = %d, want 3", got)
	}
	if d := n.GPUs[1].DRA; d == nil || d.Device != "gpu-1" || d.Pool != "dra-1" || d.Driver != "gpu.nvidia.com" || n.GPUs[1].UUID != "GPU-dra-1-1" {
		t.Errorf("GPU 1 DRA = %+v (UUID %q), want gpu.nvidia.com/dra-1/gpu-1, GPU-dra-1-1", d, n.GPUs[1].UUID)
	}
	mig := n.GPUs[2]
	for i, sl := range mig.Layout {
		want := strings.ReplaceAll(sl.Profile, ".", "")
		if name := mig.DRA.SliceDevices[i]; !strings.Contains(name, "-mig-"+want+"-") {
			t.Errorf("slice %d (%s) is device %s, want a %s device", i, sl.Profile, name, sl.Profile)
		}
	}
	train := s.Pods[0]
	if diff := cmp.Diff([]ClaimDevice{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "dra-1", Device: "gpu-1"}}, train.Claims[0].Allocated); diff != "" {
		t.Errorf("train's allocation (-want +got):\n%s", diff)
	}
	if out := checkRoundTrip(t, s); !strings.HasPrefix(string(out), "apiVersion: "+FileAPIVersion+"\n") {
		t.Errorf("written file does not start with apiVersion %s:\n%s", FileAPIVersion, out)
	}

	old := strings.Replace(string(data), FileAPIVersion, FileAPIVersionV1Alpha1, 1)
	if _, err := ParseFile([]byte(old), "old.yaml", gpu.Default()); err == nil || !strings.Contains(err.Error(), "nodes[0].gpus[0].dra: DRA devices need apiVersion "+FileAPIVersion) {
		t.Errorf("DRA fields in a v1alpha1 file: err = %v", err)
	}
}

func TestParseFileDRAErrors(t *testing.T) {
	head := "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\n"
	dev := func(dra string) string {
		return head + "nodes:\n- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: T4, count: 1, dra: " + dra + "}]}\n"
	}
	claim := func(c string) string {
		return head + "nodes: []\npods: [{name: p, claims: [" + c + "]}]\n"
	}
	cases := map[string]parseErrorCase{
		"count":                 {strings.Replace(dev("{driver: d, pool: p, device: x}"), "count: 1", "count: 2", 1), "a DRA device is one GPU; count is 2"},
		"no driver":             {dev("{pool: p, device: x}"), "nodes[0]: gpus[0]: dra: driver: missing"},
		"no device":             {dev("{driver: d, pool: p}"), "dra: device: missing"},
		"slices not mig":        {dev("{driver: d, pool: p, sliceDevices: [a]}"), "sliceDevices: given but sharing is exclusive"},
		"twice":                 {head + "nodes:\n- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: T4, count: 1, dra: {driver: d, pool: p, device: x}}, {model: T4, count: 1, dra: {driver: d, pool: p, device: x}}]}\n", "DRA device d/p/x is offered twice"},
		"no podClaim":           {claim("{name: c}"), "pods[0] (p): claims[0]: podClaim: give exactly one of podClaim"},
		"no class":              {claim("{podClaim: c, requests: [{name: r, count: 1}]}"), "requests[0]: deviceClass: missing"},
		"no count":              {claim("{podClaim: c, requests: [{name: r, deviceClass: g}]}"), "requests[0]: count: missing"},
		"nested":                {claim("{podClaim: c, requests: [{name: r, firstAvailable: [{name: s, firstAvailable: [{name: t}]}]}]}"), "alternatives cannot nest"},
		"bad capacity":          {claim("{podClaim: c, name: c, allocated: [{request: r, driver: d, pool: p, device: x, consumedCapacity: {memory: lots}}]}"), `consumedCapacity.memory: "lots" is not a quantity`},
		"no device id":          {claim("{podClaim: c, name: c, allocated: [{request: r, driver: d}]}"), "driver, pool and device are all needed"},
		"uuid not dra":          {head + "nodes:\n- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: T4, count: 1, uuid: GPU-1}]}\n", "uuid: given for a GPU group without dra"},
		"not evaluated":         {claim("{podClaim: c, requests: [{name: r, deviceClass: g, count: 1, accepts: [d/p/x]}]}"), "accepts: given for a request that is not evaluated"},
		"bad accept":            {claim("{podClaim: c, requests: [{name: r, deviceClass: g, count: 1, evaluated: true, accepts: [d/x]}]}"), `accepts[0]: "d/x" is not a DRA device ID`},
		"missing with requests": {claim("{podClaim: c, missing: true, requests: [{name: r, deviceClass: g, count: 1}]}"), "missing: a claim that does not exist has no requests"},
	}
	checkParseErrors(t, "d.yaml", cases)
}

// TestSchedulingFieldsReadBack checks that scheduling gates, the scheduler
// name and the schedulers seen running survive a write and a read, and that
// a file without them leaves the schedulers unknown.
func TestSchedulingFieldsReadBack(t *testing.T) {
	cases := map[string]struct {
		doc        string
		schedulers []string
		gates      []string
		scheduler  string
	}{
		"all set": {
			doc:        "schedulers: [default-scheduler, gpupack]\nnodes: []\npods:\n- {name: p, gpu: {count: 1}, schedulingGates: [kueue.x-k8s.io/admission, x.io/b], schedulerName: volcano}\n",
			schedulers: []string{"default-scheduler", "gpupack"}, gates: []string{"kueue.x-k8s.io/admission", "x.io/b"}, scheduler: "volcano",
		},
		"none running": {
			doc:        "schedulers: []\nnodes: []\npods:\n- {name: p, gpu: {count: 1}, schedulerName: default-scheduler}\n",
			schedulers: []string{},
		},
		"not known": {doc: "nodes: []\npods:\n- {name: p, gpu: {count: 1}}\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := ParseFile([]byte("apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\n"+tc.doc), name, gpu.Default())
			if err != nil {
				t.Fatal(err)
			}
			again, out := readBack(t, s)
			for _, got := range []*Snapshot{s, again} {
				p := got.Pods[0]
				type view struct {
					Schedulers, Gates []string
					Scheduler         string
					Known             bool
				}
				want := view{tc.schedulers, tc.gates, tc.scheduler, tc.schedulers != nil}
				if diff := cmp.Diff(want, view{got.Schedulers, p.SchedulingGates, p.SchedulerName, got.Schedulers != nil}); diff != "" {
					t.Errorf("(-want +got):\n%s\n%s", diff, out)
				}
			}
		})
	}
	if _, err := ParseFile([]byte("apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes: []\npods:\n- {name: p, schedulingGates: [\"\"]}\n"), "f", gpu.Default()); err == nil || !strings.Contains(err.Error(), "schedulingGates[0]") {
		t.Errorf("empty gate: err = %v, want one naming schedulingGates[0]", err)
	}
}

func TestPodRulesReadBack(t *testing.T) {
	doc := `apiVersion: gpupack.io/v1alpha2
kind: ClusterSnapshot
namespaces: {ml: {team: vision}}
nodes: []
pods:
- name: p
  labels: {app: web, version: v2}
  topologySpreadConstraints:
  - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, minDomains: 3,
     labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [version], nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor}
  podAffinity:
  - {topologyKey: kubernetes.io/hostname, labelSelector: {matchExpressions: [{key: app, operator: In, values: [db]}]}, namespaces: [data]}
  podAntiAffinity:
  - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: web}}, namespaceSelector: {}}
`
	s, err := ParseFile([]byte(doc), "rules.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	want := Pod{Namespace: "default", Name: "p", Labels: map[string]string{"app": "web", "version": "v2"},
		SpreadConstraints: []SpreadConstraint{{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: DoNotSchedule, MinDomains: &three,
			LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MatchLabelKeys: []string{"version"}, NodeAffinityPolicy: PolicyIgnore, NodeTaintsPolicy: PolicyHonor}},
		PodAffinity: []PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"data"},
			LabelSelector: &LabelSelector{MatchExpressions: []Requirement{{Key: "app", Operator: "In", Values: []string{"db"}}}}}},
		PodAntiAffinity: []PodAffinityTerm{{TopologyKey: "topology.kubernetes.io/zone", NamespaceSelector: &LabelSelector{},
			LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
	}
	again, out := readBack(t, s)
	for _, got := range []*Snapshot{s, again} {
		if diff := cmp.Diff(want, *got.Pods[0], cmp.AllowUnexported(Pod{})); diff != "" {
			t.Errorf("pod (-want +got):\n%s\n%s", diff, out)
		}
		if diff := cmp.Diff(map[string]string{"team": "vision", NamespaceNameLabel: "ml"}, got.NamespaceLabels("ml")); diff != "" {
			t.Errorf("namespace labels (-want +got):\n%s", diff)
		}
	}
	if !s.Pods[0].HasPodRules() {
		t.Error("HasPodRules = false")
	}
}

// parseErrorCase is a file that ParseFile must refuse, and words its error
// must contain.
type parseErrorCase struct{ doc, want string }

// checkParseErrors reads each case's doc as the file name, one subtest a
// case, and checks that ParseFile refuses it with an error that names the
// file and contains the case's words.
func checkParseErrors(t *testing.T, name string, cases map[string]parseErrorCase) {
	t.Helper()
	for caseName, tc := range cases {
		t.Run(caseName, func(t *testing.T) {
			_, err := ParseFile([]byte(tc.doc), name, gpu.Default())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), name) {
				t.Errorf("err = %v, want one naming %s and containing %q", err, name, tc.want)
			}
		})
	}
}

// checkRoundTrip writes the snapshot, reads it back (readBack) and checks
// that its nodes and pods are unchanged; it returns the written file.
func checkRoundTrip(t *testing.T, s *Snapshot) []byte {
	t.Helper()
	again, out := readBack(t, s)
	if diff := cmp.Diff(s.Nodes, again.Nodes, cmp.AllowUnexported(GPU{})); diff != "" {
		t.Errorf("round trip changed the nodes (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(s.Pods, again.Pods); diff != "" {
		t.Errorf("round trip changed the pods (-first +second):\n%s", diff)
	}
	return out
}

// readBack writes the snapshot and reads it again, as a file that gpupack
// wrote must read back.
func readBack(t *testing.T, s *Snapshot) (*Snapshot, []byte) {
	t.Helper()
	out, err := MarshalFile(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseFile(out, "written", gpu.Default())
	if err != nil {
		t.Fatalf("re-reading: %v\n%s", err, out)
	}
	return again, out
}
