package diagnose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/usage"
)

// world is a snapshot with its diagnosis.
type world struct {
	name string
	s    *cluster.Snapshot
	rep  *diagnose.Report
}

// worlds are the demo and every scenario of diagnose's corpus.
func worlds(t *testing.T) []world {
	t.Helper()
	c := gpu.Default()
	s, err := cluster.ParseFile(demo.Cluster(), demo.ClusterName, c)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := app.DemoDiagnosis(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	out := []world{{"demo", s, rep}}
	paths, err := filepath.Glob("../../../diagnose/testdata/corpus/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("corpus: %v (%d files)", err, len(paths))
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var sc struct {
			Snapshot json.RawMessage `json:"snapshot"`
			Usage    json.RawMessage `json:"usage"`
		}
		if err := yaml.Unmarshal(data, &sc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		s, err := cluster.ParseFile(sc.Snapshot, path, c)
		if err != nil {
			t.Fatal(err)
		}
		var u *usage.Facts
		if len(sc.Usage) > 0 {
			if u, err = usage.ParseFacts(sc.Usage, path); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := diagnose.Diagnose(s, u)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, world{filepath.Base(path), s, rep})
	}
	return out
}

// podManifest is the Pod that the snapshot's pod stands for: its
// scheduling rules, and one container with its requests.
func podManifest(p *cluster.Pod) *corev1.Pod {
	res := corev1.ResourceList{}
	switch p.GPU.Kind {
	case cluster.WholeGPUs:
		name := kube.ResourceGPU
		if p.GPU.SharedResource {
			name = kube.ResourceGPUShared
		}
		res[name] = *resource.NewQuantity(int64(p.GPU.Count), resource.DecimalSI)
	case cluster.MIGSlice:
		res[corev1.ResourceName(kube.ResourceMIGPrefix+p.GPU.Profile)] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	req := corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(p.CPU), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(p.Memory)<<20, resource.BinarySI)}
	m := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{{Name: "main", Image: "app", Resources: corev1.ResourceRequirements{Requests: req, Limits: res}}},
			NodeSelector:  p.NodeSelector,
			SchedulerName: p.Scheduler(),
		},
	}
	if p.GPU.Memory > 0 {
		m.Annotations = map[string]string{wellknown.AnnotationGPUMemory: resource.NewQuantity(int64(p.GPU.Memory)<<20, resource.BinarySI).String()}
	}
	if len(p.RequiredAffinity) > 0 {
		var terms []corev1.NodeSelectorTerm
		for _, t := range p.RequiredAffinity {
			var term corev1.NodeSelectorTerm
			for _, r := range t.MatchExpressions {
				term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values})
			}
			terms = append(terms, term)
		}
		m.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	for _, t := range p.Tolerations {
		m.Spec.Tolerations = append(m.Spec.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	for _, g := range p.SchedulingGates {
		m.Spec.SchedulingGates = append(m.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
	}
	for _, c := range p.SpreadConstraints {
		tsc := corev1.TopologySpreadConstraint{MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, WhenUnsatisfiable: corev1.UnsatisfiableConstraintAction(c.WhenUnsatisfiable),
			LabelSelector: labelSelector(c.LabelSelector), MatchLabelKeys: c.MatchLabelKeys, MinDomains: c.MinDomains}
		if c.NodeAffinityPolicy != "" {
			tsc.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicy(c.NodeAffinityPolicy))
		}
		if c.NodeTaintsPolicy != "" {
			tsc.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicy(c.NodeTaintsPolicy))
		}
		m.Spec.TopologySpreadConstraints = append(m.Spec.TopologySpreadConstraints, tsc)
	}
	if len(p.PodAffinity)+len(p.PodAntiAffinity) > 0 {
		if m.Spec.Affinity == nil {
			m.Spec.Affinity = &corev1.Affinity{}
		}
		if len(p.PodAffinity) > 0 {
			m.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: podTerms(p.PodAffinity)}
		}
		if len(p.PodAntiAffinity) > 0 {
			m.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: podTerms(p.PodAntiAffinity)}
		}
	}
	return m
}

func labelSelector(s *cluster.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values})
	}
	return out
}

func podTerms(ts []cluster.PodAffinityTerm) []corev1.PodAffinityTerm {
	var out []corev1.PodAffinityTerm
	for _, t := range ts {
		out = append(out, corev1.PodAffinityTerm{LabelSelector: labelSelector(t.LabelSelector), Namespaces: t.Namespaces, NamespaceSelector: labelSelector(t.NamespaceSelector),
			TopologyKey: t.TopologyKey, MatchLabelKeys: t.MatchLabelKeys, MismatchLabelKeys: t.MismatchLabelKeys})
	}
	return out
}

