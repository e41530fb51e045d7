package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/plan"
)

// memNode is a node of the in-memory cluster.
type memNode struct {
	labels, annotations map[string]string
	unschedulable       bool
	allocatable         map[string]int64
	pods                []change.PodNow
}

// memCluster is an in-memory Actuator with an operator that takes label
// changes the way the behaviour field says: it answers a new
// nvidia.com/mig.config with pending, then success and the allocatable of
// its config (or fails, or wedges), one step per read of the node.
type memCluster struct {
	mu       sync.Mutex
	nodes    map[string]*memNode
	budget   map[cluster.PodKey]int // evictions a pod's budget allows; absent: unlimited
	evicted  []cluster.PodKey
	deleted  []cluster.PodKey // pods removed other than by eviction (must stay empty)
	events   []string
	configs  map[string]bool
	resultOf map[string]map[string]int64 // allocatable of each mig.config value
	behave   string                      // "", "fail", "wedge", "fail-rollback"
	pending  map[string]int              // reads left before the operator finishes, by node
	lastMIG  map[string]string
	// lag is how many reads of the node a label change goes unnoticed:
	// the state label still holds the previous change's value.
	lag, lagged int
}

func newMemCluster() *memCluster {
	return &memCluster{nodes: map[string]*memNode{}, budget: map[cluster.PodKey]int{}, configs: map[string]bool{},
		resultOf: map[string]map[string]int64{}, pending: map[string]int{}, lastMIG: map[string]string{}}
}

func (m *memCluster) Node(_ context.Context, name string) (change.NodeNow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[name]
	if !ok {
		return change.NodeNow{}, fmt.Errorf("node %s not found", name)
	}
	m.operate(name, n)
	return change.NodeNow{Labels: maps.Clone(n.labels), Annotations: maps.Clone(n.annotations), Unschedulable: n.unschedulable,
		Allocatable: maps.Clone(n.allocatable), Pods: append([]change.PodNow(nil), n.pods...)}, nil
}

// operate is the operator stand-in: it notices a new mig.config value.
func (m *memCluster) operate(name string, n *memNode) {
	cfg := n.labels[gpuoperator.MIGConfigLabel]
	if cfg != m.lastMIG[name] {
		if m.lagged < m.lag {
			m.lagged++
			return
		}
		m.lagged = 0
		m.lastMIG[name] = cfg
		n.labels[gpuoperator.MIGConfigStateLabel] = gpuoperator.MIGStatePending
		n.labels[gpuoperator.DeployLabelPrefix+"device-plugin"] = gpuoperator.DeployPausedForMIGChange
		m.pending[name] = 2
		return
	}
	if n.labels[gpuoperator.MIGConfigStateLabel] != gpuoperator.MIGStatePending {
		return
	}
	rollback := cfg != "mig-a" // the change set's target; any other value is a rollback
	switch {
	case m.behave == "wedge" && !rollback:
		return
	case m.behave == "fail" && !rollback, m.behave == "fail-rollback":
		n.labels[gpuoperator.MIGConfigStateLabel] = gpuoperator.MIGStateFailed
		return
	}
	if m.pending[name]--; m.pending[name] > 0 {
		return
	}
	n.labels[gpuoperator.MIGConfigStateLabel] = gpuoperator.MIGStateSuccess
	n.labels[gpuoperator.DeployLabelPrefix+"device-plugin"] = "true"
	n.allocatable = maps.Clone(m.resultOf[cfg])
}

func (m *memCluster) PatchNode(_ context.Context, name string, p change.NodePatch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nodes[name]
	if p.Unschedulable != nil {
		n.unschedulable = *p.Unschedulable
	}
	apply := func(dst map[string]string, src map[string]*string) {
		for k, v := range src {
			if v == nil {
				delete(dst, k)
			} else {
				dst[k] = *v
			}
		}
	}
	apply(n.labels, p.Labels)
	apply(n.annotations, p.Annotations)
	return nil
}

func (m *memCluster) Evict(_ context.Context, pod cluster.PodKey, uid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if left, ok := m.budget[pod]; ok {
		if left <= 0 {
			return fmt.Errorf("evicting %s: %w", pod, change.ErrBudget)
		}
		m.budget[pod]--
	}
	for _, n := range m.nodes {
		for i, p := range n.pods {
			if p.Key == pod && p.UID == uid {
				n.pods = append(n.pods[:i], n.pods[i+1:]...)
				m.evicted = append(m.evicted, pod)
				return nil
			}
		}
	}
	return nil
}

