package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
)

// nodeState is what the stand-in knows of one GPU node: its GPUs, what
// they hold (the hardware's state, which a MIG change alters), how the
// device plugin shares them (which a device plugin change alters), and the
// label values it last acted on.
type nodeState struct {
	gpus         int
	model        *gpu.Model // nil: not in the catalogue
	devices      Devices
	sharing      Sharing
	migConfig    string
	pluginConfig string
}

// seed reads the state of a node first seen from its labels and resources,
// as testcluster.GPUNode writes them and GPU feature discovery and the
// device plugin would: the GPU count from nvidia.com/gpu.count, the
// sharing from nvidia.com/gpu.replicas and nvidia.com/gpu.sharing-strategy
// (renamed when nvidia.com/gpu.shared is advertised), the MIG devices from
// nvidia.com/mig-*, and the whole GPUs from nvidia.com/gpu or
// nvidia.com/gpu.shared over the replicas. A node without a GPU count is
// not a GPU node: false.
func seed(n *corev1.Node, catalogue *gpu.Catalogue) (*nodeState, bool) {
	gpus, err := strconv.Atoi(n.Labels[kube.LabelGPUCount])
	if err != nil || gpus < 1 {
		return nil, false
	}
	st := &nodeState{
		gpus:         gpus,
		sharing:      noSharing,
		devices:      Devices{MIG: map[string]int64{}},
		migConfig:    n.Labels[gpuoperator.MIGConfigLabel],
		pluginConfig: n.Labels[gpuoperator.DevicePluginConfigLabel],
	}
	if m, ok := catalogue.Lookup(strings.TrimSuffix(n.Labels[kube.LabelGPUProduct], sharedProductSuffix)); ok {
		st.model = m
	}
	if r, err := strconv.ParseInt(n.Labels[kube.LabelGPUReplicas], 10, 64); err == nil && r > 1 {
		st.sharing.Replicas = r
		st.sharing.Strategy = n.Labels[kube.LabelGPUSharingStrategy]
	}
	alloc := n.Status.Allocatable
	shared := quantity(alloc, kube.ResourceGPUShared)
	st.sharing.Renamed = shared > 0
	st.devices.Whole = (quantity(alloc, kube.ResourceGPU) + shared) / st.sharing.Replicas
	for name, q := range alloc {
		if profile, ok := strings.CutPrefix(string(name), kube.ResourceMIGPrefix); ok && q.Value() > 0 {
			st.devices.MIG[profile] = q.Value()
		}
	}
	return st, true
}

// asked reports whether node's labels ask for a change the stand-in has
// not acted on.
func (st *nodeState) asked(node *corev1.Node) bool {
	return node.Labels[gpuoperator.MIGConfigLabel] != st.migConfig ||
		node.Labels[gpuoperator.DevicePluginConfigLabel] != st.pluginConfig
}

// quantity is the value of resource name in list, 0 when absent.
func quantity(list corev1.ResourceList, name corev1.ResourceName) int64 {
	q, ok := list[name]
	if !ok {
		return 0
	}
	return q.Value()
}

// advertise sets the GPU resources in the status of node name, capacity
// and allocatable alike, to res. A GPU resource the node has that res
// lacks is set to 0, as the kubelet does when a device plugin stops
// advertising it (pkg/kubelet/nodestatus/setters.go), so an empty res
// advertises no GPU at all. The patch touches nothing else, so that kwok's
// node status stays as it is.
func (o *Operator) advertise(ctx context.Context, name string, res map[corev1.ResourceName]int64) error {
	node, err := o.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read node %s: %w", name, err)
	}
	list := map[corev1.ResourceName]string{}
	for r := range node.Status.Capacity {
		if kube.IsGPUResource(r) {
			list[r] = "0"
		}
	}
	for r, n := range res {
		list[r] = resource.NewQuantity(n, resource.DecimalSI).String()
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": list, "allocatable": list}})
	if err != nil {
		return err
	}
	if _, err := o.client.CoreV1().Nodes().PatchStatus(ctx, name, patch); err != nil {
		return fmt.Errorf("advertise %v on node %s: %w", list, name, err)
	}
	return nil
}

// label merges labels into the node's, as mig-manager and GPU feature
// discovery do (a JSON merge patch of metadata.labels).
func (o *Operator) label(ctx context.Context, name string, labels ...map[string]string) error {
	merged := map[string]string{}
	for _, l := range labels {
		maps.Copy(merged, l)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": merged}})
	if err != nil {
		return err
	}
	if _, err := o.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node %s with %v: %w", name, merged, err)
	}
	return nil
}
