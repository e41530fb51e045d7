package difftest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// TestGenerateIsDeterministic: a case is a function of its seed and index,
// and other seeds and indices give other cases.
func TestGenerateIsDeterministic(t *testing.T) {
	a, err := Generate(7, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(7, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two cases of seed 7, index 3 differ (-first +second):\n%s", diff)
	}
	for _, other := range [][2]int{{8, 3}, {7, 4}} {
		c, err := Generate(uint64(other[0]), other[1], Options{})
		if err != nil {
			t.Fatal(err)
		}
		if cmp.Equal(a.Nodes, c.Nodes) && cmp.Equal(a.Pending, c.Pending) {
			t.Errorf("seed %d index %d gives the case of seed 7 index 3", other[0], other[1])
		}
	}
}

// TestGeneratedCasesLoad: every case reads back through the live loader
// without a warning (its MIG devices make whole layouts, its replicas
// whole GPUs), its bound pods fit where they are, and it covers what the
// generator promises over a few seeds.
func TestGeneratedCasesLoad(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(3) {
		for index := range 6 {
			cs, err := Generate(seed, index, Options{})
			if err != nil {
				t.Fatal(err)
			}
			st, err := cs.State(gpu.Default(), nil)
			if err != nil {
				t.Fatalf("seed %d index %d: %v", seed, index, err)
			}
			if len(st.Warnings) > 0 {
				t.Errorf("seed %d index %d: loader warnings %q", seed, index, st.Warnings)
			}
			if _, misfits, err := placement.States(st.Snapshot); err != nil || len(misfits) > 0 {
				t.Errorf("seed %d index %d: bound pods do not fit where they are: %v %q", seed, index, err, misfits)
			}
			for _, n := range cs.Nodes {
				for k, v := range n.Labels {
					if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
						t.Errorf("seed %d index %d: node %s: label %s=%q: %v", seed, index, n.Name, k, v, errs)
					}
				}
			}
			for _, n := range st.Snapshot.Nodes {
				seen["unschedulable"] = seen["unschedulable"] || n.Unschedulable
				for _, g := range n.GPUs {
					seen[g.Sharing.String()] = true
				}
			}
			for _, p := range cs.Pending {
				if a := p.Spec.Affinity; a != nil {
					for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
						for _, r := range term.MatchExpressions {
							seen[string(r.Operator)] = true
						}
					}
				}
				for r := range p.Spec.Containers[0].Resources.Limits {
					seen[string(r)[:min(len(r), 15)]] = true
				}
			}
		}
	}
	for _, want := range []string{"exclusive", "mig", "time-slicing", "mps", "unschedulable", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "nvidia.com/gpu", "nvidia.com/gpu.", "nvidia.com/mig-"} {
		if !seen[want] {
			t.Errorf("no generated case has %s", want)
		}
	}
}

