package live

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// history is what the test backfills: three devices over hours [0, span)
// from t0, scraped every 30 s as dcgm-exporter exports them. train/busy
// holds gpu-a's GPU 0 at 0.9 activity and serve/idle its GPU 1 at 0.02,
// throughout; gpu-b's GPU is never allocated. (A series that ends in
// backfilled data has no staleness marker, so Prometheus would see its
// last sample for its lookback of 5 minutes more: the test reads only
// inside the span.)
type history struct {
	t0   time.Time
	span int // hours
}

const step = 30 * time.Second

func (h history) write(t *testing.T, path string) {
	t.Helper()
	writeOpenMetrics(t, path, h.series)
}

func (h history) series(w io.Writer) {
	type dev struct {
		node, gpu, uuid, model string
		owner                  func(hour int) (ns, pod string)
		activity               float64
	}
	devs := []dev{
		{"gpu-a", "0", "GPU-a0", "NVIDIA H100 80GB HBM3", func(int) (string, string) { return "train", "busy" }, 0.9},
		{"gpu-a", "1", "GPU-a1", "NVIDIA H100 80GB HBM3", func(int) (string, string) { return "serve", "idle" }, 0.02},
		{"gpu-b", "0", "GPU-b0", "NVIDIA L4", func(int) (string, string) { return "", "" }, 0},
	}
	for _, m := range []struct{ name, typ string }{{usage.GREngineActive, "gauge"}, {usage.FBUsed, "gauge"}} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.name, m.name, m.typ)
		for _, d := range devs {
			for k := 0; k < h.span*int(time.Hour/step); k++ {
				at := h.t0.Add(time.Duration(k) * step)
				ns, pod := d.owner(k * int(step) / int(time.Hour))
				v := d.activity
				if m.name == usage.FBUsed {
					v = 1000
				}
				fmt.Fprintf(w, "%s{gpu=%q,UUID=%q,device=\"nvidia%s\",modelName=%q,Hostname=%q,container=%q,namespace=%q,pod=%q} %g %d\n",
					m.name, d.gpu, d.uuid, d.gpu, d.model, d.node, map[bool]string{true: "main"}[pod != ""], ns, pod, v, at.Unix())
			}
		}
	}
	// kube-state-metrics' times of serve/idle (not in the apiserver, so
	// only Prometheus knows them), scraped in hours 0 and 1 only, so that
	// they come from complete hours read earlier.
	for _, m := range []struct {
		name string
		at   time.Duration
	}{{"kube_pod_created", -10 * time.Minute}, {"kube_pod_status_scheduled_time", -9 * time.Minute}} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", m.name, m.name, m.name)
		for k := 0; k < 2*int(time.Hour/step); k++ {
			fmt.Fprintf(w, "%s{namespace=\"serve\",pod=\"idle\",uid=\"u-idle\"} %d %d\n", m.name, h.t0.Add(m.at).Unix(), h.t0.Add(time.Duration(k)*step).Unix())
		}
	}
}

