package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/usage"
)

// DiagnoseRequest names what a diagnosis reads: the cluster, a usage file
// of per-pod facts ("" for none; the demo's with the demo cluster), and a
// pending pod to keep ("namespace/name"; "" keeps all).
type DiagnoseRequest struct {
	Cluster Cluster
	Usage   string
	Pod     string
}

// Diagnosis is a diagnosis of the pending GPU pods and, for a live
// cluster, the kube-scheduler's last FailedScheduling message per pending
// pod (nil otherwise).
type Diagnosis struct {
	Report   *diagnose.Report
	Failures map[string]kube.SchedulingFailure
}

// Diagnose reads the cluster and usage the request names and explains
// each pending GPU pod. Warnings go to stderr.
func Diagnose(ctx context.Context, req DiagnoseRequest, stderr io.Writer) (*Diagnosis, error) {
	s, st, err := req.Cluster.Load(ctx, demo.Cluster(), demo.ClusterName, stderr)
	if err != nil {
		return nil, err
	}
	u, err := usageFor(req.Cluster, req.Usage, s, stderr)
	if err != nil {
		return nil, err
	}
	rep, err := diagnose.DiagnoseContext(ctx, s, u)
	if err != nil {
		return nil, err
	}
	if req.Pod != "" {
		failed := len(rep.Failures)
		rep.Findings, rep.Failures = podFindings(rep.Findings, req.Pod), podFindings(rep.Failures, req.Pod)
		if len(rep.Findings)+len(rep.Failures) == 0 {
			return nil, fmt.Errorf("--pod %s: no pending or failed GPU pod of that name in %s (%d pending, %d failed)", req.Pod, req.Cluster.Name(demo.ClusterName), rep.Pending, failed)
		}
	}
	d := &Diagnosis{Report: rep}
	if st != nil {
		d.Failures = st.SchedulingFailures
	}
	return d, nil
}

// podFindings keeps the findings of the pod named ("namespace/name").
func podFindings(fs []diagnose.Finding, pod string) []diagnose.Finding {
	keep := []diagnose.Finding{}
	for _, f := range fs {
		if f.Pod == pod {
			keep = append(keep, f)
		}
	}
	return keep
}

// DemoDiagnosis is the diagnosis that `gpupack diagnose` prints with no
// flags: the embedded demo cluster with its week's usage.
func DemoDiagnosis(ctx context.Context, stderr io.Writer) (*diagnose.Report, error) {
	d, err := Diagnose(ctx, DiagnoseRequest{}, stderr)
	if err != nil {
		return nil, err
	}
	return d.Report, nil
}

// usageFor reads the usage file named (checked against s), or the demo
// week's facts when the demo cluster is read without one; nil when there
// is none.
func usageFor(c Cluster, file string, s *cluster.Snapshot, stderr io.Writer) (*usage.Facts, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--usage: %w", err)
		}
		return ReadUsage(data, file, s, c.Name(demo.ClusterName), stderr)
	}
	if !c.IsDemo() {
		return nil, nil
	}
	m, err := demo.Measure()
	if err != nil {
		return nil, err
	}
	return CheckUsage(m.Facts, demo.UsageName, s, c.Name(demo.ClusterName), stderr)
}

// SchedulerView is the kube-scheduler's last word on a pending pod and
// whether gpupack's cause is among those it implies.
type SchedulerView struct {
	Message string           `json:"message"`
	Time    time.Time        `json:"time"`
	Implies []diagnose.Cause `json:"implies,omitempty"`
	Agrees  bool             `json:"agrees"`
}

// SchedulerViews pairs each diagnosed pod with its FailedScheduling
// message.
func SchedulerViews(rep *diagnose.Report, failures map[string]kube.SchedulingFailure) map[string]SchedulerView {
	views := map[string]SchedulerView{}
	for _, f := range rep.Findings {
		sf, ok := failures[f.Pod]
		if !ok || f.Cause == "" || f.Workload != nil {
			continue
		}
		implies := diagnose.ImpliedCauses(f, sf.Message)
		views[f.Pod] = SchedulerView{Message: sf.Message, Time: sf.Time, Implies: implies, Agrees: slices.Contains(implies, f.Cause)}
	}
	return views
}
