package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// TestPodTimesByHourMatchWindow backfills four hours of kube-state-metrics'
// pod times into a real Prometheus, with what makes merging hours hard: a
// container that restarts (its start moves later, the first one counts), a
// pod that becomes ready again later (the last one counts), a pod deleted
// and created again under the same name (a new uid: the newer times
// count), a pod seen in one hour only, a pod with two containers, and an
// owner. The pods' times that serve joins from hours read one at a time
// (promql.LoadPodTimes, MergePodTimes) must equal what LoadMeta reads
// over the whole window at once, for the whole window and for its last two
// hours.
func TestPodTimesByHourMatchWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = 30 * time.Second
	start := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Hour)
	at := func(d time.Duration) float64 { return float64(start.Add(d).Unix()) }
	type series struct {
		metric, labels string
		from, to       time.Duration // scraped over [from, to)
		value          func(t time.Duration) float64
	}
	constant := func(v float64) func(time.Duration) float64 { return func(time.Duration) float64 { return v } }
	pod := func(ns, name, uid string) string { return fmt.Sprintf(`namespace=%q,pod=%q,uid=%q`, ns, name, uid) }
	const h = time.Hour
	all := []series{
		// ml/train: created before the window, one container restarting
		// at 1h30 and 2h40, the other started once; ready at 10m, not
		// ready from 1h30, ready again at 2h50.
		{"kube_pod_created", pod("ml", "train", "u1"), 0, 4 * h, constant(at(-time.Hour))},
		{"kube_pod_status_scheduled_time", pod("ml", "train", "u1"), 0, 4 * h, constant(at(-59 * time.Minute))},
		{"kube_pod_container_state_started", pod("ml", "train", "u1") + `,container="main"`, 0, 4 * h, func(t time.Duration) float64 {
			switch {
			case t >= 2*h+40*time.Minute:
				return at(2*h + 40*time.Minute)
			case t >= h+30*time.Minute:
				return at(h + 30*time.Minute)
			}
			return at(5 * time.Minute)
		}},
		{"kube_pod_container_state_started", pod("ml", "train", "u1") + `,container="sidecar"`, 0, 4 * h, constant(at(2 * time.Minute))},
		{"kube_pod_status_ready_time", pod("ml", "train", "u1"), 10 * time.Minute, h + 30*time.Minute, constant(at(10 * time.Minute))},
		{"kube_pod_status_ready_time", pod("ml", "train", "u1"), 2*h + 50*time.Minute, 4 * h, constant(at(2*h + 50*time.Minute))},
		{"kube_pod_owner", pod("ml", "train", "u1") + `,owner_kind="ReplicaSet",owner_name="train-5d8f",owner_is_controller="true"`, 0, 4 * h, constant(1)},
		// ml/job: deleted at 1h15, created again at 2h05 (a new uid).
		{"kube_pod_created", pod("ml", "job", "u2"), 0, h + 15*time.Minute, constant(at(-30 * time.Minute))},
		{"kube_pod_created", pod("ml", "job", "u3"), 2*h + 5*time.Minute, 4 * h, constant(at(2*h + 5*time.Minute))},
		{"kube_pod_status_scheduled_time", pod("ml", "job", "u3"), 2*h + 6*time.Minute, 4 * h, constant(at(2*h + 6*time.Minute))},
		{"kube_pod_owner", pod("ml", "job", "u3") + `,owner_kind="Job",owner_name="job",owner_is_controller="true"`, 2*h + 5*time.Minute, 4 * h, constant(1)},
		// web/blip: one hour only.
		{"kube_pod_created", pod("web", "blip", "u4"), h + 10*time.Minute, h + 40*time.Minute, constant(at(h + 10*time.Minute))},
		{"kube_pod_status_container_ready_time", pod("web", "blip", "u4"), h + 20*time.Minute, h + 40*time.Minute, constant(at(h + 20*time.Minute))},
	}
	dir := t.TempDir()
	var b strings.Builder
	byMetric := map[string][]series{}
	var metrics []string
	for _, s := range all {
		if byMetric[s.metric] == nil {
			metrics = append(metrics, s.metric)
		}
		byMetric[s.metric] = append(byMetric[s.metric], s)
	}
	for _, m := range metrics {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", m, m, m)
		for _, s := range byMetric[m] {
			for t := s.from; t < s.to; t += scrape {
				fmt.Fprintf(&b, "%s{%s} %g %d\n", m, s.labels, s.value(t), start.Add(t).Unix())
			}
		}
	}
	b.WriteString("# EOF\n")
	file := filepath.Join(dir, "ksm.om")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	testcluster.Backfill(t, filepath.Join(dir, "data"), file, 0)
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir})
	src, err := promql.New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, w := range []usage.Window{
		{Start: start, End: start.Add(4 * h), Step: scrape},
		{Start: start.Add(2 * h), End: start.Add(4 * h), Step: scrape},
	} {
		whole, err := src.LoadMeta(ctx, w, nil, w.End.Sub(w.Start))
		if err != nil {
			t.Fatal(err)
		}
		// Hour by hour, each hour read alone, as serve reads them.
		var spans []*promql.PodTimes
		for from := w.Start; from.Before(w.End); from = from.Add(h) {
			got, err := src.LoadPodTimes(ctx, usage.Window{Start: from, End: from.Add(h), Step: scrape}, h)
			if err != nil {
				t.Fatal(err)
			}
			spans = append(spans, got...)
		}
		byHour := promql.MergePodTimes(spans)
		// And the window in one call, hours as the buckets.
		spans, err = src.LoadPodTimes(ctx, w, h)
		if err != nil {
			t.Fatal(err)
		}
		if len(spans) != int(w.End.Sub(w.Start)/h) {
			t.Errorf("%d spans for %s, want one an hour", len(spans), w.End.Sub(w.Start))
		}
		oneCall := promql.MergePodTimes(spans)
		want := usage.MergePodEvents(whole.Pods, nil) // sorted
		if len(want) == 0 {
			t.Fatal("LoadMeta read no pod times: the test's data did not load")
		}
		if d := cmp.Diff(want, byHour); d != "" {
			t.Errorf("window from %s: pod times joined from hours read one by one differ from LoadMeta's (-LoadMeta +joined):\n%s", w.Start.Sub(start), d)
		}
		if d := cmp.Diff(want, oneCall); d != "" {
			t.Errorf("window from %s: pod times joined from one call differ from LoadMeta's (-LoadMeta +joined):\n%s", w.Start.Sub(start), d)
		}
	}
	// What the data says, so that agreement cannot hide a shared mistake.
	spans, err := src.LoadPodTimes(ctx, usage.Window{Start: start, End: start.Add(4 * h), Step: scrape}, h)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]usage.PodEvents{}
	for _, e := range promql.MergePodTimes(spans) {
		got[e.Namespace+"/"+e.Pod] = e
	}
	u := func(d time.Duration) time.Time { return start.Add(d) }
	checks := []struct {
		what      string
		got, want time.Time
	}{
		{"ml/train containers started (main's first start: the later of the containers' first starts)", got["ml/train"].ContainersStarted, u(5 * time.Minute)},
		{"ml/train ready (the last)", got["ml/train"].Ready, u(2*h + 50*time.Minute)},
		{"ml/job created (the pod made again)", got["ml/job"].Created, u(2*h + 5*time.Minute)},
		{"web/blip containers ready", got["web/blip"].ContainersReady, u(h + 20*time.Minute)},
	}
	for _, c := range checks {
		if !c.got.Equal(c.want) {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
	if got["ml/train"].Workload != "train" || got["ml/job"].Workload != "job" {
		t.Errorf("workloads %q and %q, want train and job", got["ml/train"].Workload, got["ml/job"].Workload)
	}
}
