package serve

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/reclaim"
	"github.com/gpupack/gpupack/usage"
)

// reclaimLedgerEvery is how often the reclaim controller reads and
// measures its ledger (one accounting query per action, the newest
// app.MaxMeasured of them).
const reclaimLedgerEvery = 5 * time.Minute

// reclaimKinds are the owner kinds gpupack_reclaims_total counts, each
// outcome reading 0 before its first so that increase() sees the first.
var reclaimKinds = []reclaim.Kind{reclaim.Deployment, reclaim.StatefulSet, reclaim.ReplicaSet, reclaim.Job, reclaim.Notebook, reclaim.Workload, reclaim.Pod}

// reclaimOutcomes are the outcomes gpupack_reclaims_total counts.
var reclaimOutcomes = []string{reclaim.OutcomeReclaimed, reclaim.OutcomeRefused, reclaim.OutcomeFailed, reclaim.OutcomeRestored}

// reclaimer is the reclaim controller over the live cluster and
// Prometheus: its policy file is read at every round (a mounted ConfigMap
// changes without a restart), its re-check uses the floor of the last
// round's policy.
func (o *options) reclaimer(client kubernetes.Interface, pricing usage.Pricing, reg prometheus.Registerer, log io.Writer) (*app.ReclaimController, error) {
	if o.reclaimEvery <= 0 {
		return nil, fmt.Errorf("--reclaim-interval %s: want a positive duration such as 10m", o.reclaimEvery)
	}
	ns, name, ok := strings.Cut(o.reclaimApprovals, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--reclaim-approvals %q: want NAMESPACE/NAME", o.reclaimApprovals)
	}
	if o.reclaimPolicy != "" {
		data, err := os.ReadFile(o.reclaimPolicy)
		if err != nil {
			return nil, fmt.Errorf("--reclaim-policy: %w", err)
		}
		if _, err := reclaim.ParsePolicy(data, o.reclaimPolicy); err != nil {
			return nil, fmt.Errorf("--reclaim-policy: %w", err)
		}
	}
	a, err := o.reclaim.Actuator(client, "gpupack-reclaim-controller")
	if err != nil {
		return nil, err
	}
	webhook, err := o.reclaim.Notifier()
	if err != nil {
		return nil, err
	}
	observe, observeFreed, err := reclaimMetrics(reg)
	if err != nil {
		return nil, err
	}
	m := app.Measurement{Prometheus: o.prometheus, MaxAnswer: o.maxAnswer, Access: o.access, Selector: o.selector, Pricing: pricing}
	floor := reclaim.DefaultPolicy().ActivityFloor
	return &app.ReclaimController{
		Detect: func(ctx context.Context) (*app.Detection, error) {
			d, err := app.DetectReclaim(ctx, app.ReclaimRequest{Cluster: app.Cluster{Kubeconfig: o.kubeconfig, Live: true}, From: m, Policy: o.reclaimPolicy}, prefixed{log, "reclaim controller: "})
			if err == nil {
				floor = d.Policy.ActivityFloor
			}
			return d, err
		},
		Approvals: func(ctx context.Context) (map[string]string, error) { return a.Approvals(ctx, ns, name) },
		Actuator:  a,
		Options: app.ReclaimOptions{Webhook: webhook, Recheck: func(ctx context.Context, c reclaim.Candidate) error {
			return app.Recheck(m, floor, time.Now)(ctx, c)
		}},
		Measurement:  &m,
		Interval:     o.reclaimEvery,
		LedgerEvery:  reclaimLedgerEvery,
		Observe:      observe,
		ObserveFreed: observeFreed,
	}, nil
}

// reclaimMetrics registers gpupack_reclaims_total, every kind and
// outcome at 0, and gpupack_reclaimed_gpu_hours_total, and returns what
// the controller tells them.
func reclaimMetrics(reg prometheus.Registerer) (func(reclaim.Kind, string), func(float64), error) {
	reclaims := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpupack_reclaims_total",
		Help: "Reclaim actions the reclaim controller ended, by owner kind and outcome (reclaimed, refused by the re-check, failed), and the restores of its ledger's records seen since it started (restored).",
	}, []string{"kind", "outcome"})
	freed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gpupack_reclaimed_gpu_hours_total",
		Help: "GPU-hours the reclaim ledger's actions freed, measured from the accounting of the hours after each (what its pods would have held less what they still held); grows as the ledger is measured again.",
	})
	for _, c := range []prometheus.Collector{reclaims, freed} {
		if err := reg.Register(c); err != nil {
			return nil, nil, err
		}
	}
	for _, k := range reclaimKinds {
		for _, outcome := range reclaimOutcomes {
			reclaims.WithLabelValues(string(k), outcome)
		}
	}
	observe := func(kind reclaim.Kind, outcome string) { reclaims.WithLabelValues(string(kind), outcome).Inc() }
	return observe, freed.Add, nil
}

// prefixed writes each write to w after prefix: DetectReclaim's warnings
// say that they come from the controller.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
