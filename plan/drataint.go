package plan

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/usage"
)

// TaintedGPU is a GPU offered through DRA that reported an XID error
// marking it unhealthy in the usage window, with the DeviceTaintRules that
// keep new claims off its devices.
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

// DeviceTaintRule is the intent of one resource.k8s.io/v1
// DeviceTaintRule: it selects one DRA device by driver, pool and device and
// taints it gpupack.io/xid=<XID> (wellknown.TaintXID) with effect
// NoSchedule, so that no new claim is allocated the device while the pods
// that hold it keep running (NoExecute would evict them). The edge builds
// the object from it.
type DeviceTaintRule struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
	XID    int    `json:"xid"`
}

// taintUnhealthy makes a DeviceTaintRule for each DRA device of every GPU
// that the usage facts say reported a critical XID. A GPU of a node that
// offers none through DRA gets nothing: the device plugin marks its GPUs
// unhealthy itself, and the plan has nothing to do. A GPU of a node that
// offers some through DRA but none of that UUID, or of a node the
// snapshot lacks, gets a warning instead, for there it is not clear who
// takes the GPU out of service.
func (pl *Plan) taintUnhealthy(s *cluster.Snapshot, u *usage.Facts) {
	if u == nil {
		return
	}
	for _, bad := range u.Unhealthy {
		n, ok := s.Node(bad.Node)
		var g *cluster.GPU
		offersDRA := false
		for i := range n.GPUs {
			offersDRA = offersDRA || n.GPUs[i].DRA != nil
			if ok && n.GPUs[i].DRA != nil && n.GPUs[i].UUID == bad.UUID {
				g = &n.GPUs[i]
			}
		}
		if ok && !offersDRA {
			continue
		}
		if g == nil {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("GPU %s of node %s reported XID %d, but no GPU that DRA offers there has that UUID (the NVIDIA device plugin marks its own GPUs unhealthy itself); no DeviceTaintRule is written for it", bad.UUID, bad.Node, bad.XID))
			continue
		}
		tg := TaintedGPU{Node: bad.Node, UUID: bad.UUID, XID: bad.XID}
		for _, device := range g.DRA.Names() {
			name := taintRuleName(g.DRA.Pool, device)
			pl.TaintRules = append(pl.TaintRules, DeviceTaintRule{Name: name, Driver: g.DRA.Driver, Pool: g.DRA.Pool, Device: device, XID: bad.XID})
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
