package kube

import (
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpupack/gpupack/cluster"
)

// taintDevices gives each device its taints (DRADeviceTaints): those of
// its ResourceSlice, then those of the DeviceTaintRules that select it, in
// the rules' order, as the kube-scheduler's ResourceSlice tracker applies
// them (k8s.io/dynamic-resource-allocation/resourceslice/tracker,
// applyPatches, v0.37.2): a rule without a selector selects nothing; its
// driver, pool and device, each when set, must be the device's.
func (v *draView) taintDevices(devices []*draDevice, objs *DRAObjects) {
	if objs.TaintRulesUnserved {
		v.warnings = append(v.warnings, "the cluster does not serve DeviceTaintRules (resource.k8s.io/v1 devicetaintrules, Kubernetes 1.37): taints that rules would add to devices are not seen")
	}
	for _, d := range devices {
		for _, t := range d.device.Taints {
			d.taints = append(d.taints, deviceTaint(d.device.Name, t, ""))
		}
		for _, rule := range objs.TaintRules {
			if taintRuleSelects(rule, d) {
				d.taints = append(d.taints, deviceTaint(d.device.Name, rule.Spec.Taint, rule.Name))
			}
		}
	}
}

func taintRuleSelects(rule *resourcev1.DeviceTaintRule, d *draDevice) bool {
	sel := rule.Spec.DeviceSelector
	switch {
	case sel == nil:
		return false
	case sel.Driver != nil && *sel.Driver != d.slice.Spec.Driver:
		return false
	case sel.Pool != nil && *sel.Pool != d.slice.Spec.Pool.Name:
		return false
	case sel.Device != nil && *sel.Device != d.device.Name:
		return false
	}
	return true
}

// DeviceTaints converts a device's taints (as a ResourceSlice or the
// scheduler's view with DeviceTaintRules applied has them).
func DeviceTaints(device string, in []resourcev1.DeviceTaint) []cluster.DeviceTaint {
	var out []cluster.DeviceTaint
	for _, t := range in {
		out = append(out, deviceTaint(device, t, ""))
	}
	return out
}

func deviceTaint(device string, t resourcev1.DeviceTaint, rule string) cluster.DeviceTaint {
	return cluster.DeviceTaint{Device: device, Key: t.Key, Value: t.Value, Effect: string(t.Effect), Rule: rule}
}

// Tolerations converts a request's tolerations.
func Tolerations(in []resourcev1.DeviceToleration) []cluster.DeviceToleration {
	var out []cluster.DeviceToleration
	for _, t := range in {
		out = append(out, cluster.DeviceToleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

// evicted warns when an allocated device has a NoExecute taint that the
// allocation's tolerations (copied from the request when it was allocated)
// do not tolerate: kube-controller-manager's device taint eviction
// controller deletes the pods that use the claim, which gpupack does not
// foresee; it counts the device as held until they go.
func (v *draView) evicted(claim string, r resourcev1.DeviceRequestAllocationResult) string {
	id := cluster.DeviceID(r.Driver, r.Pool, r.Device)
	taints := v.taints[id]
	if len(taints) == 0 {
		return ""
	}
	tols := Tolerations(r.Tolerations)
	for _, t := range taints {
		if t.Effect != cluster.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tols, func(tol cluster.DeviceToleration) bool { return tol.Tolerates(t) }) {
			rule := ""
			if t.Rule != "" {
				rule = " (DeviceTaintRule " + t.Rule + ")"
			}
			return fmt.Sprintf("its claim %s holds device %s, whose NoExecute taint %s%s the claim does not tolerate: the device taint eviction controller evicts the pod; gpupack counts the device as held until it goes", claim, id, t, rule)
		}
	}
	return ""
}