// apply applies the patch to the pod's manifest with the libraries the
// apiserver and kubectl apply them with, and reads the result strictly:
// a field the Pod type does not have is an error.
func apply(t *testing.T, m *corev1.Pod, patch *diagnose.Patch) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	switch patch.Type {
	case diagnose.JSONPatch:
		ops, err := jsonpatch.DecodePatch(patch.Body)
		if err != nil {
			t.Fatalf("JSON patch %s: %v", patch.Body, err)
		}
		if out, err = ops.Apply(doc); err != nil {
			t.Fatalf("JSON patch %s does not apply to %s: %v", patch.Body, doc, err)
		}
	case diagnose.StrategicPatch:
		if out, err = strategicpatch.StrategicMergePatch(doc, patch.Body, corev1.Pod{}); err != nil {
			t.Fatalf("strategic merge patch %s does not apply to %s: %v", patch.Body, doc, err)
		}
	default:
		t.Fatalf("patch type %q", patch.Type)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var got corev1.Pod
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("patched pod %s: %v", out, err)
	}
	return &got
}

// ruleReasons are the reasons of the pod's own rules that keep it off the
// node of st, its spread constraints and pod (anti-)affinity prefiltered
// over states.
func ruleReasons(t *testing.T, c *gpu.Catalogue, p *cluster.Pod, st *placement.NodeState, states []*placement.NodeState) []placement.Reason {
	t.Helper()
	d, err := placement.NewDemand(p, c)
	if err != nil {
		t.Fatal(err)
	}
	d.PreFilter(states, nil)
	_, rs := placement.Fit(d, st)
	return slices.DeleteFunc(rs, func(r placement.Reason) bool {
		switch r.Code {
		case placement.NodeSelectorMismatch, placement.NodeAffinityMismatch, placement.TaintNotTolerated,
			placement.SpreadSkew, placement.SpreadMissingLabel, placement.PodAffinityMismatch, placement.PodAntiAffinityMismatch:
			return false
		}
		return true
	})
}

// TestPatchesApply: every patch that diagnose writes for the demo's and
// the corpus' pending pods is valid, applies cleanly to the Pod it is for,
// and does what its fix says: a pod-spec patch admits the pod to a node
// its rules kept it off (placement.Fit on the patched pod, read back as
// the live loader reads pods), a gate patch removes that gate and only
// it, a scheduler patch names a scheduler that runs.
func TestPatchesApply(t *testing.T) {
	patches := map[string]int{}
	for _, w := range worlds(t) {
		states, _, err := placement.States(w.s)
		if err != nil {
			t.Fatal(err)
		}
		pods := map[string]*cluster.Pod{}
		for _, p := range w.s.Pods {
			pods[p.Key()] = p
		}
		for _, f := range w.rep.Findings {
			for _, r := range f.Remedies {
				if r.Patch == nil {
					continue
				}
				t.Run(w.name+"/"+f.Subject()+"/"+string(r.Kind), func(t *testing.T) {
					if r.Kind == diagnose.QuotaChange {
						patches[w.name]++
						checkQuotaPatch(t, w.s, f, r)
						return
					}
					if r.Kind == diagnose.ClaimSpec {
						patches[w.name]++
						checkClaimPatch(t, pods[f.Pod], r)
						return
					}
					p := pods[f.Pod]
					if want := []diagnose.Object{{Kind: "Pod", Namespace: p.Namespace, Name: p.Name}}; !cmp.Equal(r.Targets, want) {
						t.Fatalf("patch targets %v, want %v", r.Targets, want)
					}
					m := podManifest(p)
					before, _ := kube.ConvertPod(m)
					if diff := cmp.Diff(p.SchedulingGates, before.SchedulingGates); diff != "" || p.Scheduler() != before.Scheduler() {
						t.Fatalf("the test's manifest does not stand for the pod: gates (-want +got) %s, scheduler %s", diff, before.Scheduler())
					}
					after, _ := kube.ConvertPod(apply(t, m, r.Patch))
					patches[w.name]++
					switch r.Kind {
					case diagnose.PodSpec:
						if after.Scheduler() != p.Scheduler() {
							if !slices.Contains(w.s.Schedulers, after.Scheduler()) && !(len(w.s.Schedulers) == 0 && after.Scheduler() == cluster.DefaultScheduler) {
								t.Errorf("the patched pod names scheduler %s; running: %v", after.Scheduler(), w.s.Schedulers)
							}
							return
						}
						admits := ""
						for i, st := range states {
							if len(ruleReasons(t, w.s.Catalogue, before, st, states)) > 0 && len(ruleReasons(t, w.s.Catalogue, after, st, states)) == 0 {
								admits = w.s.Nodes[i].Name
								break
							}
						}
						if admits == "" {
							t.Errorf("patch %s admits the pod to no node its rules kept it off", r.Patch.Body)
						}
					case diagnose.SchedulingGate:
						removed := slices.DeleteFunc(slices.Clone(before.SchedulingGates), func(g string) bool { return slices.Contains(after.SchedulingGates, g) })
						if len(removed) != 1 || len(after.SchedulingGates) != len(before.SchedulingGates)-1 {
							t.Errorf("gates %v became %v; want exactly one removed", before.SchedulingGates, after.SchedulingGates)
						}
					default:
						t.Errorf("a patch on a remedy of kind %s", r.Kind)
					}
				})
			}
		}
	}
	if patches["demo"] == 0 || len(patches) < 5 {
		t.Errorf("patches applied per world: %v; want the demo's and several scenarios'", patches)
	}
}

