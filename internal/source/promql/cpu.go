package promql

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/usage"
)

// CPUCores is each pod's mean CPU use over [end-length, end], in cores, by
// "namespace/pod": cAdvisor's CPU counter (usage.CPUUsageSeconds) of its
// containers (the pod's
// own cgroup, container="", and the pause container left out) as a rate
// over the window. A pod with no series is absent: its CPU is unknown,
// never 0. The dcgm-exporter selector does not apply: these series come
// from the kubelet.
func (s *Source) CPUCores(ctx context.Context, end time.Time, length time.Duration) (map[string]float64, error) {
	query := fmt.Sprintf(`sum by (namespace, pod) (rate(%s{container!="", container!="POD"}[%ds]))`, usage.CPUUsageSeconds, int(length.Seconds()))
	vec, err := s.queryVector(ctx, query, end)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(vec))
	for _, smp := range vec {
		v := float64(smp.Value)
		if math.IsNaN(v) || v < 0 {
			continue
		}
		out[string(smp.Metric[model.LabelName("namespace")])+"/"+string(smp.Metric["pod"])] = v
	}
	return out, nil
}
