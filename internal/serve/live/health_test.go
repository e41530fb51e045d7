package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/fixture"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// xidHistory writes, from t0 for 5 hours at the test's step, dcgm-exporter's
// XID gauge and activity of three GPUs: gpu-a's GPU 0 reports XID 79 in
// hour 1 only, its GPU 1 the application XID 13 in the first half of hour
// 3, gpu-b's GPU 0 none.
func xidHistory(t *testing.T, path string, t0 time.Time) {
	t.Helper()
	devs := []struct {
		node, gpu, uuid, model string
		xid                    func(at time.Duration) int
	}{
		{"gpu-a", "0", "GPU-a0", "NVIDIA H100 80GB HBM3", func(at time.Duration) int {
			if at >= time.Hour && at < 2*time.Hour {
				return 79
			}
			return 0
		}},
		{"gpu-a", "1", "GPU-a1", "NVIDIA H100 80GB HBM3", func(at time.Duration) int {
			if at >= 3*time.Hour && at < 3*time.Hour+30*time.Minute {
				return 13
			}
			return 0
		}},
		{"gpu-b", "0", "GPU-b0", "NVIDIA L4", func(time.Duration) int { return 0 }},
	}
	writeOpenMetrics(t, path, func(w io.Writer) {
		for _, m := range []string{usage.XIDErrors, usage.GREngineActive} {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", m, m, m)
			for _, d := range devs {
				for at := time.Duration(0); at < 5*time.Hour; at += step {
					v := 0
					if m == usage.XIDErrors {
						v = d.xid(at)
					}
					fmt.Fprintf(w, "%s{gpu=%q,UUID=%q,device=\"nvidia%s\",modelName=%q,Hostname=%q} %d %d\n", m, d.gpu, d.uuid, d.gpu, d.model, d.node, v, t0.Add(at).Unix())
				}
			}
		}
	})
}

// healthSource records the windows of health the engine reads, and fails
// them when told to.
type healthSource struct {
	*promql.Source
	mu   sync.Mutex
	read []string
	fail bool
}

func (h *healthSource) LoadHealth(ctx context.Context, w usage.Window) ([]usage.DeviceHealth, error) {
	h.mu.Lock()
	h.read = append(h.read, fmt.Sprintf("%s..%s", w.Start.Format(time.TimeOnly), w.End.Format(time.TimeOnly)))
	fail := h.fail
	h.mu.Unlock()
	if fail {
		return nil, errors.New("prometheus: XID query refused")
	}
	return h.Source.LoadHealth(ctx, w)
}

func (h *healthSource) reads() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.read
	h.read = nil
	return out
}