// checkClaimPatch applies a claim-spec remedy's JSON patch to the
// ResourceClaim or ResourceClaimTemplate it targets, made from the pod's
// claim as the snapshot has it, and checks that the patched object is
// still one of its kind and holds the patch's value at its path.
func checkClaimPatch(t *testing.T, p *cluster.Pod, r diagnose.Remedy) {
	t.Helper()
	if len(r.Targets) != 1 || r.Patch.Type != diagnose.JSONPatch {
		t.Fatalf("patch %s of %v, want a JSON patch of one claim or template", r.Patch.Type, r.Targets)
	}
	target := r.Targets[0]
	var claim cluster.Claim
	for _, c := range p.Claims {
		if (target.Kind == "ResourceClaim" && c.Name == target.Name) || (target.Kind == "ResourceClaimTemplate" && c.Template == target.Name) {
			claim = c
		}
	}
	spec := resourcev1.ResourceClaimSpec{}
	for _, cr := range claim.Requests {
		exact := func(r cluster.ClaimRequest) *resourcev1.ExactDeviceRequest {
			e := &resourcev1.ExactDeviceRequest{DeviceClassName: r.DeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(r.Count)}
			if r.All {
				e.AllocationMode, e.Count = resourcev1.DeviceAllocationModeAll, 0
			}
			for _, sel := range r.Selectors {
				e.Selectors = append(e.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: sel}})
			}
			for _, tol := range r.Tolerations {
				e.Tolerations = append(e.Tolerations, resourcev1.DeviceToleration{Key: tol.Key, Operator: resourcev1.DeviceTolerationOperator(tol.Operator), Value: tol.Value, Effect: resourcev1.DeviceTaintEffect(tol.Effect)})
			}
			for name, q := range r.Capacity {
				if e.Capacity == nil {
					e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{}}
				}
				e.Capacity.Requests[resourcev1.QualifiedName(name)] = resource.MustParse(q.String())
			}
			return e
		}
		dr := resourcev1.DeviceRequest{Name: cr.Name}
		if len(cr.FirstAvailable) == 0 {
			dr.Exactly = exact(cr)
		}
		for _, alt := range cr.FirstAvailable {
			e := exact(alt)
			dr.FirstAvailable = append(dr.FirstAvailable, resourcev1.DeviceSubRequest{Name: alt.Name, DeviceClassName: e.DeviceClassName,
				AllocationMode: e.AllocationMode, Count: e.Count, Selectors: e.Selectors, Tolerations: e.Tolerations})
		}
		spec.Devices.Requests = append(spec.Devices.Requests, dr)
	}
	meta := metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}
	var obj, got any
	switch target.Kind {
	case "ResourceClaim":
		obj, got = &resourcev1.ResourceClaim{ObjectMeta: meta, Spec: spec}, &resourcev1.ResourceClaim{}
	case "ResourceClaimTemplate":
		obj, got = &resourcev1.ResourceClaimTemplate{ObjectMeta: meta, Spec: resourcev1.ResourceClaimTemplateSpec{Spec: spec}}, &resourcev1.ResourceClaimTemplate{}
	default:
		t.Fatalf("claim-spec patch of %v", target)
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := jsonpatch.DecodePatch(r.Patch.Body)
	if err != nil {
		t.Fatalf("JSON patch %s: %v", r.Patch.Body, err)
	}
	out, err := ops.Apply(doc)
	if err != nil {
		t.Fatalf("JSON patch %s does not apply to %s: %v", r.Patch.Body, doc, err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(got); err != nil {
		t.Fatalf("patched %s %s: %v", target.Kind, out, err)
	}
	var patch []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(r.Patch.Body, &patch); err != nil || len(patch) != 1 {
		t.Fatalf("patch %s: want one operation (%v)", r.Patch.Body, err)
	}
	var before, after any
	_ = json.Unmarshal(doc, &before)
	_ = json.Unmarshal(out, &after)
	at := func(v any) any {
		for _, key := range strings.Split(strings.TrimPrefix(patch[0].Path, "/"), "/") {
			switch x := v.(type) {
			case map[string]any:
				v = x[key]
			case []any:
				i := 0
				fmt.Sscan(key, &i)
				v = x[i]
			}
		}
		return v
	}
	var want any
	_ = json.Unmarshal(patch[0].Value, &want)
	if !cmp.Equal(at(after), want) || cmp.Equal(at(before), want) {
		t.Errorf("patch %s: %s went from %v to %v, want a change to %v", r.Patch.Body, patch[0].Path, at(before), at(after), want)
	}
}

// checkQuotaPatch applies a quota remedy's patch to the ResourceQuota it
// targets, as the snapshot has it, and checks that the quota then admits
// the refused pod: each hard limit is at least what is used plus what the
// pod asks for.
func checkQuotaPatch(t *testing.T, s *cluster.Snapshot, f diagnose.Finding, r diagnose.Remedy) {
	t.Helper()
	q := f.Evidence.Quota
	if want := []diagnose.Object{q.Quota}; !cmp.Equal(r.Targets, want) || r.Patch.Type != diagnose.StrategicPatch {
		t.Fatalf("patch %s of %v, want a strategic patch of %v", r.Patch.Type, r.Targets, want)
	}
	m := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: q.Quota.Namespace, Name: q.Quota.Name}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{}}}
	for _, x := range s.Quotas {
		if x.Namespace == q.Quota.Namespace && x.Name == q.Quota.Name {
			for k, v := range x.Hard {
				m.Spec.Hard[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
			}
		}
	}
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := strategicpatch.StrategicMergePatch(doc, r.Patch.Body, corev1.ResourceQuota{})
	if err != nil {
		t.Fatalf("strategic merge patch %s does not apply to %s: %v", r.Patch.Body, doc, err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var got corev1.ResourceQuota
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("patched quota %s: %v", out, err)
	}
	for _, x := range q.Resources {
		hard := got.Spec.Hard[corev1.ResourceName(x.Resource)]
		if hard.Value() < x.Used+x.Requested {
			t.Errorf("patched hard %s=%s; used %d + requested %d do not fit", x.Resource, hard.String(), x.Used, x.Requested)
		}
	}
}

// TestCommandsSplitAsMeant runs each command that diagnose writes for the
// demo and the corpus through a POSIX shell, with kubectl a function that
// prints its arguments, and checks the shell passes exactly the words
// meant: the patch as one argument, every object the remedy names. A
// snapshot with a taint value holding a quote and a dollar sign (a file may
// hold one, a cluster may not) shows the quoting holds.
func TestCommandsSplitAsMeant(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell:", err)
	}
	hostile, err := cluster.ParseFile([]byte(`apiVersion: gpupack.io/v1alpha2
kind: ClusterSnapshot
nodes:
- {name: l4-1, cpu: "32", memory: 128Gi, gpus: [{model: L4, count: 4}], taints: [{key: team, value: "it's $(id) `+"`x`"+`", effect: NoSchedule}]}
pods:
- {namespace: ml, name: wait, gpu: {count: 1}}
`), "hostile.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := diagnose.Diagnose(hostile, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := append(worlds(t), world{"hostile", hostile, rep})
	commands := 0
	for _, w := range all {
		for _, f := range w.rep.Findings {
			for _, r := range f.Remedies {
				if r.Kind == diagnose.ClaimSpec {
					checkClaimCommand(t, sh, r)
					commands++
					continue
				}
				for _, line := range r.Commands {
					commands++
					out, err := exec.Command(sh, "-c", `kubectl() { printf '%s\0' "$@"; }; `+line).Output()
					if err != nil {
						t.Fatalf("%s: %s: %v", w.name, line, err)
					}
					args := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
					var want []string
					switch {
					case args[0] == "patch":
						want = []string{"patch", strings.ToLower(r.Targets[0].Kind), "-n", r.Targets[0].Namespace, r.Targets[0].Name, "--type=" + r.Patch.Type, "-p", string(r.Patch.Body)}
					case args[0] == "delete" && r.Kind == diagnose.TaintRuleChange:
						want = []string{"delete", "devicetaintrule", r.Targets[0].Name}
					case args[0] == "delete":
						want = []string{"delete", "pod", "-n", args[3]}
						for _, o := range r.Targets {
							if o.Namespace == args[3] {
								want = append(want, o.Name)
							}
						}
					case args[0] == "uncordon":
						want = []string{"uncordon", r.Targets[0].Name}
					case args[0] == "label":
						want = []string{"label", "node", r.Targets[0].Name, args[3], "--overwrite"}
						if !strings.HasPrefix(args[3], "nvidia.com/mig.config=") {
							t.Errorf("%s: label %q", line, args[3])
						}
					}
					if diff := cmp.Diff(want, args); diff != "" {
						t.Errorf("%s: %s: the shell passes (-want +got):\n%s", w.name, line, diff)
					}
				}
			}
		}
	}
	if commands == 0 {
		t.Fatal("no commands")
	}
}

// checkClaimCommand runs a claim-spec remedy's pipeline with kubectl a
// function that writes its arguments to a file named after its verb, and
// checks each of the three commands gets exactly the words meant.
func checkClaimCommand(t *testing.T, sh string, r diagnose.Remedy) {
	t.Helper()
	dir := t.TempDir()
	if len(r.Commands) != 1 {
		t.Fatalf("commands %q, want one pipeline", r.Commands)
	}
	cmd := exec.Command(sh, "-c", `kubectl() { printf '%s\0' "$@" > "$DIR/$1"; }; `+r.Commands[0])
	cmd.Env = append(os.Environ(), "DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", r.Commands[0], err, out)
	}
	o := r.Targets[0]
	for verb, want := range map[string][]string{
		"get":     {"get", strings.ToLower(o.Kind), "-n", o.Namespace, o.Name, "-o", "yaml"},
		"patch":   {"patch", "--local", "-f", "-", "--type=json", "-p", string(r.Patch.Body), "-o", "yaml"},
		"replace": {"replace", "--force", "-f", "-"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, verb))
		if err != nil {
			t.Fatalf("%s: kubectl %s did not run: %v", r.Commands[0], verb, err)
		}
		if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")); diff != "" {
			t.Errorf("%s: kubectl %s gets (-want +got):\n%s", r.Commands[0], verb, diff)
		}
	}
}

