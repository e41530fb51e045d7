package kube

import (
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/cluster"
)

// leaseSlack is how long past its duration a Lease still counts as held:
// a leader renews well before expiry, so a Lease older than this is one
// whose holder has stopped.
const leaseSlack = 30 * time.Second

// servingSchedulers names the schedulers seen serving the cluster at now,
// sorted, for cluster.Snapshot.Schedulers. The rule: scheduler X runs when
// a Lease in any namespace named X or X-scheduler (gpupack's own is
// gpupack-scheduler for schedulerName gpupack; the stock kube-scheduler's
// is kube-system/kube-scheduler for default-scheduler) has a holder and
// was renewed within its duration plus leaseSlack, or when an event was
// reported by X (a scheduler that runs and cannot place a pod says so in a
// FailedScheduling event about it). A scheduler without leader election
// that has placed every pod it saw leaves neither, so only the pods that
// name it and wait are called no-scheduler.
func servingSchedulers(leases []*coordinationv1.Lease, events []*corev1.Event, now time.Time) []string {
	seen := map[string]bool{}
	for _, l := range leases {
		s := l.Spec
		if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil {
			continue
		}
		d := 15 * time.Second
		if s.LeaseDurationSeconds != nil {
			d = time.Duration(*s.LeaseDurationSeconds) * time.Second
		}
		if now.Sub(s.RenewTime.Time) > d+leaseSlack {
			continue
		}
		seen[l.Name] = true
		if l.Name == "kube-scheduler" {
			seen[cluster.DefaultScheduler] = true
		} else if name, ok := strings.CutSuffix(l.Name, "-scheduler"); ok && name != "" {
			seen[name] = true
		}
	}
	for _, e := range events {
		for _, c := range []string{e.ReportingController, e.Source.Component} {
			if c != "" {
				seen[c] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
