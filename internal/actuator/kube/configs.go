package kube

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/plan"
)

// migPartedFile is mig-parted's configuration file, version v1.
type migPartedFile struct {
	Version    string                                   `json:"version"`
	MIGConfigs map[string][]gpuoperator.MIGDeviceConfig `json:"mig-configs"`
}

// EnsureConfigs merges the configs the node's target labels name into
// the two ConfigMaps: an entry of the same name and content is left, one
// of the same name and other content is refused (another node may use
// it), entries of other names are kept. Writes retry on conflicts.
func (a *Actuator) EnsureConfigs(ctx context.Context, set *change.Set, n change.Node) error {
	for _, l := range n.Labels {
		switch l.Key {
		case gpuoperator.MIGConfigLabel:
			if c, ok := set.MIGConfigs[l.To]; ok {
				if err := a.mergeMIG(ctx, l.To, c); err != nil {
					return err
				}
			}
		case gpuoperator.DevicePluginConfigLabel:
			if c, ok := set.DevicePluginConfigs[l.To]; ok {
				if err := a.mergeDevicePlugin(ctx, l.To, c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (a *Actuator) mergeMIG(ctx context.Context, name string, groups []gpuoperator.MIGDeviceConfig) error {
	ref := a.MIGParted
	return a.update(ctx, ref, func(cm *corev1.ConfigMap) (bool, error) {
		var f migPartedFile
		if text := cm.Data[ref.Key]; text != "" {
			configs, err := gpuoperator.ParseMIGPartedConfig([]byte(text))
			if err != nil {
				return false, fmt.Errorf("ConfigMap %s/%s key %s is not a valid mig-parted config: %v; fix it first", ref.Namespace, ref.Name, ref.Key, err)
			}
			f.MIGConfigs = configs
		}
		if f.Version == "" {
			f.Version = "v1"
		}
		if f.MIGConfigs == nil {
			f.MIGConfigs = map[string][]gpuoperator.MIGDeviceConfig{}
		}
		if old, ok := f.MIGConfigs[name]; ok {
			if sameYAML(old, groups) {
				return false, nil
			}
			return false, fmt.Errorf("ConfigMap %s/%s already has a mig-parted config %q with other content; gpupack never overwrites a config that nodes may use: rename or remove it", ref.Namespace, ref.Name, name)
		}
		f.MIGConfigs[name] = groups
		b, err := yaml.Marshal(f)
		if err != nil {
			return false, err
		}
		// What mig-manager will read must pass mig-parted's own checks.
		if _, err := gpuoperator.ParseMIGPartedConfig(b); err != nil {
			return false, fmt.Errorf("ConfigMap %s/%s with %q merged would not be a valid mig-parted config: %w", ref.Namespace, ref.Name, name, err)
		}
		cm.Data[ref.Key] = string(b)
		return true, nil
	})
}

func (a *Actuator) mergeDevicePlugin(ctx context.Context, name string, c plan.DevicePluginConfig) error {
	ref := a.DevicePlugin
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return a.update(ctx, ref, func(cm *corev1.ConfigMap) (bool, error) {
		if old, ok := cm.Data[name]; ok {
			var oldConfig plan.DevicePluginConfig
			if err := yaml.Unmarshal([]byte(old), &oldConfig); err == nil && reflect.DeepEqual(oldConfig, c) {
				return false, nil
			}
			return false, fmt.Errorf("ConfigMap %s/%s already has a device plugin config %q with other content; gpupack never overwrites a config that nodes may use: rename or remove it", ref.Namespace, ref.Name, name)
		}
		cm.Data[name] = string(b)
		return true, nil
	})
}

// update reads the ConfigMap (creating it empty when absent), lets edit
// change it and writes it back, retrying on conflicts.
func (a *Actuator) update(ctx context.Context, ref ConfigMapRef, edit func(*corev1.ConfigMap) (bool, error)) error {
	cms := a.Client.CoreV1().ConfigMaps(ref.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, ref.Name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		switch {
		case create:
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
		case err != nil:
			return fmt.Errorf("reading ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed, err := edit(cm)
		if err != nil || !changed {
			return err
		}
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: a.Component})
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: a.Component})
		}
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("writing ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		return err
	})
}

// sameYAML compares two values as their YAML says them (Devices may be
// "all", []int or []any after a round trip).
func sameYAML(a, b any) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
