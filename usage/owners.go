package usage

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// ownersNamed is the most pods that WarnPodsNotInCluster names.
const ownersNamed = 10

// WarnPodsNotInCluster checks the report's owners against the live
// cluster s: a pod that held a GPU in the report's last hour (its hourly
// activity reaches it) but that s does not hold is named in a warning.
// It may have been deleted since; otherwise its series came from another
// exporter than the cluster's dcgm-exporter (a second one, a test job, a
// forged series), which PromQL counted as one more owner of the GPU, so
// that the real pod's share of it is too small. Only a series selector
// (--prometheus-selector) keeps such series out: the share is split
// before gpupack sees the owners, so dropping the pod here would not give
// the real pod its time back.
func (r *Report) WarnPodsNotInCluster(s *cluster.Snapshot) {
	if s == nil {
		return
	}
	known := map[string]bool{}
	for _, p := range s.Pods {
		known[p.Namespace+"/"+p.Name] = true
	}
	last := int(math.Ceil(r.End.Sub(r.Start).Hours())) - 1
	var missing []string
	for i := range r.Pods {
		p := &r.Pods[i]
		if known[p.Key()] || p.HourlyActivity == nil || p.FirstHour+len(p.HourlyActivity)-1 != last {
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (on %s)", p.Key(), strings.Join(p.Devices, ", ")))
	}
	if len(missing) == 0 {
		return
	}
	named := missing[:min(len(missing), ownersNamed)]
	more := ""
	if len(missing) > len(named) {
		more = fmt.Sprintf(" and %d more", len(missing)-len(named))
	}
	r.Quality.Warnings = append(r.Quality.Warnings, fmt.Sprintf(
		"%d pod(s) held a GPU in the last hour by dcgm-exporter's series but are not pods of the cluster: %s%s; unless deleted since, their series come from another exporter, which takes a share of the real pods' GPUs: give --prometheus-selector (the chart's prometheus.selector) the job of the cluster's dcgm-exporter",
		len(missing), strings.Join(named, "; "), more))
}
