package plan

import (
	"fmt"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/usage"
)

// TaintedGPU is a GPU offered through DRA that reported an XID error
// marking it unhealthy in the usage window, with the DeviceTaintRules
// (resource.k8s.io/v1) that keep new claims off its devices.
type TaintedGPU struct {
	Node string `json:"node"`
	UUID string `json:"uuid"`
	XID  int    `json:"xid"`
	// Devices are its DRA devices (driver/pool/device): the whole GPU, or
	// its MIG devices.
	Devices []string `json:"devices"`
	// Rules are the names of the DeviceTaintRules, one per device.
	Rules []string `json:"rules"`
}

// taintUnhealthy makes a DeviceTaintRule with a NoSchedule taint
// gpupack.io/xid=<XID> for each DRA device of every GPU that the usage
// facts say reported a critical XID, so that no new claim is allocated it
// while pods that hold it keep running (NoExecute would evict them). A GPU
// that DRA does not offer gets a warning instead (the device plugin marks
// its GPUs unhealthy itself).
func (pl *Plan) taintUnhealthy(s *cluster.Snapshot, u *usage.Facts) {
	if u == nil {
		return
	}
	for _, bad := range u.Unhealthy {
		n, ok := s.Node(bad.Node)
		var g *cluster.GPU
		for i := range n.GPUs {
			if ok && n.GPUs[i].DRA != nil && n.GPUs[i].UUID == bad.UUID {
				g = &n.GPUs[i]
			}
		}
		if g == nil {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("GPU %s of node %s reported XID %d, but no GPU that DRA offers there has that UUID (the NVIDIA device plugin marks its own GPUs unhealthy itself); no DeviceTaintRule is written for it", bad.UUID, bad.Node, bad.XID))
			continue
		}
		tg := TaintedGPU{Node: bad.Node, UUID: bad.UUID, XID: bad.XID}
		for _, device := range g.DRA.Names() {
			name := taintRuleName(g.DRA.Pool, device)
			pl.TaintRules = append(pl.TaintRules, resourcev1.DeviceTaintRule{
				TypeMeta:   metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "DeviceTaintRule"},
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: resourcev1.DeviceTaintRuleSpec{
					DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(g.DRA.Driver), Pool: ptr.To(g.DRA.Pool), Device: ptr.To(device)},
					Taint:          resourcev1.DeviceTaint{Key: wellknown.TaintXID, Value: strconv.Itoa(bad.XID), Effect: resourcev1.DeviceTaintEffectNoSchedule},
				},
			})
			tg.Devices = append(tg.Devices, cluster.DeviceID(g.DRA.Driver, g.DRA.Pool, device))
			tg.Rules = append(tg.Rules, name)
		}
		pl.Tainted = append(pl.Tainted, tg)
	}
}

// taintRuleName is gpupack-unhealthy-<pool>-<device>, lowercased with
// characters a DNS subdomain does not allow made dashes, and cut to 253.
func taintRuleName(pool, device string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, "gpupack-unhealthy-"+pool+"-"+device)
	return strings.TrimRight(name[:min(len(name), 253)], "-.")
}

// TaintRuleManifests renders the DeviceTaintRules as one multi-document
// YAML file; empty when no DRA GPU is unhealthy.
func (pl *Plan) TaintRuleManifests() ([]byte, error) {
	var docs []string
	for _, r := range pl.TaintRules {
		// Without the empty status a DeviceTaintRule would print.
		b, err := yaml.Marshal(struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta              `json:"metadata"`
			Spec            resourcev1.DeviceTaintRuleSpec `json:"spec"`
		}{r.TypeMeta, r.ObjectMeta, r.Spec})
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(b))
	}
	return []byte(strings.Join(docs, "---\n")), nil
}
