package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/placement"
)

// TaintedDevice is a device that a claim's request accepts and no pod
// holds, kept from it by a device taint that the request does not
// tolerate.
type TaintedDevice struct {
	Node string `json:"node"`
	// Device is the DeviceID, driver/pool/device.
	Device string `json:"device"`
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
	// Rule is the DeviceTaintRule that adds the taint; empty when the
	// device's ResourceSlice has it.
	Rule string `json:"rule,omitempty"`
}

func taintedDevice(node string, u placement.UntoleratedDevice) TaintedDevice {
	return TaintedDevice{Node: node, Device: u.ID, Key: u.Taint.Key, Value: u.Taint.Value, Effect: u.Taint.Effect, Rule: u.Taint.Rule}
}

// TaintRuleChange deletes a DeviceTaintRule (Commands), so that the
// devices it taints serve claims again.
const TaintRuleChange RemedyKind = "device-taint-rule"

// claimTaint: on the nodes of ks, devices that a request accepts and no
// pod holds would serve it, but taints that it does not tolerate keep
// them. The fix is the nearest change on the node where the fewest
// devices must be untainted: the tolerations to add to the request (a
// JSON patch of its claim or template); for a taint a DeviceTaintRule
// adds, deleting the rule is named too.
func (e *engine) claimTaint(f *Finding, p *cluster.Pod, ks []int, verdicts []classVerdict) {
	f.Cause = Placement
	f.Evidence.Nodes, f.Evidence.NodeCount = e.names(e.nodesOf(ks))
	f.Evidence.Claims = e.claimFacts(p, ks, verdicts)
	bestK, bestShort := -1, 0
	for _, k := range ks {
		r := claimOf(verdicts[k].now).Claim
		if short := r.Needed - r.Free; bestK < 0 || short < bestShort {
			bestK, bestShort = k, short
		}
	}
	r := claimOf(verdicts[bestK].now).Claim
	node := e.s.Nodes[e.classes[bestK].nodes[0]]
	req := requestOf(p, r.Claim, r.Request)
	tolerations := slices.Clone(req.Tolerations)
	var added []string
	var rules []string
	devices := min(bestShort, len(r.Untolerated))
	for _, u := range r.Untolerated[:devices] {
		for _, t := range node.GPUs[u.Device.GPU].DRA.Taints {
			if t.Device != u.Taint.Device {
				continue
			}
			if _, blocked := cluster.Untolerated([]cluster.DeviceTaint{t}, t.Device, tolerations); !blocked {
				continue
			}
			tolerations = append(tolerations, cluster.DeviceToleration{Key: t.Key, Operator: cluster.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
			added = append(added, t.String())
			if t.Rule != "" && !slices.Contains(rules, t.Rule) {
				rules = append(rules, t.Rule)
			}
		}
	}
	f.addFix(fmt.Sprintf("claim %s, request %s: on %s, %d device(s) it accepts are free but tainted (%s), which the request does not tolerate; add the toleration(s) of %s to the request and the claim can be allocated there",
		r.Claim, r.Request, node.Name, len(r.Untolerated), untoleratedWords(r.Untolerated[:devices]), strings.Join(added, ", ")),
		claimSpecPatch(p, r.Claim, r.Request, "add", "tolerations", tolerations))
	for _, rule := range rules {
		f.addFix(fmt.Sprintf("once the devices that DeviceTaintRule %s taints are fit for use again, delete the rule (or narrow its selector to the devices still unfit), and no request needs the toleration", rule),
			Remedy{Kind: TaintRuleChange, Targets: []Object{{Kind: "DeviceTaintRule", Name: rule}}, Commands: []string{commandLine("kubectl", "delete", "devicetaintrule", rule)},
				Note: "a DeviceTaintRule marks devices that should not serve claims (gpupack plan writes one per GPU that reports XID errors); delete it only once they are repaired"})
	}
}

// untoleratedWords names each device, its taint and the rule that adds it.
func untoleratedWords(us []placement.UntoleratedDevice) string {
	words := make([]string, len(us))
	for i, u := range us {
		words[i] = u.ID + " has " + u.Taint.String()
		if u.Taint.Rule != "" {
			words[i] += " from DeviceTaintRule " + u.Taint.Rule
		}
	}
	return strings.Join(words, ", ")
}
