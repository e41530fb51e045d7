package serve

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/internal/serve/live"
	"github.com/gpupack/gpupack/internal/source/promql"
)

// TestLiveViewHidesThePassword: with a Prometheus URL that holds a
// password and a Prometheus that fails, the password appears nowhere that
// serve shows or logs: the view's source and error, the page, every API
// answer and error, Ready's reason and the log.
func TestLiveViewHidesThePassword(t *testing.T) {
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer prom.Close()
	url := strings.Replace(prom.URL, "http://", "http://user:secret@", 1)
	src, err := promql.New(url)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	now := func() time.Time { return time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC) }
	e, err := live.New(live.Options{Window: 2 * time.Hour, Step: 30 * time.Second, Refresh: time.Minute, Now: now, Log: &log,
		Source: liveSource(url, "https://apiserver:6443")}, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Refresh(t.Context())
	v := e.View()
	if v == nil || v.Err == "" {
		t.Fatalf("view after a failed refresh = %+v, want its error", v)
	}
	if want := "Prometheus " + strings.Replace(prom.URL, "http://", "http://user:xxxxx@", 1) + " and the cluster at https://apiserver:6443"; v.Source != want {
		t.Errorf("Source = %q, want %q", v.Source, want)
	}
	shown := map[string]string{"View.Source": v.Source, "View.Err": v.Err, "the log": log.String()}
	if err := e.Ready(); err != nil {
		shown["Ready"] = err.Error()
	}
	h := serve.Handler(serve.Options{Provider: e})
	for _, path := range []string{"/", "/api/v1/view", "/api/v1/report", "/api/v1/queuewait", "/api/v1/health", "/api/v1/plan", "/readyz"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		shown["GET "+path] = rec.Body.String()
	}
	if !strings.Contains(shown["GET /api/v1/view"], "user:xxxxx@") {
		t.Errorf("/api/v1/view does not name the redacted URL: %.500s", shown["GET /api/v1/view"])
	}
	for where, text := range shown {
		if strings.Contains(text, "secret") {
			t.Errorf("%s shows the password: %.500s", where, text)
		}
	}
}
