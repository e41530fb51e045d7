package diagnose

import (
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/usage"
)

// PendingWaits are the waits of the report's pending pods at now: from
// each pod's creation (created, by pod key) to now; unknown for a pod
// whose creation time is not known. The pods diagnose skipped (no Cause:
// no GPU asked for, or a request it cannot read) are left out.
func PendingWaits(rep *Report, created map[string]time.Time, now time.Time) []usage.PodWait {
	out := make([]usage.PodWait, 0, len(rep.Findings))
	for _, f := range rep.Findings {
		if f.Cause == "" {
			continue
		}
		key, _ := cluster.ParsePodKey(f.Pod)
		w := usage.PodWait{Namespace: key.Namespace, Shape: f.Request, Cause: string(f.Cause)}
		if c, ok := created[f.Pod]; ok {
			w.Seconds = usage.Known(max(0, now.Sub(c).Seconds()))
		}
		out = append(out, w)
	}
	return out
}
