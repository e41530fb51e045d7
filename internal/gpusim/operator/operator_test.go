package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/internal/gpusim/operator"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/plan"
)

// waitTimeout bounds each wait for the stand-in; it is not an expectation
// of speed.
const waitTimeout = 2 * time.Minute

const h100 = "NVIDIA-H100-80GB-HBM3"

// migParted is the mig-parted configuration file of the tests: two of the
// GPU operator's defaults and a per-GPU layout as plan writes them.
var migParted = map[string][]gpuoperator.MIGDeviceConfig{
	"all-disabled": {{Devices: "all"}},
	"all-1g.10gb":  {{Devices: "all", MIGEnabled: true, MIGDevices: map[string]int{"1g.10gb": 7}}},
	"pool-mig-1": {
		{Devices: []int{0}, MIGEnabled: true, MIGDevices: map[string]int{"3g.40gb": 2}},
		{Devices: []int{1}},
	},
}

// devicePlugin is the device plugin ConfigMap of the tests, each key a
// configuration as plan writes them.
var devicePlugin = map[string]plan.DevicePluginConfig{
	"time-sliced-4": {Version: "v1", Flags: &plan.DevicePluginFlags{MIGStrategy: "none"}, Sharing: &plan.DevicePluginSharing{
		TimeSlicing: &plan.ReplicatedResources{RenameByDefault: true, FailRequestsGreaterThanOne: true,
			Resources: []plan.ReplicatedResource{{Name: "nvidia.com/gpu", Devices: "all", Replicas: 4}}}}},
	"exclusive": {Version: "v1", Flags: &plan.DevicePluginFlags{MIGStrategy: "none"}},
}

// deployTrue and deployPaused are the deploy labels of a node on which
// mig-manager has never run, after and during a change.
var (
	deployTrue   = deployLabels(gpuoperator.DeployTrue)
	deployPaused = deployLabels(gpuoperator.DeployPausedForMIGChange)
)

func deployLabels(value string) map[string]string {
	out := map[string]string{}
	for _, k := range gpuoperator.MIGPausedDeployLabels {
		out[k] = value
	}
	return out
}

// gpus is a node's GPU resources, as capacity and allocatable both hold
// them.
type gpus map[corev1.ResourceName]int64

