package gpusim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/gpu"
)

const startups = `duration: 60s
nodes:
  - {name: n1, model: H100-80GB, gpus: 2}
pods:
  - {namespace: a, name: llm-0, node: n1, gpu: 0, from: 20s, memoryMiB: 30000, activity: {pattern: constant, level: 0.5},
     startup: {created: -15s, scheduled: -14s, containersStarted: 0s, ready: 30s, workload: llm,
       pulls: [{container: main, image: "vllm:1", at: -2s, seconds: 10, sizeBytes: 5000000000}],
       storage: {volumes: [{name: models, source: persistentVolumeClaim, detail: fast-nvme}], containers: [{name: main, gpu: true, mounts: [{volume: models, path: /models}]}]}}}
  - {namespace: a, name: plain, node: n1, gpu: 1, memoryMiB: 1000, activity: {pattern: idle}}
`

// TestStateMetricsOfOneTime: a pod whose script sets only one of the times
// still has that time's series (a script need not set them all).
func TestStateMetricsOfOneTime(t *testing.T) {
	const one = `duration: 60s
nodes:
  - {name: n1, model: H100-80GB, gpus: 1}
pods:
  - {namespace: a, name: r-0, node: n1, gpu: 0, from: 10s, memoryMiB: 1000, activity: {pattern: idle}, startup: {containersReady: 5s}}
`
	s, err := Parse([]byte(one), "one.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteStateMetrics(&b, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := `kube_pod_status_container_ready_time{namespace="a",pod="r-0",uid=`; !strings.Contains(b.String(), want) {
		t.Errorf("no %s... series:\n%s", want, b.String())
	}
}

func TestStateMetrics(t *testing.T) {
	s, err := Parse([]byte(startups), "startups.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	values := func(at time.Duration) map[string]string {
		var b strings.Builder
		if err := s.WriteStateMetrics(&b, start, at); err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("kube-state-metrics exposition does not parse: %v\n%s", err, b.String())
		}
		got := map[string]string{}
		for name, f := range fams {
			for _, m := range f.Metric {
				labels := map[string]string{}
				for _, l := range m.Label {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] != "a" || labels["pod"] != "llm-0" || labels["uid"] == "" {
					t.Errorf("%s: labels %v", name, labels)
				}
				key := name
				if o := labels["owner_name"]; o != "" {
					key += "/" + labels["owner_kind"] + "/" + o
				}
				got[key] = time.Unix(int64(m.GetGauge().GetValue()), 0).UTC().Format("15:04:05")
			}
		}
		return got
	}
	// Before the pod exists: nothing; at 10 s: created and scheduled only;
	// at the end: every time, and the owner a Deployment's ReplicaSet.
	if got := values(4 * time.Second); len(got) != 0 {
		t.Errorf("at 4s: %v, want nothing", got)
	}
	if d := cmp.Diff(map[string]string{"kube_pod_created": "00:00:05", "kube_pod_status_scheduled_time": "00:00:06", "kube_pod_owner/ReplicaSet/llm-7d9f8c6b5": "00:00:01"}, values(10*time.Second)); d != "" {
		t.Errorf("at 10s (-want +got):\n%s", d)
	}
	want := map[string]string{"kube_pod_created": "00:00:05", "kube_pod_status_scheduled_time": "00:00:06", "kube_pod_container_state_started": "00:00:20",
		"kube_pod_status_ready_time": "00:00:50", "kube_pod_owner/ReplicaSet/llm-7d9f8c6b5": "00:00:01"}
	if d := cmp.Diff(want, values(60*time.Second)); d != "" {
		t.Errorf("at 60s (-want +got):\n%s", d)
	}

	ev := s.Events(start)
	if len(ev) != 1 {
		t.Fatalf("events of %d pods, want 1", len(ev))
	}
	e := ev[0]
	if e.Workload != "llm" || e.Storage.Path() != "pvc/fast-nvme" || len(e.ImagePulls) != 1 || e.ImagePulls[0].At != start.Add(18*time.Second) || e.ImagePulls[0].SizeBytes != 5e9 {
		t.Errorf("events %+v", e)
	}
	if e.ContainersStarted != start.Add(20*time.Second) || e.Ready != start.Add(50*time.Second) {
		t.Errorf("started %v ready %v", e.ContainersStarted, e.Ready)
	}
}