// TestEngineReadsHealth runs the engine on a real Prometheus holding
// backfilled XID history and steps its clock through it: each complete
// hour's health is read once and the partial hour's again at each
// refresh; an XID shows while its hour is in the window (in the state, the
// report, the view and gpupack_gpus_unhealthy) and goes when the window
// slides past it; a failed health read keeps the last good health with the
// error beside it.
func TestEngineReadsHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	dir := t.TempDir()
	t0 := time.Now().UTC().Add(-12 * time.Hour).Truncate(time.Hour)
	xidHistory(t, filepath.Join(dir, "history.om"), t0)
	testcluster.Backfill(t, filepath.Join(dir, "data"), filepath.Join(dir, "history.om"), 0)
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir})
	prs, err := promql.New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	src := &healthSource{Source: prs}
	clk := &clock{}
	e, err := New(Options{Window: 2 * time.Hour, Step: step, Refresh: time.Hour, Now: clk.now}, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	hour := func(from, to time.Duration) string {
		return fmt.Sprintf("%s..%s", t0.Add(from).Format(time.TimeOnly), t0.Add(to).Format(time.TimeOnly))
	}
	a0 := usage.DeviceHealth{Node: "gpu-a", UUID: "GPU-a0", GPU: "0", XIDs: []int{79}}
	a1 := usage.DeviceHealth{Node: "gpu-a", UUID: "GPU-a1", GPU: "1", XIDs: []int{13}}
	steps := []struct {
		at        time.Duration
		reads     []string
		health    []usage.DeviceHealth
		unhealthy map[string]float64
	}{
		// Hours 0 and 1 complete, and the first minute of hour 2.
		{2*time.Hour + 2*step, []string{hour(0, time.Hour), hour(time.Hour, 2*time.Hour), hour(2*time.Hour, 2*time.Hour+2*step)},
			[]usage.DeviceHealth{a0}, map[string]float64{`gpupack_gpus_unhealthy{node="gpu-a"}`: 1}},
		// Hour 2 is read, once; the partial hour 3 has GPU-a1's
		// application XID, which marks no GPU unhealthy.
		{3*time.Hour + 2*step, []string{hour(2*time.Hour, 3*time.Hour), hour(3*time.Hour, 3*time.Hour+2*step)},
			[]usage.DeviceHealth{a0, a1}, map[string]float64{`gpupack_gpus_unhealthy{node="gpu-a"}`: 1}},
		// Hour 1 leaves the window, and GPU-a0's XID with it.
		{4*time.Hour + 2*step, []string{hour(3*time.Hour, 4*time.Hour), hour(4*time.Hour, 4*time.Hour+2*step)},
			[]usage.DeviceHealth{a1}, map[string]float64{}},
	}
	for _, s := range steps {
		clk.set(t0.Add(s.at))
		e.Refresh(ctx)
		st := e.State()
		if st.Err != "" {
			t.Fatalf("at +%s: refresh: %s", s.at, st.Err)
		}
		if d := cmp.Diff(s.reads, src.reads()); d != "" {
			t.Errorf("at +%s: health windows read (-want +got):\n%s", s.at, d)
		}
		if d := cmp.Diff(s.health, st.Health); d != "" {
			t.Errorf("at +%s: health (-want +got):\n%s", s.at, d)
		}
		if d := cmp.Diff(s.health, st.Report.Health); d != "" {
			t.Errorf("at +%s: the report's health (-want +got):\n%s", s.at, d)
		}
		if v := e.View(); len(v.Health) != len(s.health) {
			t.Errorf("at +%s: the view shows %d GPUs with XIDs, want %d", s.at, len(v.Health), len(s.health))
		}
		got := map[string]float64{}
		for k, v := range gather(t, e) {
			if strings.HasPrefix(k, "gpupack_gpus_unhealthy") {
				got[k] = v
			}
		}
		if d := cmp.Diff(s.unhealthy, got); d != "" {
			t.Errorf("at +%s: gpupack_gpus_unhealthy (-want +got):\n%s", s.at, d)
		}
	}

	// The XID query fails: the last good health stays, the error beside it.
	src.fail = true
	clk.set(t0.Add(5*time.Hour + 2*step))
	e.Refresh(ctx)
	st := e.State()
	if !strings.Contains(st.Err, "GPU health: prometheus: XID query refused") {
		t.Errorf("error %q, want the failed health read", st.Err)
	}
	if d := cmp.Diff([]usage.DeviceHealth{a1}, st.Health); d != "" {
		t.Errorf("health after a failed read (-want +got), want the last good one:\n%s", d)
	}
	if v := e.View(); v.Err == "" || len(v.Health) != 1 {
		t.Errorf("the view after a failed health read: error %q, %d GPUs; want the error and the last GPU", v.Err, len(v.Health))
	}
}

// fixedSource has no usage and the given health.
type fixedSource struct{ health []usage.DeviceHealth }

func (fixedSource) LoadBuckets(context.Context, usage.Window, time.Duration) ([]usage.Bucket, error) {
	return nil, nil
}

func (fixedSource) LoadPodTimes(context.Context, usage.Window, time.Duration) ([]*promql.PodTimes, error) {
	return nil, nil
}

func (f fixedSource) LoadHealth(context.Context, usage.Window) ([]usage.DeviceHealth, error) {
	return f.health, nil
}

func (fixedSource) LoadEvidence(context.Context, usage.Window) ([]usage.Evidence, error) {
	return nil, nil
}

