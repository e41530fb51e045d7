package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// scenario is one labelled case of the corpus: a snapshot file, an
// optional usage file, and per pod the expected cause and key evidence.
type scenario struct {
	Description string              `json:"description"`
	Expect      map[string]expected `json:"expect"`
	Snapshot    json.RawMessage     `json:"snapshot"`
	Usage       json.RawMessage     `json:"usage,omitempty"`
}

type expected struct {
	Cause Cause    `json:"cause"`
	Also  []Cause  `json:"also,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	// Mentions must each appear in the finding's JSON.
	Mentions []string `json:"mentions,omitempty"`
}

func loadScenario(t testing.TB, path string) (*cluster.Snapshot, *Usage, scenario) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sc scenario
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	s, err := cluster.ParseFile(sc.Snapshot, path+": snapshot", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var u *Usage
	if len(sc.Usage) > 0 {
		if u, err = usage.ParseFacts(sc.Usage, path+": usage"); err != nil {
			t.Fatal(err)
		}
	}
	return s, u, sc
}

func TestCorpus(t *testing.T) {
	paths, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 25 {
		t.Fatalf("corpus has %d scenarios, want at least 25", len(paths))
	}
	seen := map[Cause]bool{}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			s, u, sc := loadScenario(t, path)
			rep, err := Diagnose(s, u)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Finding{}
			for _, f := range append(rep.Findings, rep.Failures...) {
				got[f.Subject()] = f
			}
			for pod, want := range sc.Expect {
				f, ok := got[pod]
				if !ok {
					t.Fatalf("no finding for %s", pod)
				}
				seen[want.Cause] = true
				gotExp := expected{Cause: f.Cause, Also: f.Also, Nodes: want.Nodes, Mentions: want.Mentions}
				if want.Nodes != nil {
					gotExp.Nodes = f.Evidence.Nodes
				}
				if diff := cmp.Diff(want, gotExp); diff != "" {
					t.Errorf("%s (%s): (-want +got):\n%s", pod, sc.Description, diff)
				}
				js, _ := json.Marshal(f)
				for _, m := range want.Mentions {
					if !strings.Contains(string(js), m) {
						t.Errorf("%s: finding does not mention %q:\n%s", pod, m, js)
					}
				}
			}
		})
	}
	for _, c := range append(Causes(), Rejected, Crashing) {
		// A pending pod never gets application as its cause (see
		// Application); usage facts of a pod that fits add evidence only.
		if !seen[c] && c != Application {
			t.Errorf("no scenario of cause %s", c)
		}
	}
}

// TestGroupedPodsSameFinding checks that pods diagnosed once for a group
// get the finding that diagnosing them alone gives.
func TestGroupedPodsSameFinding(t *testing.T) {
	s, u, _ := loadScenario(t, "testdata/corpus/alloc-idle-holders.yaml")
	var pods []*cluster.Pod
	for _, p := range s.Pods {
		pods = append(pods, p)
		if !p.Bound() {
			q := *p
			q.Name += "-twin"
			pods = append(pods, &q)
		}
	}
	s2, err := cluster.NewSnapshot(s.Catalogue, s.Nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Diagnose(s2, u)
	if err != nil {
		t.Fatal(err)
	}
	a, b := rep.Findings[0], rep.Findings[1]
	b.Pod = a.Pod
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("twin's finding differs (-first +twin):\n%s", diff)
	}
}

func TestCausesOrder(t *testing.T) {
	want := []Cause{QuotaExhausted, Gated, NoScheduler, ClaimMissing, Allocation, Memory, Placement, Application, NoSuchHardware, Other}
	if !slices.Equal(Causes(), want) {
		t.Errorf("Causes() = %v, want %v", Causes(), want)
	}
}
