package serve

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestServerBounds: the server bounds how long a client may take to send
// its headers, to be sent the response and to idle, and how large its
// headers may be.
func TestServerBounds(t *testing.T) {
	srv := newServer(Options{})
	type bounds struct {
		ReadHeaderTimeout, WriteTimeout, IdleTimeout time.Duration
		MaxHeaderBytes                               int
	}
	got := bounds{srv.ReadHeaderTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes}
	want := bounds{10 * time.Second, time.Minute, 2 * time.Minute, 64 << 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("server bounds (-want +got):\n%s", diff)
	}
	if srv.Handler == nil {
		t.Error("the server has no handler")
	}
}

// TestAPIEncodesEachViewOnce: each part of a view is encoded once,
// however many requests ask for it, with the bytes encodeJSON gives; a
// new view is encoded anew.
func TestAPIEncodesEachViewOnce(t *testing.T) {
	encodes := map[string]int{}
	counting := func(x any) ([]byte, error) {
		b, err := encodeJSON(x)
		encodes[string(b)]++
		return b, err
	}
	p := &provider{v: testView("x")}
	h := handler(Options{Provider: p}, newAPICache(counting))
	paths := []string{"/api/v1/view", "/api/v1/report", "/api/v1/hours", "/api/v1/pending", "/api/v1/queuewait", "/api/v1/health", "/api/v1/plan"}
	bodies := map[string]string{}
	for range 3 {
		for _, path := range paths {
			resp := get(t, h, http.MethodGet, path)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", path, resp.Status)
			}
			b := body(t, resp)
			if prev, ok := bodies[path]; ok && prev != b {
				t.Errorf("GET %s: the body changed between requests for one view", path)
			}
			bodies[path] = b
		}
	}
	if len(encodes) != len(paths) {
		t.Errorf("%d distinct bodies encoded, want %d", len(encodes), len(paths))
	}
	for b, n := range encodes {
		if n != 1 {
			t.Errorf("a body encoded %d times for one view, want once:\n%.80s", n, b)
		}
	}

	p.v = testView("y")
	clear(encodes)
	for range 2 {
		body(t, get(t, h, http.MethodGet, "/api/v1/view"))
	}
	if n := len(encodes); n != 1 {
		t.Errorf("after a new view, %d distinct bodies encoded, want 1", n)
	}
	for _, n := range encodes {
		if n != 1 {
			t.Errorf("the new view encoded %d times, want once", n)
		}
	}
}