func (m *memCluster) EnsureConfigs(_ context.Context, set *change.Set, n change.Node) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range set.MIGConfigs {
		m.configs[name] = true
	}
	return nil
}

func (m *memCluster) TaintDevices(context.Context, string, string, []cluster.DRADeviceID) error {
	return nil
}
func (m *memCluster) UntaintDevices(context.Context, string, string) error { return nil }

func (m *memCluster) Event(_ context.Context, node string, warning bool, reason, message string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, node+" "+reason)
}

func (m *memCluster) Snapshot(context.Context) (*cluster.Snapshot, error) {
	return nil, fmt.Errorf("no snapshot in memory")
}

const testNode = "gpu-1"

// migWorld is a node with two whole-GPU pods, and the change set that
// re-partitions it to MIG config "mig-a" (two 3g slices on GPU 0).
func migWorld() (*memCluster, *change.Set) {
	m := newMemCluster()
	m.nodes[testNode] = &memNode{
		labels: map[string]string{gpuoperator.MIGManagerDeployLabel: "true", gpuoperator.MIGConfigStateLabel: gpuoperator.MIGStateSuccess,
			gpuoperator.MIGConfigLabel: gpuoperator.MIGDisabled},
		annotations: map[string]string{},
		allocatable: map[string]int64{"nvidia.com/gpu": 2, "cpu": 32},
		pods: []change.PodNow{
			{Key: cluster.PodKey{Namespace: "ml", Name: "a"}, UID: "uid-a", Resource: "nvidia.com/gpu", Count: 1},
			{Key: cluster.PodKey{Namespace: "ml", Name: "b"}, UID: "uid-b", Resource: "nvidia.com/gpu", Count: 1},
			{Key: cluster.PodKey{Namespace: "ml", Name: "cpu-only"}, UID: "uid-c"},
		},
	}
	m.lastMIG[testNode] = gpuoperator.MIGDisabled
	m.configs[gpuoperator.MIGDisabled] = true
	want := map[string]int64{"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 2}
	m.resultOf["mig-a"] = want
	m.resultOf[gpuoperator.MIGDisabled] = map[string]int64{"nvidia.com/gpu": 2}
	set := &change.Set{Hash: "0123456789abcdef",
		MIGConfigs: map[string][]gpuoperator.MIGDeviceConfig{"mig-a": {{Devices: []int{0}, MIGEnabled: true, MIGDevices: map[string]int{"3g.40gb": 2}}}},
		Nodes: []change.Node{{Name: testNode, Pool: "p", Repartition: true,
			Labels:      []change.Label{{Key: gpuoperator.MIGConfigLabel, From: gpuoperator.MIGDisabled, To: "mig-a"}},
			GPUs:        []change.GPU{{Index: 0, From: "whole", To: "mig 3g.40gb@0,3g.40gb@4"}},
			Allocatable: want,
			Stop: []change.Stop{
				{Pod: cluster.PodKey{Namespace: "ml", Name: "a"}, Resource: "nvidia.com/gpu", Count: 1, GPUs: 1, Why: change.ForRepartition},
				{Pod: cluster.PodKey{Namespace: "ml", Name: "b"}, Resource: "nvidia.com/gpu", Count: 1, GPUs: 1, Why: change.ForRepartition},
			}}}}
	return m, set
}

func testOptions(audit *bytes.Buffer) ApplyOptions {
	o := DefaultApplyOptions()
	o.Poll, o.DrainTimeout, o.SwitchTimeout = time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	o.ApprovedBy = "alice"
	if audit != nil {
		o.Audit = audit
	}
	return o
}

func TestApplyOutcomes(t *testing.T) {
	mig := func(s string) *string { return &s }
	cases := map[string]struct {
		setup       func(*memCluster, *change.Set)
		outcome     string
		reason      string
		evicted     int
		labels      map[string]*string // labels the node must end with (nil: absent)
		cordoned    bool
		allocatable map[string]int64
	}{
		"applied": {
			outcome: OutcomeApplied, evicted: 2,
			labels:      map[string]*string{gpuoperator.MIGConfigLabel: mig("mig-a"), gpuoperator.MIGConfigStateLabel: mig(gpuoperator.MIGStateSuccess)},
			allocatable: map[string]int64{"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 2},
		},
		"mig-manager fails: rolled back": {
			setup:   func(m *memCluster, _ *change.Set) { m.behave = "fail" },
			outcome: OutcomeRolledBack, reason: "mig-manager failed the change", evicted: 2,
			labels:      map[string]*string{gpuoperator.MIGConfigLabel: mig(gpuoperator.MIGDisabled)},
			allocatable: map[string]int64{"nvidia.com/gpu": 2},
		},
		"mig-manager fails and notices the rollback late: rolled back": {
			setup:   func(m *memCluster, _ *change.Set) { m.behave, m.lag = "fail", 3 },
			outcome: OutcomeRolledBack, reason: "mig-manager failed the change", evicted: 2,
			labels:      map[string]*string{gpuoperator.MIGConfigLabel: mig(gpuoperator.MIGDisabled), gpuoperator.MIGConfigStateLabel: mig(gpuoperator.MIGStateSuccess)},
			allocatable: map[string]int64{"nvidia.com/gpu": 2},
		},
		"mig-manager notices the change late: applied": {
			setup:   func(m *memCluster, _ *change.Set) { m.lag = 3 },
			outcome: OutcomeApplied, evicted: 2,
			labels:      map[string]*string{gpuoperator.MIGConfigLabel: mig("mig-a"), gpuoperator.MIGConfigStateLabel: mig(gpuoperator.MIGStateSuccess)},
			allocatable: map[string]int64{"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 2},
		},
		"mig-manager wedges in pending: rolled back": {
			setup:   func(m *memCluster, _ *change.Set) { m.behave = "wedge" },
			outcome: OutcomeRolledBack, reason: "mig-manager wedged", evicted: 2,
			labels:      map[string]*string{gpuoperator.MIGConfigLabel: mig(gpuoperator.MIGDisabled)},
			allocatable: map[string]int64{"nvidia.com/gpu": 2},
		},
		"rollback fails too: the node stays cordoned": {
			setup:   func(m *memCluster, _ *change.Set) { m.behave = "fail-rollback" },
			outcome: OutcomeRollbackFailed, reason: "rollback failed", evicted: 2, cordoned: true,
			labels: map[string]*string{gpuoperator.MIGConfigLabel: mig(gpuoperator.MIGDisabled)},
		},
		"a budget that never allows: aborted, nothing lost": {
			setup: func(m *memCluster, _ *change.Set) {
				m.budget[cluster.PodKey{Namespace: "ml", Name: "b"}] = 0
			},
			outcome: OutcomeAborted, reason: "PodDisruptionBudget never allowed", evicted: 1,
			labels:      map[string]*string{gpuoperator.MIGConfigLabel: mig(gpuoperator.MIGDisabled)},
			allocatable: map[string]int64{"nvidia.com/gpu": 2},
		},
		"already cordoned: stays cordoned": {
			setup:   func(m *memCluster, _ *change.Set) { m.nodes[testNode].unschedulable = true },
			outcome: OutcomeApplied, evicted: 2, cordoned: true,
			labels: map[string]*string{gpuoperator.MIGConfigLabel: mig("mig-a")},
		},
		"drift: a GPU pod the set does not stop": {
			setup: func(m *memCluster, _ *change.Set) {
				n := m.nodes[testNode]
				n.pods = append(n.pods, change.PodNow{Key: cluster.PodKey{Namespace: "ml", Name: "new"}, UID: "uid-n", Resource: "nvidia.com/gpu", Count: 1})
			},
			outcome: OutcomeAborted, reason: "drift", evicted: 0,
			labels: map[string]*string{gpuoperator.MIGConfigLabel: mig(gpuoperator.MIGDisabled)},
		},
		"labels changed since the set was made": {
			setup: func(m *memCluster, _ *change.Set) {
				m.nodes[testNode].labels[gpuoperator.MIGConfigLabel] = "other"
				m.lastMIG[testNode] = "other"
			},
			outcome: OutcomeAborted, reason: "drift: label nvidia.com/mig.config", evicted: 0,
			labels: map[string]*string{gpuoperator.MIGConfigLabel: mig("other")},
		},
		"mig-manager not at rest": {
			setup: func(m *memCluster, _ *change.Set) {
				m.nodes[testNode].labels[gpuoperator.MIGConfigStateLabel] = gpuoperator.MIGStateFailed
			},
			outcome: OutcomeAborted, reason: "mig-manager is not at rest", evicted: 0,
		},
		"mig-manager not deployed": {
			setup: func(m *memCluster, _ *change.Set) {
				delete(m.nodes[testNode].labels, gpuoperator.MIGManagerDeployLabel)
			},
			outcome: OutcomeAborted, reason: "mig-manager does not run on the node", evicted: 0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, set := migWorld()
			if tc.setup != nil {
				tc.setup(m, set)
			}
			var audit bytes.Buffer
			results, err := Apply(context.Background(), set, m, testOptions(&audit))
			if len(results) != 1 {
				t.Fatalf("results: %+v, err %v", results, err)
			}
			r := results[0]
			if r.Outcome != tc.outcome || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("outcome %q reason %q, want %q containing %q", r.Outcome, r.Reason, tc.outcome, tc.reason)
			}
			if (err == nil) != (tc.outcome == OutcomeApplied) {
				t.Errorf("error %v for outcome %s", err, r.Outcome)
			}
			if len(m.evicted) != tc.evicted || len(r.Evicted) != tc.evicted {
				t.Errorf("evicted %v (result %v), want %d", m.evicted, r.Evicted, tc.evicted)
			}
			n := m.nodes[testNode]
			if n.unschedulable != tc.cordoned {
				t.Errorf("unschedulable %v, want %v", n.unschedulable, tc.cordoned)
			}
			for k, v := range tc.labels {
				got, ok := n.labels[k]
				if (v == nil && ok) || (v != nil && got != *v) {
					t.Errorf("label %s = %q (set %v), want %v", k, got, ok, v)
				}
			}
			if tc.allocatable != nil {
				if d := cmp.Diff(tc.allocatable, gpuResources(n.allocatable)); d != "" {
					t.Errorf("allocatable (-want +got):\n%s", d)
				}
			}
			checkRecords(t, n, r, tc.outcome, &audit)
		})
	}
}

// checkRecords checks what a change leaves on the node and in the audit
// log: the annotations gone unless the node stays fenced, one audit line.
func checkRecords(t *testing.T, n *memNode, r NodeResult, outcome string, audit *bytes.Buffer) {
	t.Helper()
	_, marked := n.annotations[wellknown.AnnotationChangeSet]
	if marked != (outcome == OutcomeRollbackFailed) {
		t.Errorf("annotation %s left %v for outcome %s", wellknown.AnnotationChangeSet, marked, outcome)
	}
	var rec NodeResult
	if err := json.Unmarshal(audit.Bytes(), &rec); err != nil {
		t.Fatalf("audit log %q: %v", audit.String(), err)
	}
	if rec.Outcome != outcome || rec.ApprovedBy != "alice" || rec.Hash != "0123456789abcdef" {
		t.Errorf("audit record %+v", rec)
	}
	if outcome == OutcomeApplied && (rec.GPUHoursLost <= 0 || rec.AllocatableAfter["nvidia.com/mig-3g.40gb"] != 2) {
		t.Errorf("audit record of an applied change: GPU-hours lost %v, allocatable after %v", rec.GPUHoursLost, rec.AllocatableAfter)
	}
	if r.Started.IsZero() || r.Ended.Before(r.Started) {
		t.Errorf("times %v..%v", r.Started, r.Ended)
	}
}

// TestApplyRefusesExcess: a relabel that offers fewer replicas than the
// pods that stay hold is refused before the switch.
func TestApplyRefusesExcess(t *testing.T) {
	m := newMemCluster()
	m.nodes[testNode] = &memNode{labels: map[string]string{}, annotations: map[string]string{},
		allocatable: map[string]int64{"nvidia.com/gpu": 4},
		pods: []change.PodNow{
			{Key: cluster.PodKey{Namespace: "web", Name: "a"}, UID: "a", Resource: "nvidia.com/gpu", Count: 1},
			{Key: cluster.PodKey{Namespace: "web", Name: "b"}, UID: "b", Resource: "nvidia.com/gpu", Count: 1},
		}}
	// The set stops one pod but the new config offers none: drift.
	set := &change.Set{Hash: "0123456789abcdef", Nodes: []change.Node{{Name: testNode, Pool: "p",
		Labels:      []change.Label{{Key: gpuoperator.DevicePluginConfigLabel, To: "ts"}},
		Allocatable: map[string]int64{"nvidia.com/gpu.shared": 8},
		Stop:        []change.Stop{{Pod: cluster.PodKey{Namespace: "web", Name: "a"}, Resource: "nvidia.com/gpu", Count: 1, Why: change.ForExcess}}}}}
	results, err := Apply(context.Background(), set, m, testOptions(nil))
	if err == nil || results[0].Outcome != OutcomeAborted || !strings.Contains(results[0].Reason, "1 more nvidia.com/gpu") {
		t.Fatalf("results %+v, err %v", results, err)
	}
	if _, ok := m.nodes[testNode].labels[gpuoperator.DevicePluginConfigLabel]; ok || len(m.evicted) != 0 || m.nodes[testNode].unschedulable {
		t.Errorf("an aborted change wrote: labels %v, evicted %v, cordoned %v", m.nodes[testNode].labels, m.evicted, m.nodes[testNode].unschedulable)
	}
}

func TestApplyMaintenanceWindow(t *testing.T) {
	m, set := migWorld()
	o := testOptions(nil)
	w, err := ParseMaintenanceWindow("22:00-06:00")
	if err != nil {
		t.Fatal(err)
	}
	o.Window = w
	o.Now = func() time.Time { return time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC) }
	results, _ := Apply(context.Background(), set, m, o)
	if results[0].Outcome != OutcomeAborted || !strings.Contains(results[0].Reason, "maintenance window 22:00-06:00 UTC") || len(m.evicted) != 0 {
		t.Fatalf("results %+v, evicted %v", results, m.evicted)
	}
	for _, tc := range []struct {
		at   int
		want bool
	}{{23, true}, {3, true}, {6, false}, {21, false}} {
		if got := w.Contains(time.Date(2026, 1, 5, tc.at, 0, 0, 0, time.UTC)); got != tc.want {
			t.Errorf("%02d:00 in %s: %v, want %v", tc.at, w, got, tc.want)
		}
	}
	for _, bad := range []string{"22:00", "25:00-01:00", "10:00-10:00"} {
		if _, err := ParseMaintenanceWindow(bad); err == nil {
			t.Errorf("ParseMaintenanceWindow(%q) accepted", bad)
		}
	}
}

