package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/plan"
)

// changeDevicePlugin switches the device plugin of node to the
// configuration value, as the device plugin's config-manager does
// (cmd/config-manager/main.go of NVIDIA/k8s-device-plugin): it reads the
// key value of the device plugin ConfigMap (an empty value, the label
// removed, selects the plugin's default: no sharing), GPU feature
// discovery labels the node with the new sharing, and the plugin
// advertises the node's whole GPUs shared so (in that order, so that a
// test which waits for the resources sees the labels too). A configuration that is missing or invalid changes
// nothing (the real config-manager exits and the plugin keeps its
// configuration); LastFailure says why. It returns the sharing in force
// afterwards, and an error only when the apiserver failed a step.
func (o *Operator) changeDevicePlugin(ctx context.Context, node *corev1.Node, st *nodeState, value string) (Sharing, error) {
	o.opts.Logf("gpu operator stand-in: node %s: %s=%s", node.Name, gpuoperator.DevicePluginConfigLabel, value)
	sharing, err := o.pluginSharing(ctx, value)
	if err != nil {
		o.recordFailure(node.Name, fmt.Errorf("%s=%s: %w", gpuoperator.DevicePluginConfigLabel, value, err))
		return st.sharing, nil
	}
	if err := o.label(ctx, node.Name, featureLabels(sharing, node.Labels[kube.LabelGPUProduct])); err != nil {
		return st.sharing, err
	}
	if err := o.advertise(ctx, node.Name, Resources(st.devices, sharing)); err != nil {
		return st.sharing, err
	}
	o.recordFailure(node.Name, nil)
	return sharing, nil
}

// pluginSharing reads the named device plugin configuration from the
// ConfigMap and returns its sharing.
func (o *Operator) pluginSharing(ctx context.Context, name string) (Sharing, error) {
	if name == "" {
		return noSharing, nil
	}
	ns, cmName := o.opts.Namespace, o.opts.DevicePluginConfigMap
	cm, err := o.client.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		return Sharing{}, fmt.Errorf("read ConfigMap %s/%s: %w", ns, cmName, err)
	}
	data, ok := cm.Data[name]
	if !ok {
		return Sharing{}, fmt.Errorf("no such configuration in ConfigMap %s/%s (it has %s)", ns, cmName, strings.Join(slices.Sorted(maps.Keys(cm.Data)), ", "))
	}
	var c plan.DevicePluginConfig
	if err := yaml.UnmarshalStrict([]byte(data), &c); err != nil {
		return Sharing{}, fmt.Errorf("ConfigMap %s/%s key %s: %w", ns, cmName, name, err)
	}
	s, err := SharingOf(c)
	if err != nil {
		return Sharing{}, fmt.Errorf("ConfigMap %s/%s key %s: %w", ns, cmName, name, err)
	}
	return s, nil
}