// TestPodRulesKeepTheCase: a case with pod rules is the case without them
// plus the rules, so that the seeds found before rules existed keep their
// cases; and the rules cover what the generator promises, with each of the
// scheduler's cross-node reasons among gpupack's verdicts.
func TestPodRulesKeepTheCase(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(3) {
		for index := range 6 {
			plain, err := Generate(seed, index, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ruled, err := Generate(seed, index, Options{PodRules: true})
			if err != nil {
				t.Fatal(err)
			}
			stripped := ruled
			for _, pods := range [][]*corev1.Pod{ruled.Bound, ruled.Pending} {
				for _, p := range pods {
					seen["labels"] = seen["labels"] || len(p.Labels) > 0
					p.Labels = nil
					for _, c := range p.Spec.TopologySpreadConstraints {
						seen[string(c.WhenUnsatisfiable)] = true
						seen["minDomains"] = seen["minDomains"] || c.MinDomains != nil
						seen["matchLabelKeys"] = seen["matchLabelKeys"] || len(c.MatchLabelKeys) > 0
						seen["nodeAffinityPolicy"] = seen["nodeAffinityPolicy"] || c.NodeAffinityPolicy != nil
						seen["nodeTaintsPolicy"] = seen["nodeTaintsPolicy"] || c.NodeTaintsPolicy != nil
					}
					p.Spec.TopologySpreadConstraints = nil
					if a := p.Spec.Affinity; a != nil {
						seen["podAffinity"] = seen["podAffinity"] || a.PodAffinity != nil
						seen["podAntiAffinity"] = seen["podAntiAffinity"] || a.PodAntiAffinity != nil
						a.PodAffinity, a.PodAntiAffinity = nil, nil
						if a.NodeAffinity == nil {
							p.Spec.Affinity = nil
						}
					}
				}
			}
			if diff := cmp.Diff(plain, stripped); diff != "" {
				t.Errorf("seed %d index %d: the case with pod rules, less the rules, differs (-without +with):\n%s", seed, index, diff)
			}
			ruled, _ = Generate(seed, index, Options{PodRules: true})
			st, err := ruled.State(gpu.Default(), nil)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := diagnose.Diagnose(st.Snapshot, nil)
			if err != nil {
				t.Fatalf("seed %d index %d: %v", seed, index, err)
			}
			for _, f := range rep.Findings {
				for _, g := range f.Fit {
					for _, r := range g.Reasons {
						seen[string(r.Code)] = true
					}
				}
			}
		}
	}
	for _, want := range []string{"labels", "DoNotSchedule", "ScheduleAnyway", "minDomains", "matchLabelKeys", "nodeAffinityPolicy", "nodeTaintsPolicy", "podAffinity", "podAntiAffinity",
		string(placement.SpreadSkew), string(placement.SpreadMissingLabel), string(placement.PodAffinityMismatch), string(placement.PodAntiAffinityMismatch), string(placement.ExistingAntiAffinity)} {
		if !seen[want] {
			t.Errorf("no generated case has %s", want)
		}
	}
}

// FuzzDiagnose: placement and diagnose neither panic nor fail on any
// generated case.
func FuzzDiagnose(f *testing.F) {
	for seed := range uint64(4) {
		f.Add(seed, uint8(seed), uint8(10), uint8(30), seed%2 == 1)
	}
	f.Fuzz(func(t *testing.T, seed uint64, index, nodes, pending uint8, rules bool) {
		cs, err := Generate(seed, int(index), Options{MaxNodes: int(nodes%32) + 1, Pending: int(pending%64) + 1, PodRules: rules})
		if err != nil {
			t.Fatal(err)
		}
		st, err := cs.State(gpu.Default(), nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := diagnose.Diagnose(st.Snapshot, nil)
		if err != nil {
			t.Fatalf("seed %d index %d: %v", seed, index, err)
		}
		for _, f := range rep.Findings {
			if f.Cause == "" {
				t.Errorf("seed %d index %d: %s has no cause: %s", seed, index, f.Pod, f.Note)
			}
		}
	})
}

// TestRegressions replays the mismatches that the differential test found
// on a real control plane, and that were fixed, without one: gpupack's line
// for the pod must be the kube-scheduler's message.
func TestRegressions(t *testing.T) {
	paths, err := filepath.Glob("testdata/regressions/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ReadRegression(data, path)
			if err != nil {
				t.Fatal(err)
			}
			cs := &Case{Nodes: r.Nodes}
			st, err := cs.State(gpu.Default(), r.Pods)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := diagnose.Diagnose(st.Snapshot, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Findings {
				if f.Pod == r.Pod {
					if f.Summary != r.Scheduler {
						t.Errorf("%s (%s):\nkube-scheduler: %s\ngpupack:        %s", r.Pod, r.Why, r.Scheduler, f.Summary)
					}
					return
				}
			}
			t.Errorf("no finding for %s", r.Pod)
		})
	}
}
