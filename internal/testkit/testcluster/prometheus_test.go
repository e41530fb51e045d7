package testcluster

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrometheusBackfillRestart backfills two hours of a gauge, starts the
// real Prometheus on them, and checks that a sum over the history reads
// back, before and after a Stop and Restart on the same address.
func TestPrometheusBackfillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Prometheus")
	}
	dir := t.TempDir()
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	var b strings.Builder
	b.WriteString("# TYPE gpupack_test_gauge gauge\n")
	for k := 0; k < 240; k++ { // 2 h at 30 s
		fmt.Fprintf(&b, "gpupack_test_gauge{gpu=\"0\"} %d %d\n", k%2, start.Add(time.Duration(k)*30*time.Second).Unix())
	}
	b.WriteString("# EOF\n")
	file := filepath.Join(dir, "history.om")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	Backfill(t, filepath.Join(dir, "data"), file, 0)
	p := StartPrometheus(t, PrometheusOptions{Dir: dir})
	at := start.Add(2 * time.Hour)
	check := func(when string) {
		t.Helper()
		got := queryScalar(t, p.URL, "sum_over_time(gpupack_test_gauge[2h])", at)
		if got != 120 {
			t.Errorf("%s: sum over the backfilled 2 h = %v, want 120 (half of 240 samples are 1)", when, got)
		}
	}
	check("first start")
	oldURL := p.URL
	p.Stop()
	if _, err := http.Get(p.URL + "/-/ready"); err == nil {
		t.Errorf("prometheus still answers at %s after Stop", p.URL)
	}
	p.Restart()
	if p.URL != oldURL {
		t.Errorf("Restart moved the server from %s to %s", oldURL, p.URL)
	}
	check("after restart")
}

func queryScalar(t *testing.T, base, query string, at time.Time) float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query) + "&time=" + fmt.Sprint(at.Unix()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]json.RawMessage
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Data.Result) != 1 {
		t.Fatalf("query %q: %d results, want 1", query, len(r.Data.Result))
	}
	var s string
	if err := json.Unmarshal(r.Data.Result[0].Value[1], &s); err != nil {
		t.Fatal(err)
	}
	var v float64
	fmt.Sscan(s, &v)
	return v
}

// TestProxyCut checks that a cut closes open connections and refuses new
// ones until Resume.
func TestProxyCut(t *testing.T) {
	srv := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	p := NewProxy(t, ln.Addr().String())
	get := func() error {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + p.Addr())
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := get(); err == nil {
		t.Error("a request went through a cut proxy")
	}
	p.Resume()
	if err := get(); err != nil {
		t.Errorf("after Resume: %v", err)
	}
}

// TestPrometheusListeningLine reads the listening address from the log
// line of Prometheus 2 (Debian's 2.42, the tests') and of Prometheus 3
// (hack/prometheus-bins.sh, the month's benchmark), which puts a
// component before it.
func TestPrometheusListeningLine(t *testing.T) {
	for line, want := range map[string]string{
		`ts=2026-12-06T17:32:15.971Z caller=tls_config.go:232 level=info component=web msg="Listening on" address=127.0.0.1:41807`:   "127.0.0.1:41807",
		`time=2026-12-06T18:08:40.429Z level=INFO source=tls_config.go:395 msg="Listening on" component=web address=127.0.0.1:19201`: "127.0.0.1:19201",
		`time=2026-12-06T18:08:40.429Z level=INFO msg="Start listening for connections" component=web address=127.0.0.1:0`:           "",
	} {
		got := ""
		if m := promListening.FindStringSubmatch(line); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%s: address %q, want %q", line, got, want)
		}
	}
}
