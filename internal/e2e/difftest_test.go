package e2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/difftest"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// The differential test's size: seeds x cases x pending pods, over 1,000
// pending pods per run. GPUPACK_DIFF_SEEDS (a comma-separated list) runs
// other seeds, to reproduce a mismatch or to look further.
const (
	diffCasesPerSeed = 5
	diffPending      = 60
)

var diffSeeds = []uint64{1, 2, 3, 4}

// TestDiagnosisMatchesScheduler is the differential test of gpupack's
// diagnosis against the real kube-scheduler: random clusters of kwok GPU
// nodes with bound pods (internal/testkit/difftest), random pending GPU pods that
// the default kube-scheduler tries, and for every pod it cannot place,
// gpupack's computed "0/N nodes are available: ..." line, from the live
// loader's snapshot, must be the scheduler's FailedScheduling message,
// reason for reason and count for count, preemption suffix included, and
// gpupack's cause must be one that message implies. A mismatch prints its
// seed, case index, both lines and the case's objects as a regression file
// for internal/testkit/difftest/testdata/regressions.
//
// The scheduler places pending pods one after the other, and a pod bound
// late takes resources that an earlier pod's message did not see; since a
// pod that did not fit never fits a fuller cluster, the pods still pending
// when some were bound are created again, under new names, and only their
// messages, all against the final state, are compared. The pods the
// scheduler bound must fit the case's initial state by gpupack's stock
// filters too, but for those with a spread constraint or pod affinity,
// which pods bound after the initial state may have satisfied.
func TestDiagnosisMatchesScheduler(t *testing.T) {
	diffRun(t, difftest.Options{Pending: diffPending}, diffSeeds, 1000)
}

// TestDiagnosisMatchesSchedulerPodRules is TestDiagnosisMatchesScheduler
// with pod rules (difftest.Options.PodRules): app labels, bound pods'
// required anti-affinity, and pending pods' topology spread constraints
// and required pod (anti-)affinity, which the scheduler's PodTopologySpread
// and InterPodAffinity filters judge after NodeResourcesFit.
func TestDiagnosisMatchesSchedulerPodRules(t *testing.T) {
	diffRun(t, difftest.Options{Pending: diffPending, PodRules: true}, diffRulesSeeds, 500)
}

var diffRulesSeeds = []uint64{11, 12}

// diffRun runs the cases of the seeds (GPUPACK_DIFF_SEEDS instead, when
// set) and wants at least least pending pods compared when it runs them
// all.
func diffRun(t *testing.T, opts difftest.Options, defaultSeeds []uint64, least int) {
	if testing.Short() {
		t.Skip("runs hundreds of pending pods through a real kube-scheduler")
	}
	seeds := defaultSeeds
	if env := os.Getenv("GPUPACK_DIFF_SEEDS"); env != "" {
		seeds = nil
		for _, s := range strings.Split(env, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				t.Fatalf("GPUPACK_DIFF_SEEDS=%q: %q is not a seed (want numbers separated by commas)", env, s)
			}
			seeds = append(seeds, n)
		}
	}
	c := testcluster.Start(t, testcluster.Options{})
	var total diffTally
	var prev *difftest.Case
	for _, seed := range seeds {
		for index := range diffCasesPerSeed {
			cs, err := difftest.Generate(seed, index, opts)
			if err != nil {
				t.Fatal(err)
			}
			if prev != nil {
				removeCase(t, c, prev)
			}
			prev = cs
			tally := runDiffCase(t, c, cs)
			total.add(tally)
			t.Logf("seed %d case %d: %d nodes, %d bound pods; %s", seed, index, len(cs.Nodes), len(cs.Bound), tally)
		}
	}
	t.Logf("kube-scheduler v1.37 against gpupack, seeds %v (pod rules %v): %s", seeds, opts.PodRules, total)
	if total.compared < least && len(seeds) >= len(defaultSeeds) {
		t.Errorf("only %d pending pods compared, want at least %d per run", total.compared, least)
	}
}

// diffTally counts a differential run's outcomes.
type diffTally struct {
	compared, lines, causes int // pods compared; equal lines; consistent causes
	bound, boundFit         int // pods the scheduler bound; of those, fitting by gpupack (or helped by pods bound since)
}

func (a *diffTally) add(b diffTally) {
	a.compared += b.compared
	a.lines += b.lines
	a.causes += b.causes
	a.bound += b.bound
	a.boundFit += b.boundFit
}

func (a diffTally) String() string {
	return fmt.Sprintf("%d pending pods compared: scheduler line identical for %d (%s), cause consistent for %d; %d pods bound by the scheduler, %d of them fit by gpupack",
		a.compared, a.lines, ratio(a.lines, a.compared), a.causes, a.bound, a.boundFit)
}

