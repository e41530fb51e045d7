package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	actuator "github.com/gpupack/gpupack/internal/actuator/kube"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/gpusim/operator"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/plan"
)

const (
	applyNS        = "ml"
	migConfigMap   = "custom-mig-config"
	h100MemoryMiB  = 81559
	migTarget      = "gpupack-test-mig"
	resourceMIG3g  = corev1.ResourceName("nvidia.com/mig-3g.40gb")
	resourceGPU    = corev1.ResourceName("nvidia.com/gpu")
	applyTestPoll  = 500 * time.Millisecond // two reads a poll, within client-go's default 5 a second
	applyTestDrain = 2 * time.Minute
)

// TestApply applies change sets on a real control plane (apiserver,
// controller-manager with the disruption controller, scheduler, kwok) with
// the GPU operator stand-in walking mig-manager's states: a MIG change
// drained past a PodDisruptionBudget that allows one disruption at a time,
// after which the pending MIG pod the change was for is scheduled; a
// failed and a wedged mig-manager rolled back with the node left as it
// was; a budget that never allows an eviction aborts with no pod lost; the
// dry run writes nothing; an approval of a stale hash is refused.
func TestApply(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	client := c.Client()
	c.CreateNamespace(applyNS)
	for _, name := range []string{"gpu-1", "gpu-spare", "gpu-fail", "gpu-wedge", "gpu-held"} {
		c.AddGPUNode(name, testcluster.GPUNode{Product: h100Product, MemoryMiB: h100MemoryMiB, GPUs: 2, MIGConfig: gpuoperator.MIGDisabled,
			Labels: map[string]string{gpuoperator.MIGManagerDeployLabel: "true", gpuoperator.MIGConfigStateLabel: gpuoperator.MIGStateSuccess}})
	}
	op := c.StartGPUOperator(operator.Options{MIGPartedConfigMap: migConfigMap})
	c.SetConfigMap(gpuoperator.OperatorNamespace, migConfigMap, map[string]string{"config.yaml": "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n"})
	a := &actuator.Actuator{Client: client, Catalogue: gpu.Default(), Component: "gpupack-apply-test",
		MIGParted:    actuator.ConfigMapRef{Namespace: gpuoperator.OperatorNamespace, Name: migConfigMap, Key: "config.yaml"},
		DevicePlugin: actuator.ConfigMapRef{Namespace: plan.ConfigMapNamespace, Name: plan.ConfigMapName}}

	t.Run("dry run writes nothing, a stale approval is refused", func(t *testing.T) {
		before := resourceVersions(t, client)
		var out bytes.Buffer
		if err := newRoot(t, &out, "apply", "--kubeconfig", c.Kubeconfig()).Execute(); err != nil {
			t.Fatalf("dry run: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "dry run: ") {
			t.Errorf("dry run output:\n%s", out.String())
		}
		err := newRoot(t, &out, "apply", "--kubeconfig", c.Kubeconfig(), "--approve", "0000000000000000").Execute()
		if err == nil || !strings.Contains(err.Error(), "--approve 0000000000000000, but the change set is now") {
			t.Errorf("a stale approval: %v", err)
		}
		if d := diffVersions(before, resourceVersions(t, client)); d != "" {
			t.Errorf("the dry run and the refused approval wrote: %s", d)
		}
	})

	t.Run("MIG change drained past a PodDisruptionBudget", func(t *testing.T) {
		testApplyWithBudget(t, c, a)
	})
	t.Run("failed mig-manager rolled back", func(t *testing.T) {
		op.SetFault("gpu-fail", operator.Fault{Outcome: operator.Fail})
		// The fault fails every change; the rollback's goes through.
		o := applyOptions(time.Minute, func(s app.Step) {
			if s.Name == "rollback" {
				op.SetFault("gpu-fail", operator.Fault{})
			}
		})
		r := applyOne(t, a, migSet("gpu-fail", nil), o)
		checkRolledBack(t, client, r, "gpu-fail", "mig-manager failed the change")
	})
	t.Run("wedged mig-manager rolled back", func(t *testing.T) {
		op.SetFault("gpu-wedge", operator.Fault{Outcome: operator.Wedge})
		// Once the change has been given up on, mig-manager behaves again,
		// so that the rollback's own label change goes through.
		o := applyOptions(15*time.Second, func(s app.Step) {
			if s.Name == "rollback" {
				op.SetFault("gpu-wedge", operator.Fault{})
			}
		})
		r := applyOne(t, a, migSet("gpu-wedge", nil), o)
		checkRolledBack(t, client, r, "gpu-wedge", "mig-manager wedged")
	})
	t.Run("the startup taint goes once mig-manager has partitioned the node", func(t *testing.T) {
		taint := corev1.Taint{Key: wellknown.TaintMIGPending, Value: "true", Effect: corev1.TaintEffectNoSchedule}
		for name, state := range map[string]string{"new-pending": gpuoperator.MIGStatePending, "new-done": gpuoperator.MIGStateSuccess} {
			c.AddGPUNode(name, testcluster.GPUNode{Product: h100Product, MemoryMiB: h100MemoryMiB, GPUs: 1, MIGConfig: gpuoperator.MIGDisabled,
				Taints: []corev1.Taint{taint}, Labels: map[string]string{gpuoperator.MIGConfigStateLabel: state}})
		}
		released, err := a.ReleaseStartupTaints(t.Context())
		if err != nil || !slices.Equal(released, []string{"new-done"}) {
			t.Fatalf("released %v, %v; want new-done only", released, err)
		}
		for name, want := range map[string]bool{"new-pending": true, "new-done": false} {
			n, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == wellknown.TaintMIGPending }); got != want {
				t.Errorf("%s (state %s): tainted %v, want %v", name, n.Labels[gpuoperator.MIGConfigStateLabel], got, want)
			}
		}
	})
	t.Run("DRA GPUs are fenced with DeviceTaintRules and unfenced", func(t *testing.T) {
		ctx := t.Context()
		dev := cluster.NewDRADeviceID("gpu.nvidia.com", "gpu-1", "gpu-0")
		if err := a.TaintDevices(ctx, "0123456789abcdef", "gpu-1", []cluster.DRADeviceID{dev}); err != nil {
			t.Fatal(err)
		}
		rules, err := client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: wellknown.TaintApply + "=0123456789abcdef"})
		if err != nil || len(rules.Items) != 1 || *rules.Items[0].Spec.DeviceSelector.Device != "gpu-0" || rules.Items[0].Spec.Taint.Effect != "NoSchedule" {
			t.Fatalf("DeviceTaintRules after the fence: %+v, %v", rules, err)
		}
		if err := a.UntaintDevices(ctx, "0123456789abcdef", "gpu-1"); err != nil {
			t.Fatal(err)
		}
		rules, err = client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: wellknown.TaintApply + "=0123456789abcdef"})
		if err != nil || len(rules.Items) != 0 {
			t.Errorf("DeviceTaintRules after the unfence: %+v, %v", rules, err)
		}
		rule := plan.DeviceTaintRule{Name: "gpupack-xid-gpu-1-gpu-0", Driver: "gpu.nvidia.com", Pool: "gpu-1", Device: "gpu-0", XID: 79}
		for range 2 { // the second finds it and leaves it
			if err := a.EnsureTaintRule(ctx, rule); err != nil {
				t.Fatal(err)
			}
		}
		rule.XID = 48
		if err := a.EnsureTaintRule(ctx, rule); err == nil || !strings.Contains(err.Error(), "never overwrites") {
			t.Errorf("a rule of the same name with another taint: %v", err)
		}
	})
	t.Run("a budget that never allows aborts with no pod lost", func(t *testing.T) {
		pod := createGPUPod(t, client, "held-0", "gpu-held", map[string]string{"app": "held"})
		createBudget(t, client, "held", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))})
		set := migSet("gpu-held", []*corev1.Pod{pod})
		o := applyOptions(time.Minute, nil)
		o.DrainTimeout = 5 * time.Second
		r := applyOne(t, a, set, o)
		if r.Outcome != app.OutcomeAborted || !strings.Contains(r.Reason, "PodDisruptionBudget never allowed") {
			t.Fatalf("outcome %s: %s", r.Outcome, r.Reason)
		}
		got, err := client.CoreV1().Pods(applyNS).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil || got.UID != pod.UID || got.DeletionTimestamp != nil {
			t.Errorf("the held pod: %v (deleting %v), want it running as it was", err, got.DeletionTimestamp)
		}
		checkNodeAsItWas(t, client, "gpu-held")
	})
}

