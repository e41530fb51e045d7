package app

import (
	"context"
	"io"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/usage"
)

// QueueWait is how long GPU pods waited: those pending in diag to now
// (unknown when diag is nil: nothing was diagnosed), and those the report
// r saw scheduled in its window (none when r is nil), each shape as the
// snapshot's pod asks (unknown when s is nil).
func QueueWait(r *usage.Report, s *cluster.Snapshot, diag *diagnose.Report, created map[string]time.Time, now time.Time) *usage.QueueWait {
	var pending []usage.PodWait
	if diag != nil {
		pending = diagnose.PendingWaits(diag, created, now)
	}
	var shapes map[string]string
	if s != nil {
		shapes = Shapes(s)
	}
	var scheduled []usage.PodWait
	if r != nil {
		scheduled = usage.ScheduledWaits(r, shapes)
	}
	q := usage.QueueWaits(pending, diag != nil, scheduled)
	return &q
}

// ReportQueueWait is the queue wait of a report's window. From Prometheus
// alone it is that of the pods scheduled in the window (kube-state-metrics'
// pod times), their GPU shapes unknown; with the live cluster (live, nil
// without) also that of the pods pending now, diagnosed with the report's
// usage facts, their waits to now, and every shape the cluster knows. For
// the demo it is also that of the demo cluster's pending pods at the
// week's end, diagnosed as `gpupack diagnose` does, each shape as the
// cluster file asks.
func ReportQueueWait(ctx context.Context, r *usage.Report, fromPrometheus bool, live *kube.State, now time.Time) (*usage.QueueWait, error) {
	switch {
	case live != nil:
		diag, err := diagnose.DiagnoseContext(ctx, live.Snapshot, r.Facts())
		if err != nil {
			return nil, err
		}
		return QueueWait(r, live.Snapshot, diag, live.Created, now), nil
	case fromPrometheus:
		return QueueWait(r, nil, nil, nil, now), nil
	}
	s, err := cluster.ParseFile(demo.Cluster(), demo.ClusterName, gpu.Default())
	if err != nil {
		return nil, err
	}
	created, err := demo.Created()
	if err != nil {
		return nil, err
	}
	diag, err := DemoDiagnosis(ctx, io.Discard)
	if err != nil {
		return nil, err
	}
	return QueueWait(r, s, diag, created, r.End), nil
}

// Shapes names each pod's GPU request by pod key, as the waits group them.
func Shapes(s *cluster.Snapshot) map[string]string {
	shapes := make(map[string]string, len(s.Pods))
	for _, p := range s.Pods {
		shapes[p.Key()] = p.GPU.String()
	}
	return shapes
}

// PendingPods are the pending pods of a view: each finding with when its
// pod was created and how long it has waited to now (unknown where the
// creation time is), and the kube-scheduler's last FailedScheduling
// message where known.
func PendingPods(findings []diagnose.Finding, created map[string]time.Time, failures map[string]kube.SchedulingFailure, now time.Time) []PendingPod {
	var out []PendingPod
	for _, f := range findings {
		p := PendingPod{Finding: f}
		if c, ok := created[f.Pod]; ok {
			p.Created = &c
			p.WaitedSeconds = usage.Known(max(0, now.Sub(c).Seconds()))
		}
		if fail, ok := failures[f.Pod]; ok {
			p.SchedulerMessage = fail.Message
		}
		out = append(out, p)
	}
	return out
}
