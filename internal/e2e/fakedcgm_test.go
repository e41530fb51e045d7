package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/cli"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/usage"
)

// startFakeDCGM runs the fake-dcgm verb on a free port and returns where
// it serves, and a func that stops it and waits for it to end; calling
// that func again does nothing.
func startFakeDCGM(t *testing.T, ctx context.Context, scenarioPath, truthPath string) (string, func()) {
	t.Helper()
	fakeCtx, stopFake := context.WithCancel(ctx)
	done := make(chan error, 1)
	stderr, log := io.Pipe()
	go func() {
		root := cli.NewRoot(fakeCtx)
		root.SetErr(log)
		root.SetArgs([]string{"fake-dcgm", "--scenario", scenarioPath, "--listen", "127.0.0.1:0", "--truth", truthPath})
		err := root.ExecuteContext(fakeCtx)
		log.CloseWithError(fmt.Errorf("fake-dcgm ended: %v", err))
		done <- err
	}()
	serving := regexp.MustCompile(`fake-dcgm: serving .* on http://(\S+)/metrics`)
	lines := bufio.NewScanner(stderr)
	addr := ""
	for addr == "" && lines.Scan() {
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		stopFake()
		t.Fatalf("fake-dcgm did not say where it serves: %v", lines.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	var once sync.Once
	return addr, func() {
		once.Do(func() {
			stopFake()
			if err := <-done; err != nil {
				t.Errorf("fake-dcgm: %v", err)
			}
		})
	}
}

// waitTruth waits for the truth file fake-dcgm writes when its scenario
// ends.
func waitTruth(t *testing.T, ctx context.Context, path string) gpusim.Truth {
	t.Helper()
	for {
		var truth gpusim.Truth
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &truth) == nil {
			return truth
		}
		select {
		case <-ctx.Done():
			t.Fatal("the scenario did not end in time")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// lateTarget is a scrape target whose server starts later: fake-dcgm's
// clock starts when it runs, so Prometheus must already scrape it, but its
// port is known only once it runs. Until point is called it answers 503;
// then it forwards each request to the address.
type lateTarget struct {
	srv  *httptest.Server
	addr atomic.Pointer[string]
	// scraped is when a request for /metrics last arrived (Unix ns).
	scraped atomic.Int64
}

func newLateTarget(t *testing.T) *lateTarget {
	t.Helper()
	l := &lateTarget{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			l.scraped.Store(time.Now().UnixNano())
		}
		addr := l.addr.Load()
		if addr == nil {
			http.Error(w, "the target is not started yet", http.StatusServiceUnavailable)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+*addr+r.URL.Path, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

// Addr is where Prometheus scrapes the target.
func (l *lateTarget) Addr() string { return l.srv.Listener.Addr().String() }

// waitBetweenScrapes returns halfway between two of Prometheus' scrapes
// of /metrics, every interval. A scenario clock started then has its
// whole seconds, where the scripted levels change, half an interval from
// every scrape: a scrape answered up to that late still reads the level
// of its own time, where one answered across a change would read the next
// (a whole 1 s burst lost of a pod's few).
func (l *lateTarget) waitBetweenScrapes(t *testing.T, ctx context.Context, interval time.Duration) {
	t.Helper()
	for l.scraped.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("Prometheus did not scrape /metrics")
		case <-time.After(50 * time.Millisecond):
		}
	}
	next := time.Unix(0, l.scraped.Load()).Add(interval / 2)
	for now := time.Now(); next.Before(now); {
		next = next.Add(interval)
	}
	time.Sleep(time.Until(next))
}

// point forwards the target's requests to addr from now on.
func (l *lateTarget) point(addr string) { l.addr.Store(&addr) }

// reportJSON runs report --prometheus promURL over [start, end] at step
// with args besides, in JSON, and returns the report.
func reportJSON(t *testing.T, ctx context.Context, promURL string, start, end time.Time, step time.Duration, args ...string) *usage.Report {
	t.Helper()
	var out bytes.Buffer
	root := cli.NewRoot(ctx)
	root.SetOut(&out)
	root.SetArgs(append([]string{"report", "--prometheus", promURL, "--window", end.Sub(start).String(), "--end", end.Format(time.RFC3339), "--step", step.String(), "--format", "json"}, args...))
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("report %s: %v", strings.Join(args, " "), err)
	}
	var r usage.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report %s JSON: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return &r
}

// reportAfterRun waits for Prometheus' last scrapes of a scenario's run
// and reports the run's window at a 1 s step, its end 3 s past the run's.
func reportAfterRun(t *testing.T, ctx context.Context, promURL string, truth gpusim.Truth, args ...string) (r *usage.Report, start, end time.Time) {
	t.Helper()
	time.Sleep(3 * time.Second)
	start, end = truth.Start.Truncate(time.Second), truth.End.Truncate(time.Second).Add(3*time.Second)
	return reportJSON(t, ctx, promURL, start, end, time.Second, args...), start, end
}
