package usage

import (
	"fmt"
	"slices"
	"sort"
)

// XIDErrors is dcgm-exporter's gauge of the last XID error a GPU reported
// (DCGM_FI_DEV_XID_ERRORS, "Value of the last XID error encountered.", in
// its default counters, etc/default-counters.csv); 0 when none. XIDs are
// positive codes: a value that is not a positive integer names none.
const XIDErrors = "DCGM_FI_DEV_XID_ERRORS"

// HealthMetrics are the metrics of GPU health that usage reads beside
// Metrics: the raw path queries them too; the hourly path reads the XIDs
// with a query of its own (promsource.LoadHealth).
var HealthMetrics = []string{XIDErrors}

// applicationXIDs are the XIDs that an application causes, after which the
// GPU is still healthy: the ones NVIDIA's device plugin ignores in its
// health check (github.com/NVIDIA/k8s-device-plugin, internal/rm/health.go:
// 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped
// processing, 45 preemptive cleanup, 68 video processor exception, 109
// context switch timeout). Every other XID marks the GPU unhealthy, as
// there.
var applicationXIDs = []int{13, 31, 43, 45, 68, 109}

// CriticalXID reports whether an XID marks its GPU unhealthy.
func CriticalXID(xid int) bool { return xid != 0 && !slices.Contains(applicationXIDs, xid) }

// DeviceHealth is what the XID gauge says of one GPU that reported XIDs in
// the window: the distinct XIDs (positive integer values, in order of
// value).
type DeviceHealth struct {
	Node string `json:"node"`
	UUID string `json:"uuid"`
	GPU  string `json:"gpu"`
	XIDs []int  `json:"xids,omitempty"`
}

// Critical is the first XID that marks the GPU unhealthy, 0 if none.
func (h DeviceHealth) Critical() int {
	for _, x := range h.XIDs {
		if CriticalXID(x) {
			return x
		}
	}
	return 0
}

// UnhealthyGPU is a GPU that reported a critical XID in the window, as
// the usage facts carry it for plan: by node and UUID (the UUID label of
// dcgm-exporter, which NVIDIA's DRA driver publishes as the device's uuid
// attribute).
type UnhealthyGPU struct {
	Node string `json:"node"`
	UUID string `json:"uuid"`
	XID  int    `json:"xid"`
}

// health reads the XID gauge of each physical GPU (a MIG instance's series
// count for its GPU) within the window.
func health(series []Series, w Window) []DeviceHealth {
	startMs, endMs := w.Start.UnixMilli(), w.End.UnixMilli()
	byGPU := map[string]*DeviceHealth{}
	for i := range series {
		s := &series[i]
		if s.Metric != XIDErrors {
			continue
		}
		key := s.Device.Node + "/" + s.Device.UUID
		h := byGPU[key]
		if h == nil {
			h = &DeviceHealth{Node: s.Device.Node, UUID: s.Device.UUID, GPU: s.Device.GPU}
			byGPU[key] = h
		}
		for _, smp := range s.Samples {
			x := int(smp.Value)
			if smp.TimeMs < startMs || smp.TimeMs >= endMs || smp.Value != float64(x) || x <= 0 || slices.Contains(h.XIDs, x) {
				continue
			}
			h.XIDs = append(h.XIDs, x)
		}
	}
	var out []DeviceHealth
	for _, h := range byGPU {
		if len(h.XIDs) == 0 {
			continue
		}
		slices.Sort(h.XIDs)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node+"/"+out[i].UUID < out[j].Node+"/"+out[j].UUID })
	return out
}

// unhealthy lists the GPUs of the report's health with a critical XID.
func unhealthy(hs []DeviceHealth) []UnhealthyGPU {
	var out []UnhealthyGPU
	for _, h := range hs {
		if x := h.Critical(); x != 0 {
			out = append(out, UnhealthyGPU{Node: h.Node, UUID: h.UUID, XID: x})
		}
	}
	return out
}

// checkUnhealthy validates the usage file's unhealthy GPUs.
func checkUnhealthy(gpus []UnhealthyGPU) error {
	seen := map[string]int{}
	for i, g := range gpus {
		switch {
		case g.Node == "" || g.UUID == "":
			return fmt.Errorf("unhealthyGPUs[%d]: node and uuid are both needed", i)
		case !CriticalXID(g.XID):
			return fmt.Errorf("unhealthyGPUs[%d].xid: %d is not an XID that marks a GPU unhealthy (0, or an application error: %v)", i, g.XID, applicationXIDs)
		}
		key := g.Node + "/" + g.UUID
		if prev, dup := seen[key]; dup {
			return fmt.Errorf("unhealthyGPUs[%d]: GPU %s is already listed at unhealthyGPUs[%d]", i, key, prev)
		}
		seen[key] = i
	}
	return nil
}