// testApplyWithBudget re-partitions gpu-1, which runs the two replicas of
// a Deployment whose budget allows one disruption at a time. The spare
// node stays cordoned until the second eviction is refused, so the budget
// must refuse it once: the replacement of the first pod has nowhere to
// run until then.
func testApplyWithBudget(t *testing.T, c *testcluster.Cluster, a *actuator.Actuator) {
	client := c.Client()
	ctx := t.Context()
	for _, n := range []string{"gpu-spare", "gpu-fail", "gpu-wedge", "gpu-held"} {
		cordon(t, client, n, true)
	}
	// The other tests' nodes stay cordoned until the end, so that the
	// replicas' replacements can go to gpu-spare only.
	defer func() {
		for _, n := range []string{"gpu-fail", "gpu-wedge", "gpu-held"} {
			cordon(t, client, n, false)
		}
	}()
	createDeployment(t, client, "infer", 2)
	createBudget(t, client, "infer", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	pods := runningPods(t, client, "app=infer", 2)
	slice := makePod(applyNS, "slice").gpus(resourceMIG3g, 1).obj()
	if _, err := client.CoreV1().Pods(applyNS).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	set := migSet("gpu-1", pods)
	set.Nodes[0].Fits = []cluster.PodKey{{Namespace: applyNS, Name: "slice"}}
	refusals := &budgetWatch{Actuator: a, onRefusal: func() { cordon(t, client, "gpu-spare", false) }}
	var audit bytes.Buffer
	o := applyOptions(time.Minute, nil)
	o.Audit = &audit
	results, err := app.Apply(ctx, set, refusals, o)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	r := results[0]
	if r.Outcome != app.OutcomeApplied || len(r.Evicted) != 2 || refusals.count() == 0 {
		t.Fatalf("result %+v; budget refusals %d: want applied, both pods evicted, at least one refusal", r, refusals.count())
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[gpuoperator.MIGConfigLabel] != migTarget || n.Spec.Unschedulable || n.Annotations[wellknown.AnnotationChangeSet] != "" {
		t.Errorf("gpu-1 after: labels %v, unschedulable %v, annotations %v", n.Labels, n.Spec.Unschedulable, n.Annotations)
	}
	if q := n.Status.Allocatable[resourceMIG3g]; q.Value() != 2 {
		t.Errorf("gpu-1 allocatable %v: want two %s", n.Status.Allocatable, resourceMIG3g)
	}
	poll(t, "the MIG pod scheduled on gpu-1", func(ctx context.Context) (bool, string, error) {
		p, err := client.CoreV1().Pods(applyNS).Get(ctx, "slice", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName == "gpu-1", "node " + p.Spec.NodeName, nil
	})
	// The Deployment is whole again: no replica was lost for good.
	runningPods(t, client, "app=infer", 2)
	if !strings.Contains(audit.String(), `"outcome":"applied"`) {
		t.Errorf("audit log: %s", audit.String())
	}
	events, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=gpu-1"})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	for _, want := range []string{"GPUPackFence", "GPUPackDrain", "GPUPackSwitch", "GPUPackWait", "GPUPackUnfence", "GPUPackChangeApplied"} {
		if !slices.Contains(reasons, want) {
			t.Errorf("no %s Event on gpu-1 (Events: %v)", want, reasons)
		}
	}
}

// budgetWatch counts the evictions a budget refused and calls onRefusal
// at the first.
type budgetWatch struct {
	*actuator.Actuator
	onRefusal func()
	mu        sync.Mutex
	refused   int
}

func (b *budgetWatch) Evict(ctx context.Context, pod cluster.PodKey, uid string) error {
	err := b.Actuator.Evict(ctx, pod, uid)
	if errors.Is(err, change.ErrBudget) {
		b.mu.Lock()
		b.refused++
		first := b.refused == 1
		b.mu.Unlock()
		if first {
			b.onRefusal()
		}
	}
	return err
}

func (b *budgetWatch) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused
}

// migSet is the change set that re-partitions node's GPU 0 into two
// 3g.40gb slices, stopping pods first.
func migSet(node string, pods []*corev1.Pod) *change.Set {
	n := change.Node{Name: node, Pool: node, Role: plan.MIG, Repartition: true,
		Labels:      []change.Label{{Key: gpuoperator.MIGConfigLabel, From: gpuoperator.MIGDisabled, To: migTarget}},
		GPUs:        []change.GPU{{Index: 0, From: "whole", To: "mig 3g.40gb@0,3g.40gb@4"}},
		Allocatable: map[string]int64{string(resourceGPU): 1, string(resourceMIG3g): 2}}
	for _, p := range pods {
		n.Stop = append(n.Stop, change.Stop{Pod: cluster.PodKey{Namespace: p.Namespace, Name: p.Name}, Resource: string(resourceGPU), Count: 1, GPUs: 1, Why: change.ForRepartition})
	}
	return &change.Set{Hash: "e2e0" + fmt.Sprintf("%012x", time.Now().UnixNano()&0xffffffffffff), Nodes: []change.Node{n},
		MIGConfigs: map[string][]gpuoperator.MIGDeviceConfig{migTarget: {
			{Devices: []int{0}, MIGEnabled: true, MIGDevices: map[string]int{"3g.40gb": 2}},
			{Devices: []int{1}, MIGEnabled: false},
		}}}
}

func applyOptions(switchTimeout time.Duration, progress func(app.Step)) app.ApplyOptions {
	o := app.DefaultApplyOptions()
	o.Poll, o.DrainTimeout, o.SwitchTimeout, o.ApprovedBy, o.Progress = applyTestPoll, applyTestDrain, switchTimeout, "e2e", progress
	return o
}

func applyOne(t *testing.T, a change.Actuator, set *change.Set, o app.ApplyOptions) app.NodeResult {
	t.Helper()
	results, _ := app.Apply(t.Context(), set, a, o)
	if len(results) != 1 {
		t.Fatalf("results %+v", results)
	}
	return results[0]
}

func checkRolledBack(t *testing.T, client kubernetes.Interface, r app.NodeResult, node, reason string) {
	t.Helper()
	if r.Outcome != app.OutcomeRolledBack || !strings.Contains(r.Reason, reason) {
		t.Fatalf("outcome %s: %s; want rolled-back: %s", r.Outcome, r.Reason, reason)
	}
	checkNodeAsItWas(t, client, node)
}

// checkNodeAsItWas checks that a node a change left is as the test made
// it: schedulable, all-disabled at rest, two whole GPUs, no apply
// annotation.
func checkNodeAsItWas(t *testing.T, client kubernetes.Interface, node string) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || n.Labels[gpuoperator.MIGConfigLabel] != gpuoperator.MIGDisabled || n.Labels[gpuoperator.MIGConfigStateLabel] != gpuoperator.MIGStateSuccess {
		t.Errorf("%s: unschedulable %v, labels %v", node, n.Spec.Unschedulable, n.Labels)
	}
	for _, k := range []string{wellknown.AnnotationChangeSet, wellknown.AnnotationPreviousLabels, wellknown.AnnotationCordoned} {
		if v, ok := n.Annotations[k]; ok {
			t.Errorf("%s: annotation %s=%q left", node, k, v)
		}
	}
	if q := n.Status.Allocatable[resourceGPU]; q.Value() != 2 {
		t.Errorf("%s: allocatable %v, want 2 %s", node, n.Status.Allocatable, resourceGPU)
	}
}

