package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/internal/source/kube"
)

// changeMIG applies the mig-parted configuration value to node, walking
// nvidia.com/mig.config.state as mig-manager does (pkg/mig/reconfigure/
// reconfigure.go of NVIDIA/mig-parted, Run):
//
//   - the configuration must be in the ConfigMap's file, else failed at
//     once (mig-parted assert --valid-config);
//   - if the node's GPUs already hold it, success at once (assert);
//   - pending, with the GPU agents' deploy labels paused;
//   - with Reboot, rebooting and back to pending (the mode change needs a
//     reboot; mig-manager starts again after it);
//   - failed, when the devices do not fit the node's GPUs, when a pod on
//     the node holds a GPU, or with Fail (mig-parted apply fails);
//   - otherwise success.
//
// Whenever it ends, the agents are restored and the node advertises what
// its GPUs hold then: the new devices on success, the old ones on failure.
//
// With Wedge it stops in pending, agents paused, no GPU advertised. It
// returns the devices the node's GPUs hold afterwards, and an error only
// when the apiserver failed a step.
func (o *Operator) changeMIG(ctx context.Context, node *corev1.Node, st *nodeState, value string) (Devices, error) {
	o.opts.Logf("gpu operator stand-in: node %s: %s=%s", node.Name, gpuoperator.MIGConfigLabel, value)
	groups, err := o.migConfig(ctx, value)
	if err != nil {
		return st.devices, o.endMIG(ctx, node, st, gpuoperator.MIGStateFailed, err)
	}
	devices, fitErr := MIGDevices(st.model, st.gpus, groups)
	if fitErr == nil && sameDevices(devices, st.devices) {
		return st.devices, o.endMIG(ctx, node, st, gpuoperator.MIGStateSuccess, nil)
	}
	pending := map[string]string{gpuoperator.MIGConfigStateLabel: gpuoperator.MIGStatePending}
	if err := o.label(ctx, node.Name, pending, gpuoperator.DeployLabelsPaused(node.Labels)); err != nil {
		return st.devices, err
	}
	if fault, _ := o.fault(node.Name); fault.Outcome == Wedge {
		o.recordFailure(node.Name, fmt.Errorf("%s=%s: wedged in pending with the GPU agents paused (fault)", gpuoperator.MIGConfigLabel, value))
		return st.devices, o.advertise(ctx, node.Name, nil)
	}
	if fault, _ := o.fault(node.Name); fault.Reboot {
		if err := o.reboot(ctx, node.Name); err != nil {
			return st.devices, err
		}
	}
	fault, err := o.delay(ctx, node.Name)
	if err != nil {
		return st.devices, err
	}
	holders, err := o.gpuPods(ctx, node.Name)
	if err != nil {
		return st.devices, err
	}
	if why := applyFailure(fitErr, holders, fault); why != nil {
		return st.devices, o.endMIG(ctx, node, st, gpuoperator.MIGStateFailed, fmt.Errorf("%s=%s: %w", gpuoperator.MIGConfigLabel, value, why))
	}
	applied := *st
	applied.devices = devices
	return devices, o.endMIG(ctx, node, &applied, gpuoperator.MIGStateSuccess, nil)
}

// reboot labels the node rebooting for its fault's delay, then pending
// again, as mig-manager does across the reboot it asks for.
func (o *Operator) reboot(ctx context.Context, name string) error {
	if err := o.label(ctx, name, map[string]string{gpuoperator.MIGConfigStateLabel: gpuoperator.MIGStateRebooting}); err != nil {
		return err
	}
	if _, err := o.delay(ctx, name); err != nil {
		return err
	}
	return o.label(ctx, name, map[string]string{gpuoperator.MIGConfigStateLabel: gpuoperator.MIGStatePending})
}

// applyFailure says why mig-parted would fail to apply the configuration:
// its devices do not fit the node's GPUs (fitErr), pods hold GPUs, or the
// fault says so; nil when it applies.
func applyFailure(fitErr error, holders []string, fault Fault) error {
	switch {
	case fitErr != nil:
		return fitErr
	case len(holders) > 0:
		return fmt.Errorf("GPUs in use by pods %s (mig-parted cannot re-partition a GPU in use; drain the node first)", strings.Join(holders, ", "))
	case fault.Outcome == Fail:
		return fmt.Errorf("mig-parted apply failed (fault)")
	}
	return nil
}

// endMIG ends a change as mig-manager's setState does: the GPU agents'
// deploy labels restored, so the device plugin starts again and advertises
// what the GPUs hold (st's devices, shared as st says), then the final
// state. It records why the change failed (nil on success).
func (o *Operator) endMIG(ctx context.Context, node *corev1.Node, st *nodeState, state string, why error) error {
	o.recordFailure(node.Name, why)
	if err := o.advertise(ctx, node.Name, Resources(st.devices, st.sharing)); err != nil {
		return err
	}
	return o.label(ctx, node.Name, gpuoperator.DeployLabelsRestored(node.Labels), map[string]string{gpuoperator.MIGConfigStateLabel: state})
}

// migConfig reads the named configuration from the mig-parted ConfigMap,
// as mig-manager reads the file the GPU operator mounts from it.
func (o *Operator) migConfig(ctx context.Context, name string) ([]gpuoperator.MIGDeviceConfig, error) {
	ns, cmName, key := o.opts.Namespace, o.opts.MIGPartedConfigMap, gpuoperator.MIGPartedConfigMapKey
	cm, err := o.client.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s=%s: read ConfigMap %s/%s: %w", gpuoperator.MIGConfigLabel, name, ns, cmName, err)
	}
	data, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("%s=%s: ConfigMap %s/%s has no key %s", gpuoperator.MIGConfigLabel, name, ns, cmName, key)
	}
	configs, err := gpuoperator.ParseMIGPartedConfig([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("%s=%s: ConfigMap %s/%s key %s: %w", gpuoperator.MIGConfigLabel, name, ns, cmName, key, err)
	}
	groups, ok := configs[name]
	if !ok {
		return nil, fmt.Errorf("%s=%s: no such configuration in ConfigMap %s/%s (it has %s)", gpuoperator.MIGConfigLabel, name, ns, cmName, strings.Join(slices.Sorted(maps.Keys(configs)), ", "))
	}
	return groups, nil
}

// gpuPods names the pods on the node, not yet terminated, that request a
// GPU resource: whole GPUs, their shares or MIG devices.
func (o *Operator) gpuPods(ctx context.Context, nodeName string) ([]string, error) {
	pods, err := o.client.CoreV1().Pods(corev1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the pods of node %s: %w", nodeName, err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && holdsGPU(&p) {
			names = append(names, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// holdsGPU reports whether a container of p requests or limits a GPU
// resource.
func holdsGPU(p *corev1.Pod) bool {
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name, q := range list {
				if kube.IsGPUResource(name) && !q.IsZero() {
					return true
				}
			}
		}
	}
	return false
}

// sameDevices reports whether a and b hold the same devices.
func sameDevices(a, b Devices) bool {
	return a.Whole == b.Whole && maps.Equal(a.MIG, b.MIG)
}