// writeOpenMetrics writes path as an OpenMetrics file for promtool's
// backfill: what series writes, then the closing # EOF.
func writeOpenMetrics(t *testing.T, path string, series func(w io.Writer)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	series(w)
	fmt.Fprintln(w, "# EOF")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// clock is the engine's clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// TestEngineOnRealPrometheusAndAPIServer runs the engine on a real
// Prometheus holding backfilled DCGM history and a real apiserver with the
// nodes and a pending pod, and steps its clock through the history: each
// hour is read once and the counters grow by it, the report matches what
// was written, a Prometheus outage keeps the last data and counters with
// the error beside them, and a cut of every apiserver connection is
// survived: the informers resume and see a pod created meanwhile.
func TestEngineOnRealPrometheusAndAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and a control plane")
	}
	dir := t.TempDir()
	h := history{t0: time.Now().UTC().Add(-12 * time.Hour).Truncate(time.Hour), span: 5}
	h.write(t, filepath.Join(dir, "history.om"))
	testcluster.Backfill(t, filepath.Join(dir, "data"), filepath.Join(dir, "history.om"), 0)
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir})

	kc := testcluster.Start(t, testcluster.Options{})
	kc.AddGPUNode("gpu-a", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 2})
	kc.AddGPUNode("gpu-b", testcluster.GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 1})
	for _, ns := range []string{"train", "serve", "ml"} {
		kc.CreateNamespace(ns)
	}
	kc.CreateGPUPod("train", "busy", "gpu-a", "nvidia.com/gpu", 1)
	kc.CreateGPUPod("ml", "huge", "", "nvidia.com/gpu", 4) // no node has 4 GPUs
	kubeconfig, cut := kc.ProxiedKubeconfig()
	client, err := kube.NewClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	prs, err := promql.New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	src := &recordingSource{Source: prs}
	clk := &clock{}
	// Two hours in, plus the settling time: hours 0 and 1 are complete.
	clk.set(h.t0.Add(2*time.Hour + 2*step))
	log := &syncWriter{}
	e, err := New(Options{Window: 2 * time.Hour, Step: step, Refresh: time.Hour, Now: clk.now, Log: log}, src, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.Refresh(ctx) // waits for the first refresh, then reads again
	if err := e.Ready(); err != nil {
		t.Fatalf("not ready after the first refresh: %v\n%s", err, log.String())
	}
	st := e.State()
	pod := func(st State, key string) *usage.PodUsage {
		ns, name, _ := strings.Cut(key, "/")
		p, ok := st.Report.Pod(ns, name)
		if !ok {
			t.Fatalf("%s is not in the report", key)
		}
		return p
	}
	// The window is the 2 complete hours and the minute of the partial one.
	const partial = 2 * 30
	near(t, "busy allocated over 2 h", float64(pod(st, "train/busy").AllocatedGPUSeconds), 7200+partial)
	near(t, "busy active over 2 h", pod(st, "train/busy").ActiveGPUSeconds.Value(), 0.9*(7200+partial))
	near(t, "idle allocated over 2 h", float64(pod(st, "serve/idle").AllocatedGPUSeconds), 7200+partial)
	if len(st.Hours) != 3 {
		t.Errorf("%d hours in the chart, want the 2 complete ones and the partial one", len(st.Hours))
	}
	created := func(st State) time.Time {
		if p := pod(st, "serve/idle"); p.Startup.Created != nil {
			return *p.Startup.Created
		}
		return time.Time{}
	}
	if got := created(st); !got.Equal(h.t0.Add(-10 * time.Minute)) {
		t.Errorf("serve/idle created %s from kube-state-metrics, want %s", got, h.t0.Add(-10*time.Minute))
	}
	// The loop's first refresh may run after the test's: wait for it
	// before counting reads.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(log.String(), "read the window"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the loop's first refresh did not end:\n%s", log.String())
		}
	}
	src.reads()
	if st.Diagnosis == nil || !hasFinding(st, "ml/huge") {
		t.Fatalf("the pending pod ml/huge is not diagnosed: %+v", st.Diagnosis)
	}
	if _, ok := st.Created["ml/huge"]; !ok {
		t.Error("no creation time for the pending pod ml/huge, so no wait")
	}
	c1 := gather(t, e)
	near(t, "busy counter after 2 h", c1[`gpupack_gpu_allocated_seconds_total{namespace="train",workload="(none)"}`], 7200+partial)
	pending := 0.0
	for k, v := range c1 {
		if strings.HasPrefix(k, "gpupack_pending_pods{") && strings.Contains(k, `namespace="ml"`) {
			pending += v
		}
	}
	if pending != 1 {
		t.Errorf("%v pending pods counted for ml, want 1: %v", pending, c1)
	}
	// ml/huge is the one pending pod of ml: each quantile of its
	// namespace's wait is its own wait.
	wait := max(0, clk.now().Sub(st.Created["ml/huge"]).Seconds())
	for _, q := range []string{"p50", "p95", "max"} {
		k := `gpupack_pending_gpu_pod_wait_seconds{by="namespace",group="ml",stat="` + q + `"}`
		if v, ok := c1[k]; !ok || v != wait {
			t.Errorf("%s = %v (present %v), want ml/huge's wait %v", k, v, ok, wait)
		}
	}
	causes := 0
	for k := range c1 {
		if strings.HasPrefix(k, `gpupack_pending_gpu_pod_wait_seconds{by="cause",`) {
			causes++
		}
	}
	if causes != 3 {
		t.Errorf("%d pending wait series by cause, want the 3 stats of ml/huge's one cause: %v", causes, c1)
	}

	// One hour later: hour 0 leaves the window, hour 2 is read; the
	// counters keep hour 0 and add hour 2.
	clk.set(h.t0.Add(3*time.Hour + 2*step))
	e.Refresh(ctx)
	st = e.State()
	if st.Err != "" {
		t.Fatalf("refresh: %s", st.Err)
	}
	near(t, "busy allocated in the window after 3 h", float64(pod(st, "train/busy").AllocatedGPUSeconds), 7200+partial)
	// Only the new hour and the partial one were asked for: no history
	// again, neither of DCGM nor of kube-state-metrics.
	newHour := fmt.Sprintf("%s..%s", h.t0.Add(2*time.Hour).Format(time.TimeOnly), h.t0.Add(3*time.Hour).Format(time.TimeOnly))
	partialHour := fmt.Sprintf("%s..%s", h.t0.Add(3*time.Hour).Format(time.TimeOnly), h.t0.Add(3*time.Hour+2*step).Format(time.TimeOnly))
	if got, want := src.reads(), []string{"buckets " + newHour, "pod times " + newHour, "buckets " + partialHour, "pod times " + partialHour}; !slices.Equal(got, want) {
		t.Errorf("the refresh an hour later read %q, want only the new hour and the partial one %q", got, want)
	}
	if got := created(st); !got.Equal(h.t0.Add(-10 * time.Minute)) {
		t.Errorf("serve/idle created %s after the window slid, want %s", got, h.t0.Add(-10*time.Minute))
	}
	c2 := gather(t, e)
	near(t, "busy counter after 3 h", c2[`gpupack_gpu_allocated_seconds_total{namespace="train",workload="(none)"}`], 3*3600+partial)
	near(t, "idle counter after 3 h", c2[`gpupack_gpu_allocated_seconds_total{namespace="serve",workload="(none)"}`], 3*3600+partial)
	near(t, "gpu-b unallocated after 3 h", c2[`gpupack_gpu_unallocated_seconds_total{node="gpu-b"}`], 3*3600+partial)

	// Prometheus goes away: the state and the counters stay, the error is
	// beside them, and readiness says why.
	prom.Stop()
	clk.set(h.t0.Add(4*time.Hour + 2*step))
	e.Refresh(ctx)
	st = e.State()
	if st.Err == "" || st.Report == nil {
		t.Fatalf("with Prometheus down: err %q, report kept %v; want an error and the last report", st.Err, st.Report != nil)
	}
	if err := e.Ready(); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Errorf("Ready with Prometheus down = %v, want the failure", err)
	}
	if v := e.View(); v == nil || v.Report == nil || v.Err == "" || v.ErrAt == nil || !v.AsOf.Equal(h.t0.Add(3*time.Hour+2*step)) {
		t.Errorf("the page's view with Prometheus down: want the last report as of %s and the error beside it, got %+v", h.t0.Add(3*time.Hour+2*step), v)
	}
	c3 := gather(t, e)
	if c3[`gpupack_gpu_allocated_seconds_total{namespace="train",workload="(none)"}`] != c2[`gpupack_gpu_allocated_seconds_total{namespace="train",workload="(none)"}`] || c3["gpupack_refresh_ok"] != 0 {
		t.Errorf("counters moved while Prometheus was down, or refresh_ok is not 0: %v", c3)
	}
	prom.Restart()
	e.Refresh(ctx)
	st = e.State()
	if st.Err != "" {
		t.Fatalf("after Prometheus came back: %s", st.Err)
	}
	c4 := gather(t, e)
	near(t, "busy counter after the outage", c4[`gpupack_gpu_allocated_seconds_total{namespace="train",workload="(none)"}`], 4*3600+partial)

	// Every apiserver connection is cut; a pod is created meanwhile; once
	// the connections come back the informers resume and see it.
	cut.Cut()
	kc.CreateGPUPod("ml", "late", "", "nvidia.com/gpu", 4)
	time.Sleep(2 * time.Second)
	e.Refresh(ctx)
	if hasFinding(e.State(), "ml/late") {
		t.Fatal("the engine saw ml/late through a cut connection: the cut tests nothing")
	}
	cut.Resume()
	deadline := time.Now().Add(90 * time.Second)
	for {
		e.Refresh(ctx)
		if hasFinding(e.State(), "ml/late") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the informers did not resume after the cut: ml/late never appeared\n%s", log.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// recordingSource records which windows the engine reads.
type recordingSource struct {
	*promql.Source
	mu   sync.Mutex
	read []string
}

func (r *recordingSource) note(what string, w usage.Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read = append(r.read, fmt.Sprintf("%s %s..%s", what, w.Start.Format(time.TimeOnly), w.End.Format(time.TimeOnly)))
}

// reads returns the windows read since the last call.
func (r *recordingSource) reads() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.read
	r.read = nil
	return out
}

func (r *recordingSource) LoadBuckets(ctx context.Context, w usage.Window, bucket time.Duration) ([]usage.Bucket, error) {
	r.note("buckets", w)
	return r.Source.LoadBuckets(ctx, w, bucket)
}

func (r *recordingSource) LoadPodTimes(ctx context.Context, w usage.Window, bucket time.Duration) ([]*promql.PodTimes, error) {
	r.note("pod times", w)
	return r.Source.LoadPodTimes(ctx, w, bucket)
}

func hasFinding(st State, key string) bool {
	if st.Diagnosis == nil {
		return false
	}
	for _, f := range st.Diagnosis.Findings {
		if f.Pod == key && f.Cause != "" {
			return true
		}
	}
	return false
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.01*math.Abs(want)+1e-9 {
		t.Errorf("%s = %.1f, want %.1f (within 1%%)", what, got, want)
	}
}

// gather scrapes the engine's collector as Prometheus would.
func gather(t *testing.T, e *Engine) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[seriesName(mf.GetName(), m)] = value(m)
		}
	}
	return out
}

func seriesName(name string, m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return name
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return math.NaN()
}

type syncWriter struct {
	mu sync.Mutex
	w  strings.Builder
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