func cordon(t *testing.T, client kubernetes.Interface, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	if _, err := client.CoreV1().Nodes().Patch(context.WithoutCancel(t.Context()), node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("cordon %s %v: %v", node, on, err)
	}
}

// createDeployment creates a Deployment of GPU pods; the test cordons
// every other node first, so that its replicas land where it wants.
func createDeployment(t *testing.T, client kubernetes.Interface, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	tmpl := makePod(applyNS, "").gpus(resourceGPU, 1).obj()
	tmpl.Labels = labels
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: applyNS, Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}}}
	if _, err := client.AppsV1().Deployments(applyNS).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createGPUPod(t *testing.T, client kubernetes.Interface, name, node string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := makePod(applyNS, name).gpus(resourceGPU, 1).node(node).obj()
	p.Labels = labels
	created, err := client.CoreV1().Pods(applyNS).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runningPods(t, client, "app="+labels["app"], 1)
	return created
}

// createBudget creates a PodDisruptionBudget of spec over the pods
// labelled app, and waits until the disruption controller has counted it.
func createBudget(t *testing.T, client kubernetes.Interface, app string, spec policyv1.PodDisruptionBudgetSpec) {
	t.Helper()
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: applyNS, Name: app}, Spec: spec}
	if _, err := client.PolicyV1().PodDisruptionBudgets(applyNS).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the disruption controller to count budget "+app, func(ctx context.Context) (bool, string, error) {
		got, err := client.PolicyV1().PodDisruptionBudgets(applyNS).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy > 0, fmt.Sprintf("%+v", got.Status), nil
	})
}

