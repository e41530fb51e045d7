package report

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/gpupack/gpupack/usage"
)

// writeQueueWait is the table section of the queue wait: pending now and
// scheduled in the window, in all and by namespace, shape and cause.
func writeQueueWait(b *strings.Builder, q *usage.QueueWait) {
	if q == nil {
		return
	}
	fmt.Fprintf(b, "\nQueue wait (seconds from creation: to now for pods pending now, to scheduling for pods scheduled in the window; unknown waits counted apart)\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "PODS\tBY\tGROUP\tCOUNT\tUNKNOWN\tP50\tP95\tMAX\n")
	row := func(face, by, key string, st usage.WaitStats) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", face, by, key, st.Pods, st.UnknownWait, num(st.Seconds.P50), num(st.Seconds.P95), num(st.Seconds.Max))
	}
	faceRows := func(face string, f *usage.WaitFace) {
		row(face, "all", "", f.All)
		for _, g := range f.ByNamespace {
			row(face, "namespace", g.Key, g.WaitStats)
		}
		for _, g := range f.ByShape {
			row(face, "shape", g.Key, g.WaitStats)
		}
		for _, g := range f.ByCause {
			row(face, "cause", g.Key, g.WaitStats)
		}
	}
	if q.Pending != nil {
		faceRows("pending now", q.Pending)
	}
	faceRows("scheduled", &q.Scheduled)
	tw.Flush()
	if q.Pending == nil {
		fmt.Fprintf(b, "pods pending now: not known from Prometheus alone; give --kubeconfig or --live, or see gpupack serve\n")
	}
}