func ratio(n, of int) string {
	if of == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// runDiffCase creates the case on the cluster, lets the scheduler try its
// pending pods, and compares gpupack's diagnosis with the scheduler's words.
func runDiffCase(t *testing.T, c *testcluster.Cluster, cs *difftest.Case) diffTally {
	t.Helper()
	ctx := t.Context()
	client := c.Client()
	c.CreateNamespace(cs.Namespace)
	for _, n := range cs.Nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("seed %d case %d: create node %s: %v", cs.Seed, cs.Index, n.Name, err)
		}
	}
	poll(t, "the case's nodes to be Ready", func(ctx context.Context) (bool, string, error) {
		var notReady []string
		for _, n := range cs.Nodes {
			got, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if !nodeIsReady(got) {
				notReady = append(notReady, n.Name)
			}
		}
		return len(notReady) == 0, fmt.Sprintf("not Ready: %v", notReady), nil
	})
	pods := client.CoreV1().Pods(cs.Namespace)
	for _, p := range cs.Bound {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("seed %d case %d: create bound pod %s: %v", cs.Seed, cs.Index, p.Name, err)
		}
	}
	// kwok runs them, after the scheduler's cache has seen them bound.
	poll(t, "the bound pods to run", func(ctx context.Context) (bool, string, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == len(cs.Bound), fmt.Sprintf("%d of %d running", running, len(cs.Bound)), nil
	})

	var tally diffTally
	// A pod with a spread constraint or pod affinity may fit only once
	// other pending pods were bound; other rules only narrow with more pods.
	helped := map[string]bool{}
	for _, p := range cs.Pending {
		helped[p.Name] = len(p.Spec.TopologySpreadConstraints) > 0 || (p.Spec.Affinity != nil && p.Spec.Affinity.PodAffinity != nil)
	}
	initial, err := cs.State(gpu.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	before, err := diagnose.Diagnose(initial.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	fitsBefore := map[string]bool{}
	for _, f := range before.Findings {
		fitsBefore[strings.TrimPrefix(f.Pod, cs.Namespace+"/")] = f.Summary == "" && f.StockNote != ""
	}

	// Pending pods, by their name now; origin is the generated pod's name.
	waiting := slices.Clone(cs.Pending)
	origin := map[string]string{}
	for _, p := range waiting {
		origin[p.Name] = p.Name
	}
	for round := 0; ; round++ {
		for _, p := range waiting {
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("seed %d case %d: create pending pod %s: %v", cs.Seed, cs.Index, p.Name, err)
			}
		}
		bound, unschedulable := awaitVerdicts(t, c, cs.Namespace, waiting)
		for _, name := range bound {
			tally.bound++
			if fitsBefore[origin[name]] || helped[origin[name]] {
				tally.boundFit++
			} else {
				t.Errorf("seed %d case %d: the kube-scheduler bound %s, but gpupack's stock filters reject it on every node of the initial state", cs.Seed, cs.Index, name)
			}
		}
		if len(bound) == 0 || round == 3 {
			break
		}
		// Some pods were bound while others were tried: try those again
		// against the final state, under new names.
		deletePods(t, c, cs.Namespace, unschedulable)
		var again []*corev1.Pod
		for _, p := range waiting {
			if !slices.Contains(unschedulable, p.Name) {
				continue
			}
			q := p.DeepCopy()
			q.Name = fmt.Sprintf("%s-r%d", origin[p.Name], round+1)
			origin[q.Name] = origin[p.Name]
			again = append(again, q)
		}
		waiting = again
	}

	st, err := kube.Load(ctx, client, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Warnings) > 0 {
		t.Errorf("seed %d case %d: loader warnings %q", cs.Seed, cs.Index, st.Warnings)
	}
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, f := range rep.Findings {
		name, ok := strings.CutPrefix(f.Pod, cs.Namespace+"/")
		if !ok || !slices.ContainsFunc(waiting, func(p *corev1.Pod) bool { return p.Name == name }) {
			continue
		}
		failure, ok := st.SchedulingFailures[f.Pod]
		if !ok {
			t.Errorf("seed %d case %d: %s: no FailedScheduling message in the live state", cs.Seed, cs.Index, f.Pod)
			continue
		}
		tally.compared++
		implies := diagnose.ImpliedCauses(f, failure.Message)
		causeOK := slices.Contains(implies, f.Cause)
		if causeOK {
			tally.causes++
		}
		if f.Summary == failure.Message {
			tally.lines++
			if !causeOK {
				t.Errorf("seed %d case %d: %s (generated as %s; GPUPACK_DIFF_SEEDS=%d reproduces it): gpupack's cause %s is not among those the scheduler's message implies, %v; the message: %s",
					cs.Seed, cs.Index, f.Pod, origin[name], cs.Seed, f.Cause, implies, failure.Message)
			}
			continue
		}
		// The case's objects in full, for the first mismatches of a case.
		shown++
		if shown > 2 {
			t.Errorf("seed %d case %d: %s (generated as %s): lines differ:\n  kube-scheduler: %s\n  gpupack:        %s", cs.Seed, cs.Index, f.Pod, origin[name], failure.Message, f.Summary)
			continue
		}
		r := liveRegression(t, c, cs, f.Pod, failure.Message, f.Summary)
		t.Errorf("seed %d case %d: %s (generated as %s; GPUPACK_DIFF_SEEDS=%d reproduces it):\n  kube-scheduler: %s\n  gpupack:        %s\n  gpupack's cause %s, the message implies %v\nregression case:\n%s",
			cs.Seed, cs.Index, f.Pod, origin[name], cs.Seed, failure.Message, f.Summary, f.Cause, implies, r.Dump())
	}
	return tally
}