// TestStandIn drives the stand-in through every path of a MIG change and a
// device plugin change on a real apiserver with kwok's nodes, checking the
// states, the labels and the nodes' GPU resources exactly.
func TestStandIn(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	for _, n := range []struct {
		name string
		gpus int64
	}{{"mig", 2}, {"slices", 2}, {"unknown", 1}, {"busy", 1}, {"wedged", 1}, {"fails", 1}, {"slow", 1}, {"reboots", 1}} {
		c.AddGPUNode(n.name, testcluster.GPUNode{Product: h100, MemoryMiB: 81559, GPUs: n.gpus})
	}
	file, err := gpuoperator.MIGPartedConfig(migParted)
	if err != nil {
		t.Fatal(err)
	}
	op := c.StartGPUOperator(operator.Options{Faults: map[string]operator.Fault{
		"wedged":  {Outcome: operator.Wedge},
		"fails":   {Outcome: operator.Fail},
		"slow":    {Delay: time.Hour}, // until the test sets another fault
		"reboots": {Reboot: true},
	}})
	c.SetConfigMap(gpuoperator.OperatorNamespace, gpuoperator.MIGPartedConfigMapName, map[string]string{gpuoperator.MIGPartedConfigMapKey: string(file)})
	plugin := map[string]string{}
	for name, cfg := range devicePlugin {
		b, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		plugin[name] = string(b)
	}
	c.SetConfigMap(plan.ConfigMapNamespace, plan.ConfigMapName, plugin)

	t.Run("a MIG layout succeeds and advertises its devices", func(t *testing.T) {
		seen := change(t, c, "mig", gpuoperator.MIGConfigLabel, "pool-mig-1", settled)
		wantStates(t, seen, gpuoperator.MIGStatePending, gpuoperator.MIGStateSuccess)
		if diff := cmp.Diff(deployPaused, deploy(seen[0].node)); diff != "" {
			t.Errorf("deploy labels while pending (-want +got):\n%s", diff)
		}
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 2})
		wantNoFailure(t, op, "mig")

		seen = change(t, c, "mig", gpuoperator.MIGConfigLabel, "all-disabled", settled)
		wantStates(t, seen, gpuoperator.MIGStatePending, gpuoperator.MIGStateSuccess)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 2, "nvidia.com/mig-3g.40gb": 0})
	})

	t.Run("a time-slicing configuration advertises renamed replicas", func(t *testing.T) {
		seen := change(t, c, "slices", gpuoperator.DevicePluginConfigLabel, "time-sliced-4", advertises(gpus{"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 8}))
		n := last(seen).node
		wantNode(t, last(seen), nil, gpus{"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 8})
		wantLabels(t, n, map[string]string{kube.LabelGPUReplicas: "4", kube.LabelGPUSharingStrategy: "time-slicing", kube.LabelGPUProduct: h100})
		if s, ok := n.Labels[gpuoperator.MIGConfigStateLabel]; ok {
			t.Errorf("a device plugin change set %s=%s; only mig-manager writes it", gpuoperator.MIGConfigStateLabel, s)
		}
		wantNoFailure(t, op, "slices")

		seen = change(t, c, "slices", gpuoperator.DevicePluginConfigLabel, "exclusive", advertises(gpus{"nvidia.com/gpu": 2, "nvidia.com/gpu.shared": 0}))
		wantLabels(t, last(seen).node, map[string]string{kube.LabelGPUReplicas: "1", kube.LabelGPUSharingStrategy: "none"})
	})

	t.Run("an unknown configuration fails at once", func(t *testing.T) {
		seen := change(t, c, "unknown", gpuoperator.MIGConfigLabel, "no-such-config", settled)
		wantStates(t, seen, gpuoperator.MIGStateFailed)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 1})
		wantFailure(t, op, "unknown", "no such configuration in ConfigMap gpu-operator/default-mig-parted-config")
	})

	t.Run("a GPU pod on the node fails the change until it is gone", func(t *testing.T) {
		const ns = "work"
		c.CreateNamespace(ns)
		holder := c.CreateGPUPod(ns, "holder", "busy", testcluster.ResourceGPU, 1)
		waitRunning(t, c, holder)
		seen := change(t, c, "busy", gpuoperator.MIGConfigLabel, "all-1g.10gb", settled)
		wantStates(t, seen, gpuoperator.MIGStatePending, gpuoperator.MIGStateFailed)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 1})
		wantFailure(t, op, "busy", "GPUs in use by pods work/holder")

		// Drained, the same layout applies once the label changes again:
		// back to the layout the GPUs hold (success at once), then to it.
		deletePod(t, c, holder)
		seen = change(t, c, "busy", gpuoperator.MIGConfigLabel, "all-disabled", settled)
		wantStates(t, seen, gpuoperator.MIGStateSuccess)
		seen = change(t, c, "busy", gpuoperator.MIGConfigLabel, "all-1g.10gb", settled)
		wantStates(t, seen, gpuoperator.MIGStatePending, gpuoperator.MIGStateSuccess)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 7})
	})

	t.Run("a wedged change stays pending with the agents paused and no GPU", func(t *testing.T) {
		seen := change(t, c, "wedged", gpuoperator.MIGConfigLabel, "all-1g.10gb", advertises(gpus{"nvidia.com/gpu": 0}))
		wantStates(t, seen, gpuoperator.MIGStatePending)
		wantNode(t, last(seen), deployPaused, gpus{"nvidia.com/gpu": 0})
		wantFailure(t, op, "wedged", "wedged in pending")

		// Cleared, a change of the label unwedges it, as a new value
		// restarts the real mig-manager's loop.
		op.SetFault("wedged", operator.Fault{})
		seen = change(t, c, "wedged", gpuoperator.MIGConfigLabel, "all-disabled", settled)
		wantStates(t, seen, gpuoperator.MIGStateSuccess)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 1})
	})

	t.Run("a failing change ends failed with the GPUs as they were", func(t *testing.T) {
		seen := change(t, c, "fails", gpuoperator.MIGConfigLabel, "all-1g.10gb", settled)
		wantStates(t, seen, gpuoperator.MIGStatePending, gpuoperator.MIGStateFailed)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 1})
		wantFailure(t, op, "fails", "mig-parted apply failed (fault)")
	})

	t.Run("a slow change stays pending with the old GPUs until it ends", func(t *testing.T) {
		seen := change(t, c, "slow", gpuoperator.MIGConfigLabel, "all-1g.10gb", inState(gpuoperator.MIGStatePending))
		wantStates(t, seen, gpuoperator.MIGStatePending)
		waitDelayed(t, op, "slow")
		held := waitNode(t, c, "slow", func(*corev1.Node) bool { return true })
		if s := held.Labels[gpuoperator.MIGConfigStateLabel]; s != gpuoperator.MIGStatePending {
			t.Fatalf("node slow: %s=%s during an hour's delay, want pending", gpuoperator.MIGConfigStateLabel, s)
		}
		wantNode(t, observed{node: held}, deployPaused, gpus{"nvidia.com/gpu": 1})

		op.SetFault("slow", operator.Fault{})
		done := waitNode(t, c, "slow", settled)
		if s := done.Labels[gpuoperator.MIGConfigStateLabel]; s != gpuoperator.MIGStateSuccess {
			t.Errorf("node slow: %s=%s once the delay ended, want success", gpuoperator.MIGConfigStateLabel, s)
		}
		wantNode(t, observed{node: done}, deployTrue, gpus{"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 7})
	})

	t.Run("a change that reboots passes through rebooting", func(t *testing.T) {
		seen := change(t, c, "reboots", gpuoperator.MIGConfigLabel, "all-1g.10gb", settled)
		wantStates(t, seen, gpuoperator.MIGStatePending, gpuoperator.MIGStateRebooting, gpuoperator.MIGStatePending, gpuoperator.MIGStateSuccess)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 7})
	})

	t.Run("a node added after the start is acted on once seen", func(t *testing.T) {
		c.AddGPUNode("late", testcluster.GPUNode{Product: h100, MemoryMiB: 81559, GPUs: 1})
		c.WaitGPUOperatorSeen(op, "late")
		seen := change(t, c, "late", gpuoperator.MIGConfigLabel, "all-1g.10gb", settled)
		wantStates(t, seen, gpuoperator.MIGStatePending, gpuoperator.MIGStateSuccess)
		wantNode(t, last(seen), deployTrue, gpus{"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 7})
	})

	t.Run("kwok keeps the advertised GPUs and the rest of the status", func(t *testing.T) {
		n, err := c.Client().CoreV1().Nodes().Get(t.Context(), "mig", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantNode(t, observed{node: n}, deployTrue, gpus{"nvidia.com/gpu": 2, "nvidia.com/mig-3g.40gb": 0})
		if cpu := n.Status.Allocatable[corev1.ResourceCPU]; cpu.Value() != 128 || !ready(n) {
			t.Errorf("node mig: allocatable CPU %v, Ready %v; want kwok's status kept (128 CPUs, Ready)", cpu.String(), ready(n))
		}
	})
}

// observed is the node when its state label took a new value.
type observed struct {
	state string
	node  *corev1.Node
}

// settled is true once a MIG change has ended, in success or failed.
func settled(n *corev1.Node) bool {
	s := n.Labels[gpuoperator.MIGConfigStateLabel]
	return s == gpuoperator.MIGStateSuccess || s == gpuoperator.MIGStateFailed
}

// inState is true once a MIG change is in state.
func inState(state string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool { return n.Labels[gpuoperator.MIGConfigStateLabel] == state }
}

// advertises is true once the node's GPU resources are want.
func advertises(want gpus) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool { return cmp.Equal(want, gpuResources(n)) }
}

// change sets label=value on node name and watches the node until done
// holds, returning each new value of nvidia.com/mig.config.state with the
// node as it was then, and the node at the end last. The state label is
// removed first, so that only this change's states are seen.
func change(t *testing.T, c *testcluster.Cluster, name, label, value string, done func(*corev1.Node) bool) []observed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	nodes := c.Client().CoreV1().Nodes()
	clear := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, gpuoperator.MIGConfigStateLabel)
	start, err := nodes.Patch(ctx, name, types.MergePatchType, []byte(clear), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	set, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{label: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Patch(ctx, name, types.MergePatchType, set, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var seen []observed
	for ev := range w.ResultChan() {
		n, ok := ev.Object.(*corev1.Node)
		if ev.Type != watch.Modified || !ok {
			continue
		}
		if s := n.Labels[gpuoperator.MIGConfigStateLabel]; s != "" && (len(seen) == 0 || seen[len(seen)-1].state != s) {
			seen = append(seen, observed{state: s, node: n})
		}
		if n.Labels[label] == value && done(n) {
			return append(seen, observed{state: n.Labels[gpuoperator.MIGConfigStateLabel], node: n})
		}
	}
	t.Fatalf("node %s after %s=%s: the watch ended (%v) with states %v", name, label, value, ctx.Err(), states(seen))
	return nil
}

// last is the node at the end of a change.
func last(seen []observed) observed { return seen[len(seen)-1] }

// states lists the states a change passed through, without the end.
func states(seen []observed) []string {
	var out []string
	for _, o := range seen {
		out = append(out, o.state)
	}
	return out
}

func wantStates(t *testing.T, seen []observed, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, states(seen[:len(seen)-1])); diff != "" {
		t.Errorf("states of %s (-want +got):\n%s", gpuoperator.MIGConfigStateLabel, diff)
	}
}

// wantNode checks the node's deploy labels (unless nil) and its GPU
// resources, the same in capacity and allocatable.
func wantNode(t *testing.T, o observed, deployWant map[string]string, want gpus) {
	t.Helper()
	if deployWant != nil {
		if diff := cmp.Diff(deployWant, deploy(o.node)); diff != "" {
			t.Errorf("node %s: deploy labels (-want +got):\n%s", o.node.Name, diff)
		}
	}
	if diff := cmp.Diff(want, gpuResources(o.node)); diff != "" {
		t.Errorf("node %s: allocatable GPU resources (-want +got):\n%s", o.node.Name, diff)
	}
	if diff := cmp.Diff(want, pick(o.node.Status.Capacity)); diff != "" {
		t.Errorf("node %s: capacity GPU resources (-want +got):\n%s", o.node.Name, diff)
	}
}

func wantLabels(t *testing.T, n *corev1.Node, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("node %s: %s=%q, want %q", n.Name, k, n.Labels[k], v)
		}
	}
}

