package diagnose

import (
	"strings"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// SkippedCause groups, in queue waits, the pending pods that diagnose
// skipped (their Finding has no Cause; its Note says why).
const SkippedCause = "(skipped)"

// PendingWaits are the waits of the report's pending pods at now: from
// each pod's creation (created, by pod key) to now; unknown for a pod
// whose creation time is not known.
func PendingWaits(rep *Report, created map[string]time.Time, now time.Time) []usage.PodWait {
	out := make([]usage.PodWait, 0, len(rep.Findings))
	for _, f := range rep.Findings {
		ns, _, _ := strings.Cut(f.Pod, "/")
		w := usage.PodWait{Namespace: ns, Shape: f.Request, Cause: string(f.Cause)}
		if f.Cause == "" {
			w.Cause = SkippedCause
		}
		if c, ok := created[f.Pod]; ok {
			w.Seconds = usage.Known(max(0, now.Sub(c).Seconds()))
		}
		out = append(out, w)
	}
	return out
}