// TestRemedyLines: what the table shows under a fix, kind by kind.
func TestRemedyLines(t *testing.T) {
	pod := []diagnose.Object{{Kind: "Pod", Namespace: "ml", Name: "wait"}}
	patch := &diagnose.Patch{Type: diagnose.JSONPatch, Body: json.RawMessage(`[{"op":"remove","path":"/spec/nodeSelector/pool"}]`)}
	cases := map[string]struct {
		r    diagnose.Remedy
		want []string
	}{
		"advice shows nothing": {diagnose.Remedy{Kind: diagnose.Advice, Note: "a purchase"}, nil},
		"a patch no command applies, with its target and type": {diagnose.Remedy{Kind: diagnose.PodSpec, Targets: pod, Patch: patch, Note: "n"},
			[]string{"apply:  patch of pod ml/wait (kubectl patch --type=json):", `        [{"op":"remove","path":"/spec/nodeSelector/pool"}]`, "note:   n"}},
		"commands, one a line": {diagnose.Remedy{Kind: diagnose.Reclaim, Commands: []string{"kubectl delete pod -n a x", "kubectl delete pod -n b y"}},
			[]string{"apply:  kubectl delete pod -n a x", "        kubectl delete pod -n b y"}},
		"a config, then its command": {diagnose.Remedy{Kind: diagnose.MIGConfig, Config: "version: v1\n", Commands: []string{"kubectl label node n k=v --overwrite"}},
			[]string{"apply:  add to the mig-parted config:", "          version: v1", "        then: kubectl label node n k=v --overwrite"}},
		"refused: the note alone": {diagnose.Remedy{Kind: diagnose.Reclaim, Note: "nothing to apply: pod name \"a'b\" is not a valid Kubernetes name"},
			[]string{"note:   nothing to apply: pod name \"a'b\" is not a valid Kubernetes name"}},
	}
	for name, tc := range cases {
		if diff := cmp.Diff(tc.want, remedyLines(tc.r)); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", name, diff)
		}
	}
}