// runningPods waits until n pods of the selector run, and returns them.
func runningPods(t *testing.T, client kubernetes.Interface, selector string, n int) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	poll(t, fmt.Sprintf("%d running pods %s", n, selector), func(ctx context.Context) (bool, string, error) {
		list, err := client.CoreV1().Pods(applyNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		out = out[:0]
		var states []string
		for i := range list.Items {
			p := &list.Items[i]
			states = append(states, p.Name+" "+string(p.Status.Phase)+" on "+p.Spec.NodeName)
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return len(out) == n, strings.Join(states, ", "), nil
	})
	return out
}

// resourceVersions lists the resourceVersion of every object a change
// could write, by kind and name. A node's status is kwok's to update (its
// heartbeats move the resourceVersion), so a node is compared by what a
// change writes of it: labels, annotations and spec.
func resourceVersions(t *testing.T, client kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		b, err := json.Marshal([]any{n.Labels, n.Annotations, n.Spec})
		if err != nil {
			t.Fatal(err)
		}
		out["node/"+n.Name] = string(b)
	}
	pdbs, err := client.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pdbs.Items {
		out["pdb/"+p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out["pod/"+p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	cms, err := client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		out["configmap/"+cm.Namespace+"/"+cm.Name] = cm.ResourceVersion
	}
	events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "source=gpupack-apply"})
	if err != nil {
		t.Fatal(err)
	}
	out["events by gpupack-apply"] = fmt.Sprint(len(events.Items))
	return out
}

func diffVersions(before, after map[string]string) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if before[k] != after[k] {
			diffs = append(diffs, fmt.Sprintf("%s %q -> %q", k, before[k], after[k]))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diffs = append(diffs, k+" gone")
		}
	}
	return strings.Join(diffs, "; ")
}
