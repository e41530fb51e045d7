package live

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// The faults faultProxy can answer with.
const (
	answerWhole    int32 = iota
	answerOversize       // a body over the Source's cap
	answerPartial        // Thanos' partial response: warnings and no series
	answerHung           // no answer until the client gives up
)

// faultProxy forwards to a real Prometheus, or answers each query with
// its fault.
type faultProxy struct {
	fault   atomic.Int32
	forward *httputil.ReverseProxy
	// oversize is the length of an oversize answer.
	oversize int
}

// newFaultProxy serves a faultProxy to target, its oversize answers of
// oversize bytes.
func newFaultProxy(t *testing.T, target string, oversize int) (*httptest.Server, *faultProxy) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{forward: httputil.NewSingleHostReverseProxy(u), oversize: oversize}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv, p
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resultType := "matrix"
	if strings.HasSuffix(r.URL.Path, "/query") {
		resultType = "vector"
	}
	switch p.fault.Load() {
	case answerOversize:
		w.Header().Set("Content-Type", "application/json")
		body := `{"status":"success","data":{"resultType":"` + resultType + `","result":[]}}`
		fmt.Fprint(w, body+strings.Repeat(" ", p.oversize-len(body)))
	case answerPartial:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","warnings":["store 10.0.0.7:10901 unreachable: context deadline exceeded"],"data":{"resultType":%q,"result":[]}}`, resultType)
	case answerHung:
		// The server notices the client's going only once the request's
		// body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	default:
		p.forward.ServeHTTP(w, r)
	}
}

// TestEngineRecoversFromPrometheusFaults runs the engine on a real
// Prometheus holding a day of a simulated 8-GPU fleet, through a proxy
// that answers, one new hour at a time, oversize, partial (warnings, no
// series, as Thanos answers when a store is down), hung, and then not at
// all (Prometheus stopped). Each fault fails its refresh, keeps the last
// report and says why in Ready; none leaves an hour short. Once
// Prometheus answers whole again, the pods' GPU-seconds over the window
// equal the simulator's truth.
func TestEngineRecoversFromPrometheusFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet, err := gpusim.Fleet(8, 1, 11, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	prom := testcluster.FleetHistory(t, fleet, start, scrape, gpusim.Faults{})
	const maxAnswer = 8 << 20
	srv, proxy := newFaultProxy(t, prom.URL, maxAnswer+1)
	src, err := promql.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	src.MaxAnswer = maxAnswer
	const window = 6 * time.Hour
	clk := &clock{t: start.Add(8*time.Hour + 2*scrape)}
	log := &syncWriter{}
	// A refresh's reads end within 4/5 of Refresh: 8 s for a hung one.
	e, err := New(Options{Window: window, Step: scrape, Refresh: 10 * time.Second, Now: clk.now, Log: log}, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Refresh(t.Context())
	if st := e.State(); st.Err != "" {
		t.Fatalf("first refresh: %s", st.Err)
	}

	faults := []struct {
		name  string
		set   func()
		clear func()
		want  string
	}{
		{"oversize", func() { proxy.fault.Store(answerOversize) }, func() { proxy.fault.Store(answerWhole) }, "--prometheus-max-answer"},
		{"partial", func() { proxy.fault.Store(answerPartial) }, func() { proxy.fault.Store(answerWhole) }, "partial answer"},
		{"hung", func() { proxy.fault.Store(answerHung) }, func() { proxy.fault.Store(answerWhole) }, "context deadline exceeded"},
		{"outage", prom.Stop, prom.Restart, "server error: 502"},
	}
	for _, f := range faults {
		// A new hour completes while Prometheus answers with the fault.
		asOf := e.State().AsOf
		clk.set(clk.now().Add(time.Hour))
		f.set()
		e.Refresh(t.Context())
		st := e.State()
		if !strings.Contains(st.Err, f.want) {
			t.Errorf("%s: the refresh's error %q does not say %q", f.name, st.Err, f.want)
		}
		if !st.AsOf.Equal(asOf) || st.Report == nil {
			t.Errorf("%s: the state moved to %s (report kept %v); want the last good one, as of %s", f.name, st.AsOf, st.Report != nil, asOf)
		}
		if err := e.Ready(); err == nil || !strings.Contains(err.Error(), f.want) {
			t.Errorf("%s: Ready = %v, want the failure saying %q", f.name, err, f.want)
		}
		f.clear()
		e.Refresh(t.Context())
		if st := e.State(); st.Err != "" {
			t.Fatalf("%s: the refresh after Prometheus answered whole again: %s\n%s", f.name, st.Err, log.String())
		}
	}

	// The truth over the window the report covers.
	st := e.State()
	from, end := st.Report.Start, st.Report.End
	if want := clk.now().Add(-2 * scrape).Truncate(time.Hour).Add(-window); !from.Equal(want) {
		t.Fatalf("the report starts at %s, want %s", from, want)
	}
	before, upTo := fleet.Truth(start, from.Sub(start)), fleet.Truth(start, end.Sub(start))
	earlier := map[string]gpusim.PodTruth{}
	for _, p := range before.Pods {
		earlier[p.Namespace+"/"+p.Pod] = p
	}
	shared := sharedPods(fleet)
	checked := 0
	for _, pt := range upTo.Pods {
		key := pt.Namespace + "/" + pt.Pod
		alloc := float64(pt.AllocatedGPUSeconds - earlier[key].AllocatedGPUSeconds)
		active := float64(pt.ActiveGPUSeconds - earlier[key].ActiveGPUSeconds)
		if alloc == 0 || shared[key] {
			continue // not in the window, or its activity is its GPU's
		}
		checked++
		p, ok := st.Report.Pod(pt.Namespace, pt.Pod)
		if !ok {
			t.Errorf("pod %s held %v GPU-seconds in the window but is not in the report", key, alloc)
			continue
		}
		// Within a scrape of the truth: the simulator's pods start and
		// end between scrapes.
		if math.Abs(float64(p.AllocatedGPUSeconds)-alloc) > scrape.Seconds() || !p.ActiveGPUSeconds.Known() || math.Abs(p.ActiveGPUSeconds.Value()-active) > scrape.Seconds() {
			t.Errorf("pod %s: allocated %v, active %+v GPU-seconds; truth %v, %v", key, p.AllocatedGPUSeconds, p.ActiveGPUSeconds, alloc, active)
		}
	}
	if checked < 4 {
		t.Errorf("only %d pods checked against the truth", checked)
	}
}

// sharedPods are the pods of the fleet that time-shared a GPU with
// another at some time: the truth counts a pod's own activity, DCGM its
// GPU's.
func sharedPods(fleet *gpusim.Scenario) map[string]bool {
	shared := map[string]bool{}
	for i, p := range fleet.Pods {
		for _, q := range fleet.Pods[i+1:] {
			same := p.Node == q.Node && p.GPU == q.GPU && (p.Slice == nil) == (q.Slice == nil) && (p.Slice == nil || *p.Slice == *q.Slice)
			if same && p.From < q.To && q.From < p.To {
				shared[p.Namespace+"/"+p.Name], shared[q.Namespace+"/"+q.Name] = true, true
			}
		}
	}
	return shared
}
