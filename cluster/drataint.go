package cluster

import (
	"fmt"
	"slices"
)

// The effects of a DRA device taint (resource.k8s.io/v1 DeviceTaintEffect).
// An effect not listed here counts as None, as the API asks consumers to
// treat unknown effects.
const (
	TaintEffectNone       = "None"
	TaintEffectNoSchedule = "NoSchedule"
	TaintEffectNoExecute  = "NoExecute"
)

// The operators of a DRA device toleration; empty means Equal.
const (
	TolerationOpEqual  = "Equal"
	TolerationOpExists = "Exists"
)

// DeviceTaint is a taint on a DRA device (DRADeviceTaints): published in
// the device's ResourceSlice or added by a DeviceTaintRule, which the
// kube-scheduler applies to the slices it reads. A NoSchedule or NoExecute
// taint keeps the device from every claim request that does not tolerate
// it.
type DeviceTaint struct {
	// Device is the DRA device the taint is on: the GPU's device, or for
	// a MIG GPU one of its SliceDevices. Empty in a snapshot file means
	// the GPU's device.
	Device string `json:"device,omitempty"`
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	// Effect is None, NoSchedule or NoExecute; another effect counts as
	// None.
	Effect string `json:"effect"`
	// Rule names the DeviceTaintRule that adds the taint; empty when the
	// ResourceSlice has it.
	Rule string `json:"rule,omitempty"`
}

// String is the taint as kubectl writes node taints: key=value:effect.
func (t DeviceTaint) String() string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + t.Effect
}

// Blocks reports whether the taint keeps its device from requests that do
// not tolerate it: only NoSchedule and NoExecute do (the allocator's
// taintPreventsAllocation, k8s.io/dynamic-resource-allocation v0.37.2).
func (t DeviceTaint) Blocks() bool {
	return t.Effect == TaintEffectNoSchedule || t.Effect == TaintEffectNoExecute
}

// DeviceToleration is a toleration of a claim's request (exactly.tolerations
// or a firstAvailable subrequest's tolerations).
type DeviceToleration struct {
	// Key is the taint key; empty matches every key (with Exists).
	Key string `json:"key,omitempty"`
	// Operator is Equal (empty) or Exists.
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	// Effect is the effect matched; empty matches every effect.
	Effect string `json:"effect,omitempty"`
}

// Tolerates reports whether the toleration matches the taint, as
// k8s.io/dynamic-resource-allocation/resourceclaim.ToleratesTaint (v0.37.2)
// does: the effect and the key, when set, must be the taint's; Exists
// matches any value, Equal (or empty) the taint's value exactly; another
// operator matches nothing.
func (tol DeviceToleration) Tolerates(t DeviceTaint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case "", TolerationOpEqual:
		return tol.Value == t.Value
	case TolerationOpExists:
		return true
	}
	return false
}

// Untolerated is the first taint of the device named that blocks it and
// that none of the tolerations tolerates; ok is false when the request may
// have the device.
func Untolerated(taints []DeviceTaint, device string, tolerations []DeviceToleration) (DeviceTaint, bool) {
	for _, t := range taints {
		if t.Device != device || !t.Blocks() {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol DeviceToleration) bool { return tol.Tolerates(t) }) {
			return t, true
		}
	}
	return DeviceTaint{}, false
}

// checkTaints validates a file GPU group's device taints and names each
// taint's device: an empty device is the GPU's whole device.
func checkTaints(d *DRADevice) error {
	names := d.Names()
	for i := range d.Taints {
		t := &d.Taints[i]
		if t.Device == "" {
			if d.Device == "" {
				return fmt.Errorf("taints[%d].device: missing; a MIG GPU's taint names one of its sliceDevices", i)
			}
			t.Device = d.Device
		}
		switch {
		case !slices.Contains(names, t.Device):
			return fmt.Errorf("taints[%d].device: %q is not a device of this GPU (%v)", i, t.Device, names)
		case t.Key == "":
			return fmt.Errorf("taints[%d].key: missing", i)
		case t.Effect == "":
			return fmt.Errorf("taints[%d].effect: missing (None, NoSchedule or NoExecute)", i)
		}
	}
	return nil
}

// checkTolerations validates a request's tolerations as the apiserver
// does (v1.37.2, validateDeviceToleration): Equal or Exists, no value with
// Exists, an effect None, NoSchedule or NoExecute when given.
func checkTolerations(tols []DeviceToleration) error {
	for i, t := range tols {
		switch {
		case t.Operator != "" && t.Operator != TolerationOpEqual && t.Operator != TolerationOpExists:
			return fmt.Errorf("tolerations[%d].operator: %q (want Equal or Exists)", i, t.Operator)
		case t.Operator == TolerationOpExists && t.Value != "":
			return fmt.Errorf("tolerations[%d].value: must be empty with operator Exists", i)
		case t.Effect != "" && t.Effect != TaintEffectNone && t.Effect != TaintEffectNoSchedule && t.Effect != TaintEffectNoExecute:
			return fmt.Errorf("tolerations[%d].effect: %q (want None, NoSchedule, NoExecute, or empty for every effect)", i, t.Effect)
		}
	}
	return nil
}