// TestApplyInterruptedRollsBack: a run interrupted after the switch
// still restores the node.
func TestApplyInterruptedRollsBack(t *testing.T) {
	m, set := migWorld()
	m.behave = "wedge"
	ctx, cancel := context.WithCancel(context.Background())
	o := testOptions(nil)
	o.SwitchTimeout = time.Minute
	o.Progress = func(s Step) {
		if s.Name == "wait" {
			cancel()
		}
	}
	results, _ := Apply(ctx, set, m, o)
	r := results[0]
	if r.Outcome != OutcomeRolledBack || !strings.Contains(r.Reason, "context canceled") {
		t.Fatalf("outcome %s: %s", r.Outcome, r.Reason)
	}
	n := m.nodes[testNode]
	if n.labels[gpuoperator.MIGConfigLabel] != gpuoperator.MIGDisabled || n.unschedulable {
		t.Errorf("after the interrupt: labels %v, cordoned %v", n.labels, n.unschedulable)
	}
}

// TestChangeController: the controller publishes the set, applies it only
// once an approval names its hash, and never twice.
func TestChangeController(t *testing.T) {
	m, set := migWorld()
	approvals := map[string]string{}
	var observed []string
	c := &ChangeController{
		Build:     func(context.Context) (*change.Set, error) { return set, nil },
		Approvals: func(context.Context) (map[string]string, error) { return approvals, nil },
		Actuator:  m, Options: testOptions(nil), Interval: time.Hour,
		Observe: func(r NodeResult) { observed = append(observed, r.Outcome) },
	}
	ctx := context.Background()
	c.Once(ctx)
	if st := c.Status(); st.Set == nil || st.Set.Hash != set.Hash || st.Approved != "" || len(m.evicted) != 0 {
		t.Fatalf("unapproved: status %+v, evicted %v", st, m.evicted)
	}
	approvals["ffffffffffffffff"] = "mallory" // another hash approves nothing
	c.Once(ctx)
	if len(m.evicted) != 0 {
		t.Fatalf("an approval of another hash applied the set: evicted %v", m.evicted)
	}
	approvals[set.Hash] = "bob"
	c.Once(ctx)
	st := c.Status()
	if st.Approved != "bob" || len(st.Results) != 1 || st.Results[0].Outcome != OutcomeApplied || st.Results[0].ApprovedBy != "bob" || len(st.Steps) == 0 {
		t.Fatalf("approved: status %+v", st)
	}
	c.Once(ctx)
	if got := len(c.Status().Results); got != 1 || len(observed) != 1 {
		t.Errorf("the same hash applied again: %d results, observed %v", got, observed)
	}
}

func (m *memCluster) EnsureTaintRule(_ context.Context, r plan.DeviceTaintRule) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, "rule "+r.Name)
	return nil
}
