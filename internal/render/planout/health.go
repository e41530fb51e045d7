package planout

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// GPUHealth is one GPU that reported XID errors in the window (dcgm-exporter's
// DCGM_FI_DEV_XID_ERRORS gauge), with what they mean and what to do.
type GPUHealth struct {
	usage.DeviceHealth
	// Critical is the first XID that marks the GPU unhealthy
	// (usage.CriticalXID); 0 when it reported application XIDs only,
	// after which the GPU is still healthy.
	Critical int `json:"critical,omitempty"`
	// TaintRules are the DeviceTaintRules the plan writes for the GPU's DRA
	// devices (FileDRATaintRules); none for a GPU that DRA does not
	// offer.
	TaintRules []string `json:"taintRules,omitempty"`
	// Fix is what to do, in words.
	Fix string `json:"fix"`
}

// HealthOf is the health of the window's GPUs with XIDs (Report.Health),
// each with its fix: the plan's DeviceTaintRules for a DRA GPU, cordoning
// its node otherwise, nothing for application XIDs. p may be nil (no plan
// yet). The list is empty, not nil, when no GPU reported an XID.
func HealthOf(hs []usage.DeviceHealth, p *plan.Plan) []GPUHealth {
	out := make([]GPUHealth, 0, len(hs))
	for _, h := range hs {
		g := GPUHealth{DeviceHealth: h, Critical: h.Critical()}
		switch {
		case g.Critical == 0:
			g.Fix = "none needed: application XIDs leave the GPU healthy; look at the workload that held it"
		default:
			if p != nil {
				for _, t := range p.Tainted {
					if t.Node == h.Node && t.UUID == h.UUID {
						g.TaintRules = append(g.TaintRules, t.Rules...)
					}
				}
			}
			if len(g.TaintRules) > 0 {
				g.Fix = fmt.Sprintf("kubectl apply -f %s (DeviceTaintRule %s, %s=%d:NoSchedule) keeps new claims off it while the pods holding it run on; drain them, reset or replace the GPU, then delete the rule",
					FileDRATaintRules, strings.Join(g.TaintRules, ", "), wellknown.TaintXID, g.Critical)
			} else {
				g.Fix = fmt.Sprintf("kubectl cordon %s, drain its GPU pods, and reset or replace the GPU (the NVIDIA device plugin stops offering it itself when its health checks are on); uncordon once it is repaired", h.Node)
			}
		}
		out = append(out, g)
	}
	return out
}

// ReportHealth is HealthOf a report's GPUs without a plan at hand (the
// report command): a GPU that DRA offers (a device of the report with a
// DRA device) is pointed at the DeviceTaintRule that `gpupack plan`
// writes for it rather than at cordoning its whole node.
func ReportHealth(r *usage.Report) []GPUHealth {
	dra := map[[2]string]string{}
	for _, d := range r.Devices {
		if d.DRADevice != "" {
			dra[[2]string{d.Node, d.UUID}] = d.DRADevice
		}
	}
	out := HealthOf(r.Health, nil)
	for i := range out {
		g := &out[i]
		if dev, ok := dra[[2]string{g.Node, g.UUID}]; ok && g.Critical != 0 {
			g.Fix = fmt.Sprintf("gpupack plan writes a DeviceTaintRule for DRA device %s (%s, %s=%d:NoSchedule): apply it to keep new claims off the GPU while the pods holding it run on; drain them, reset or replace the GPU, then delete the rule",
				dev, FileDRATaintRules, wellknown.TaintXID, g.Critical)
		}
	}
	return out
}