// TestEngineTaintsUnhealthyDRAGPUs: a DRA GPU that reported a critical
// XID gets, in serve's plan as in `gpupack plan`, a DeviceTaintRule in
// dra-device-taint-rules.yaml among the plan's files, which the view's
// health names as its fix.
func TestEngineTaintsUnhealthyDRAGPUs(t *testing.T) {
	s := fixture.DRATaintSnapshot(t)
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	src := fixedSource{health: []usage.DeviceHealth{{Node: "dra-a", UUID: "GPU-dra-a-0", GPU: "0", XIDs: []int{79}}}}
	e, err := New(Options{Window: 2 * time.Hour, Step: step, Now: func() time.Time { return now }}, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.state.Snapshot = s // what the informers would have seen
	e.Refresh(t.Context())
	v := e.View()
	if v.Err != "" {
		t.Fatalf("refresh: %s", v.Err)
	}
	i := slices.IndexFunc(v.PlanFiles, func(f app.PlanFile) bool { return f.Name == planout.FileDRATaintRules })
	if i < 0 {
		t.Fatalf("no %s among the plan's files %v", planout.FileDRATaintRules, v.PlanFiles)
	}
	if data := string(v.PlanFiles[i].Data); !strings.Contains(data, "name: gpupack-unhealthy-dra-a-gpu-0") || strings.Contains(data, "gpu-1") {
		t.Errorf("%s taints other devices than gpu-0:\n%s", planout.FileDRATaintRules, data)
	}
	if len(v.Health) != 1 || !slices.Equal(v.Health[0].TaintRules, []string{"gpupack-unhealthy-dra-a-gpu-0"}) {
		t.Errorf("the view's health %+v, want GPU-dra-a-0 with its rule", v.Health)
	}
}

// BenchmarkHealthFirstRead times the health read of serve's first refresh
// over a week of 48 GPUs scraped every minute (one query per hour, 168 in
// all), against one promql.LoadHealth over the whole week (what
// report's hourly path asks), on a real Prometheus.
func BenchmarkHealthFirstRead(b *testing.B) {
	if os.Getenv("GPUPACK_E2E") == "" {
		b.Skip("set GPUPACK_E2E=1: backfills and starts a real Prometheus")
	}
	const scrape, days = time.Minute, 7
	fleet, err := gpusim.Fleet(48, days, 1, gpu.Default())
	if err != nil {
		b.Fatal(err)
	}
	fleet.Nodes[0].XIDs = map[string]int{"1": 79}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	begun := time.Now()
	prom := testcluster.FleetHistory(b, fleet, start, scrape, gpusim.Faults{})
	b.Logf("backfilled %d days of 48 GPUs in %.1f s", days, time.Since(begun).Seconds())
	src, err := promql.New(prom.URL)
	if err != nil {
		b.Fatal(err)
	}
	window := days * 24 * time.Hour
	end := start.Add(window)
	now := end.Add(2 * scrape)
	check := func(hs []usage.DeviceHealth) {
		if len(hs) != 1 || hs[0].Node != fleet.Nodes[0].Name || hs[0].Critical() != 79 {
			b.Fatalf("health %+v, want %s's GPU 1 with XID 79", hs, fleet.Nodes[0].Name)
		}
	}
	b.Run("hour by hour", func(b *testing.B) {
		for b.Loop() {
			e, err := New(Options{Window: window, Step: scrape, Now: func() time.Time { return now }}, src, nil)
			if err != nil {
				b.Fatal(err)
			}
			var st State
			b.StopTimer() // the hours health is read for
			if err := e.readUsage(b.Context(), now, &st); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := e.readHealth(b.Context(), &st); err != nil {
				b.Fatal(err)
			}
			check(st.Health)
		}
	})
	b.Run("one query over the week", func(b *testing.B) {
		for b.Loop() {
			hs, err := src.LoadHealth(b.Context(), usage.Window{Start: start, End: end, Step: scrape})
			if err != nil {
				b.Fatal(err)
			}
			check(hs)
		}
	})
}
