package report

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	clidiagnose "github.com/gpupack/gpupack/internal/cli/diagnose"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/usage"
)

// queueWait is the queue wait of the report's window. From Prometheus it
// is that of the pods scheduled in the window (kube-state-metrics' pod
// times), their GPU shapes unknown; with the live cluster (live, nil
// without) also that of the pods pending now, diagnosed with the report's
// usage facts, their waits to now, and every shape the cluster knows. For
// the demo it is also that of the demo cluster's pending pods at the
// week's end, diagnosed as `gpupack diagnose` does, each shape as the
// cluster file asks.
func queueWait(ctx context.Context, opts *options, r *usage.Report, live *kube.State) (*usage.QueueWait, error) {
	if opts.prometheus != "" && live == nil {
		q := usage.QueueWaits(nil, false, usage.ScheduledWaits(r, nil))
		return &q, nil
	}
	if live != nil {
		diag, err := diagnose.Diagnose(live.Snapshot, r.Facts())
		if err != nil {
			return nil, err
		}
		q := usage.QueueWaits(diagnose.PendingWaits(diag, live.Created, time.Now()), true, usage.ScheduledWaits(r, shapesOf(live.Snapshot)))
		return &q, nil
	}
	s, err := cluster.ParseFile(demo.Cluster(), demo.ClusterName, gpu.Default())
	if err != nil {
		return nil, err
	}
	shapes := shapesOf(s)
	created, err := demo.Created()
	if err != nil {
		return nil, err
	}
	diag, err := clidiagnose.Demo(ctx, io.Discard)
	if err != nil {
		return nil, err
	}
	q := usage.QueueWaits(diagnose.PendingWaits(diag, created, r.End), true, usage.ScheduledWaits(r, shapes))
	return &q, nil
}

// shapesOf names each pod's GPU request by key, as the waits group them.
func shapesOf(s *cluster.Snapshot) map[string]string {
	shapes := make(map[string]string, len(s.Pods))
	for _, p := range s.Pods {
		shapes[p.Key()] = p.GPU.String()
	}
	return shapes
}

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