func wantFailure(t *testing.T, op *operator.Operator, node, want string) {
	t.Helper()
	if err := op.LastFailure(node); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("node %s: last failure %v, want one containing %q", node, err, want)
	}
}

func wantNoFailure(t *testing.T, op *operator.Operator, node string) {
	t.Helper()
	if err := op.LastFailure(node); err != nil {
		t.Errorf("node %s: last failure %v, want none", node, err)
	}
}

// deploy returns the node's nvidia.com/gpu.deploy.* labels.
func deploy(n *corev1.Node) map[string]string {
	out := map[string]string{}
	for k, v := range n.Labels {
		if strings.HasPrefix(k, "nvidia.com/gpu.deploy.") {
			out[k] = v
		}
	}
	return out
}

// gpuResources returns the node's allocatable GPU resources.
func gpuResources(n *corev1.Node) gpus { return pick(n.Status.Allocatable) }

func pick(list corev1.ResourceList) gpus {
	out := gpus{}
	for name, q := range list {
		if kube.IsGPUResource(name) {
			out[name] = q.Value()
		}
	}
	return out
}

func ready(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitDelayed waits until a change of node name waits out its delay.
func waitDelayed(t *testing.T, op *operator.Operator, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return op.Delayed(name), nil
	})
	if err != nil {
		t.Fatalf("node %s: no change waits out its delay: %v", name, err)
	}
}

// waitNode polls node name until done holds, and returns it.
func waitNode(t *testing.T, c *testcluster.Cluster, name string, done func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		n, err = c.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && done(n), err
	})
	if err != nil {
		var labels map[string]string
		if n != nil {
			labels = n.Labels
		}
		t.Fatalf("node %s: %v; last seen labels %v", name, err, labels)
	}
	return n
}

// waitRunning waits until kwok runs pod.
func waitRunning(t *testing.T, c *testcluster.Cluster, pod *corev1.Pod) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	if err != nil {
		t.Fatalf("pod %s/%s not Running: %v", pod.Namespace, pod.Name, err)
	}
}

// deletePod deletes pod and waits until it is gone.
func deletePod(t *testing.T, c *testcluster.Cluster, pod *corev1.Pod) {
	t.Helper()
	pods := c.Client().CoreV1().Pods(pod.Namespace)
	if err := pods.Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("pod %s/%s not gone: %v", pod.Namespace, pod.Name, err)
	}
}
