package promsource

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/usage"
)

// gpuLabels are the labels that name a physical GPU (a MIG instance's
// series count for its GPU).
const gpuLabels = "Hostname, hostname, node, kubernetes_node, gpu, UUID, uuid"

// LoadHealth reads, for the hourly path, the XIDs each GPU reported in the
// window from dcgm-exporter's XID gauge, as the raw path's usage.Account
// does (Report.Health): one instant query at the window's end, whose
// subquery at the window's step sees the gauge's distinct non-zero values
// (a value held for less than a step may be missed).
func (s *Source) LoadHealth(ctx context.Context, w usage.Window) ([]usage.DeviceHealth, error) {
	step := max(int(w.Step.Seconds()), 1)
	query := fmt.Sprintf(`count by (%s, xid) (count_over_time((count_values by (%s) ("xid", %s != 0))[%ds:%ds]))`,
		gpuLabels, gpuLabels, usage.XIDErrors, int(w.End.Sub(w.Start).Seconds()), step)
	v, _, _, err := s.api.Query(ctx, query, w.End.Add(-time.Millisecond))
	if err != nil {
		return nil, s.fail(query, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus %s: query %q returned a %s, want an instant vector", s.url, query, v.Type())
	}
	byGPU := map[string]*usage.DeviceHealth{}
	for _, smp := range vec {
		d := device(smp.Metric)
		xid, err := strconv.Atoi(string(smp.Metric["xid"]))
		if err != nil || xid == 0 {
			continue
		}
		key := d.Node + "/" + d.UUID
		h := byGPU[key]
		if h == nil {
			h = &usage.DeviceHealth{Node: d.Node, UUID: d.UUID, GPU: d.GPU}
			byGPU[key] = h
		}
		if !slices.Contains(h.XIDs, xid) {
			h.XIDs = append(h.XIDs, xid)
		}
	}
	var out []usage.DeviceHealth
	for _, h := range byGPU {
		slices.Sort(h.XIDs)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node+"/"+out[i].UUID < out[j].Node+"/"+out[j].UUID })
	return out, nil
}