// awaitVerdicts waits until the scheduler has bound each pod or marked it
// unschedulable, and returns the names of each kind.
func awaitVerdicts(t *testing.T, c *testcluster.Cluster, ns string, pods []*corev1.Pod) (bound, unschedulable []string) {
	t.Helper()
	want := map[string]bool{}
	for _, p := range pods {
		want[p.Name] = true
	}
	poll(t, "the kube-scheduler's verdict on every pending pod", func(ctx context.Context) (bool, string, error) {
		list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound, unschedulable = nil, nil
		for i := range list.Items {
			p := &list.Items[i]
			if !want[p.Name] {
				continue
			}
			if p.Spec.NodeName != "" {
				bound = append(bound, p.Name)
			} else if cond := scheduledCondition(p); cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				unschedulable = append(unschedulable, p.Name)
			}
		}
		done := len(bound)+len(unschedulable) == len(want)
		return done, fmt.Sprintf("%d bound, %d unschedulable, of %d", len(bound), len(unschedulable), len(want)), nil
	})
	return bound, unschedulable
}

// deletePods deletes the named pods at once and waits until they are gone.
func deletePods(t *testing.T, c *testcluster.Cluster, ns string, names []string) {
	t.Helper()
	pods := c.Client().CoreV1().Pods(ns)
	zero := int64(0)
	for _, name := range names {
		if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatalf("delete pod %s/%s: %v", ns, name, err)
		}
	}
	poll(t, "the deleted pods to go", func(ctx context.Context) (bool, string, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, p := range list.Items {
			if slices.Contains(names, p.Name) {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("still there: %v", left), nil
	})
}

// removeCase deletes the case's pods and nodes, so that the next case
// starts on an empty cluster.
func removeCase(t *testing.T, c *testcluster.Cluster, cs *difftest.Case) {
	t.Helper()
	ctx := t.Context()
	list, err := c.Client().CoreV1().Pods(cs.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	deletePods(t, c, cs.Namespace, names)
	for _, n := range cs.Nodes {
		if err := c.Client().CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete node %s: %v", n.Name, err)
		}
	}
	poll(t, "the case's nodes to go", func(ctx context.Context) (bool, string, error) {
		nodes, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(nodes.Items) == 0, fmt.Sprintf("%d nodes left", len(nodes.Items)), nil
	})
	if err := c.Client().CoreV1().Namespaces().Delete(ctx, cs.Namespace, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace %s: %v", cs.Namespace, err)
	}
}

// liveRegression is the mismatch with the objects as the control plane
// holds them, for a regression file.
func liveRegression(t *testing.T, c *testcluster.Cluster, cs *difftest.Case, pod, scheduler, gpupack string) *difftest.Regression {
	t.Helper()
	r := &difftest.Regression{Seed: cs.Seed, Index: cs.Index, Pod: pod, Scheduler: scheduler, Gpupack: gpupack}
	nodes, err := c.Client().CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the live loader reads, and no more: a node's labels, taints and
	// resources, the bound pods (with their labels, which pod rules
	// select) and the one in question.
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.ObjectMeta = metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations}
		n.Status = corev1.NodeStatus{Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable}
		r.Nodes = append(r.Nodes, n)
	}
	pods, err := c.Client().CoreV1().Pods(cs.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" && cs.Namespace+"/"+p.Name != pod {
			continue
		}
		p.ObjectMeta = metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels}
		p.Status = corev1.PodStatus{Phase: p.Status.Phase}
		r.Pods = append(r.Pods, p)
	}
	return r
}

func nodeIsReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
