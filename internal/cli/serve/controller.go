package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/serve/live"
	"github.com/gpupack/gpupack/internal/source/kube"
)

// changesMeasureEvery is how often the apply controller measures its
// applied node changes since they ended (two accounting queries each, the
// newest app.MaxChangesMeasured of them).
const changesMeasureEvery = 5 * time.Minute

// controller is the apply controller over the live engine's plan: its
// change set is that of the snapshot and plan of the last refresh, with
// the PodDisruptionBudgets read now.
func (o *options) controller(e *live.Engine, client kubernetes.Interface, reg prometheus.Registerer, log io.Writer) (*app.ChangeController, error) {
	ns, name, ok := strings.Cut(o.approvals, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--apply-approvals %q: want NAMESPACE/NAME", o.approvals)
	}
	ao, err := o.apply.Options(log)
	if err != nil {
		return nil, err
	}
	a, err := o.apply.Actuator(client, gpu.Default(), "gpupack-apply-controller")
	if err != nil {
		return nil, err
	}
	changesTotal := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpupack_changes_total",
		Help: "Node changes the apply controller ended, by outcome (applied, aborted, rolled-back, rollback-failed).",
	}, []string{"outcome"})
	changeDuration := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gpupack_change_duration_seconds",
		Help:    "How long a node change took, from its preconditions to its end.",
		Buckets: prometheus.ExponentialBuckets(30, 2, 10), // 30 s .. about 4 h
	})
	for _, c := range []prometheus.Collector{changesTotal, changeDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, outcome := range []string{app.OutcomeApplied, app.OutcomeAborted, app.OutcomeRolledBack, app.OutcomeRollbackFailed} {
		changesTotal.WithLabelValues(outcome) // every outcome reads 0 before its first
	}
	return &app.ChangeController{
		Build: func(ctx context.Context) (*change.Set, error) {
			st := e.State()
			if st.Snapshot == nil || st.Plan == nil {
				return nil, errors.New("no plan yet: the first refresh has not read the cluster and its usage")
			}
			budgets, warnings, err := kube.Budgets(ctx, client)
			if err != nil {
				return nil, err
			}
			for _, w := range warnings {
				fmt.Fprintln(log, "apply controller: warning:", w)
			}
			return change.Build(st.Snapshot, st.Plan, budgets, change.DefaultOptions())
		},
		Approvals:            func(ctx context.Context) (map[string]string, error) { return a.Approvals(ctx, ns, name) },
		ReleaseStartupTaints: a.ReleaseStartupTaints,
		Actuator:             a,
		Options:              ao,
		Interval:             o.applyEvery,
		Measurement:          &app.Measurement{Prometheus: o.prometheus, MaxAnswer: o.maxAnswer, Access: o.access, Selector: o.selector},
		MeasureEvery:         changesMeasureEvery,
		Observe: func(r app.NodeResult) {
			changesTotal.WithLabelValues(r.Outcome).Inc()
			changeDuration.Observe(r.Ended.Sub(r.Started).Seconds())
		},
	}, nil
}
