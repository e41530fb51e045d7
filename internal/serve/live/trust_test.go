package live

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// scriptedSource answers bucketsOf for every hour, less the hours in
// missing, which it answers without any series, as a store that has not
// received them yet would.
type scriptedSource struct {
	fixedSource
	mu      sync.Mutex
	missing map[time.Time]bool
}

func (s *scriptedSource) LoadBuckets(_ context.Context, w usage.Window, bucket time.Duration) ([]usage.Bucket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []usage.Bucket
	for t := w.Start; t.Before(w.End); t = t.Add(bucket) {
		if !s.missing[t] {
			out = append(out, bucketsOf(t, bucket)...)
		}
	}
	return out, nil
}

func (s *scriptedSource) fill(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.missing, t)
}

// gpuNode is a snapshot of node n with two H100s, where bucketsOf's GPUs
// are.
func gpuNode(t *testing.T) *cluster.Snapshot {
	t.Helper()
	cat := gpu.Default()
	m, ok := cat.Lookup("NVIDIA H100 80GB HBM3")
	if !ok {
		t.Fatal("the catalogue has no H100 80GB HBM3")
	}
	s, err := cluster.NewSnapshot(cat, []*cluster.Node{{Name: "n", GPUs: []cluster.GPU{{Index: 0, UUID: "GPU-0", Model: m}, {Index: 1, UUID: "GPU-1", Model: m}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEngineRereadsEmptyHours: a complete hour that comes back without any
// series while the cluster has GPU nodes (a store that answered before
// the hour's data reached it) is named in the report's warnings, its GPU
// time is served as unsampled, and it is read again at the next refresh,
// which finds the data that arrived late and accounts it; an hour of the
// same kind older than emptyRereadFor is left as it is.
func TestEngineRereadsEmptyHours(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	clk := &clock{t: t0.Add(3*time.Hour + 2*step)} // hours 0, 1, 2 complete
	src := &scriptedSource{missing: map[time.Time]bool{t0: true, t0.Add(2 * time.Hour): true}}
	e, err := New(Options{Window: 3 * time.Hour, Step: step, Refresh: time.Minute, Now: clk.now}, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.state.Snapshot = gpuNode(t) // what the informers would have seen
	e.Refresh(t.Context())
	st := e.State()
	if st.Err != "" {
		t.Fatalf("refresh: %s", st.Err)
	}
	warned := func(st State, span string) bool {
		for _, w := range st.Report.Quality.Warnings {
			if strings.Contains(w, "no DCGM series in ") && strings.Contains(w, span) {
				return true
			}
		}
		return false
	}
	hour0, hour2 := "2026-01-05T00:00:00Z..2026-01-05T01:00:00Z", "2026-01-05T02:00:00Z..2026-01-05T03:00:00Z"
	if !warned(st, hour0) || !warned(st, hour2) {
		t.Errorf("the report's warnings %q do not name the empty hours %s and %s", st.Report.Quality.Warnings, hour0, hour2)
	}
	if _, ok := st.Report.Pod("ns", "pod-0-2"); ok {
		t.Fatal("pod-0-2 is in the report although its hour was answered empty: the test tests nothing")
	}
	// Hour 2 of both GPUs had no sample: unsampled, not missing capacity.
	// (Hour 0 is before any GPU was seen: no device to count.)
	c := gather(t, e)
	if got, want := c[`gpupack_gpu_unsampled_seconds_total{node="n"}`], 2*3600.0; got != want {
		t.Errorf("node n's unsampled GPU-seconds %v, want hour 2 of its 2 GPUs, %v", got, want)
	}

	// The hours' data arrives; a minute later hour 2 (ended 1 minute ago)
	// is read again and counted, hour 0 (ended over an hour ago) is not.
	src.fill(t0)
	src.fill(t0.Add(2 * time.Hour))
	clk.set(clk.now().Add(time.Minute))
	e.Refresh(t.Context())
	st = e.State()
	if st.Err != "" {
		t.Fatalf("refresh: %s", st.Err)
	}
	p, ok := st.Report.Pod("ns", "pod-0-2")
	if !ok {
		t.Fatalf("pod-0-2 is not in the report after its hour's data arrived: the empty hour was not read again")
	}
	if p.AllocatedGPUSeconds != 3600 {
		t.Errorf("pod-0-2 allocated %v GPU-seconds, want the hour's 3600", p.AllocatedGPUSeconds)
	}
	if warned(st, hour2) || !warned(st, hour0) {
		t.Errorf("the report's warnings %q: want hour 0 still named (not read again after %s), hour 2 no more", st.Report.Quality.Warnings, emptyRereadFor)
	}
	if _, ok := st.Report.Pod("ns", "pod-0-0"); ok {
		t.Errorf("hour 0 was read again %s after it ended; want only hours that ended within %s", 2*time.Hour, emptyRereadFor)
	}
	c = gather(t, e)
	if got := c[`gpupack_gpu_allocated_seconds_total{namespace="ns",workload="(none)"}`]; got < 2*2*3600 {
		t.Errorf("ns's allocated GPU-seconds %v, want at least hours 1 and 2 of both GPUs", got)
	}
}
