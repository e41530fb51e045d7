package promql

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// recorder is a Prometheus stand-in that answers every query with an
// empty matrix and keeps the headers of each request.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.headers = append(rec.headers, r.Header.Clone())
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[]}}`))
}

func (rec *recorder) last() http.Header {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.headers[len(rec.headers)-1]
}

// writeFile writes text to name under dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// query sends one range query and one instant query (the two clients a
// Source sends through).
func query(t *testing.T, s *Source) {
	t.Helper()
	now := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.queryRange(t.Context(), "up", v1.Range{Start: now.Add(-time.Hour), End: now, Step: time.Minute}); err != nil {
		t.Fatalf("range query: %v", err)
	}
	if _, _, _, err := s.api.Query(t.Context(), "up", now); err != nil {
		t.Fatalf("instant query: %v", err)
	}
}

// TestAccessSendsCredentialsAndHeaders: every request carries the bearer
// token or basic auth and the headers that Access names, read from their
// files, and a token rewritten between two queries is the one the second
// sends (a rotated Secret needs no restart).
func TestAccessSendsCredentialsAndHeaders(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	dir := t.TempDir()
	token := writeFile(t, dir, "token", "first-token\n")
	tenant := writeFile(t, dir, "tenant", "team-a\n")
	password := writeFile(t, dir, "password", "s3cret")

	s, err := Open(srv.URL, Access{BearerTokenFile: token, Headers: map[string]string{"X-Extra": "a,b=c"}, HeaderFiles: map[string]string{"X-Scope-OrgID": tenant}})
	if err != nil {
		t.Fatal(err)
	}
	query(t, s)
	for i, h := range rec.headers {
		if got := h.Get("Authorization"); got != "Bearer first-token" {
			t.Errorf("request %d: Authorization %q, want Bearer first-token", i, got)
		}
		if got := h.Get("X-Scope-OrgID"); got != "team-a" {
			t.Errorf("request %d: X-Scope-OrgID %q, want team-a", i, got)
		}
		if got := h.Get("X-Extra"); got != "a,b=c" {
			t.Errorf("request %d: X-Extra %q, want a,b=c", i, got)
		}
	}
	writeFile(t, dir, "token", "rotated-token")
	query(t, s)
	if got := rec.last().Get("Authorization"); got != "Bearer rotated-token" {
		t.Errorf("after rotation: Authorization %q, want Bearer rotated-token", got)
	}

	basic, err := Open(srv.URL, Access{Username: "gpupack", PasswordFile: password})
	if err != nil {
		t.Fatal(err)
	}
	query(t, basic)
	req := &http.Request{Header: rec.last()}
	if u, p, ok := req.BasicAuth(); !ok || u != "gpupack" || p != "s3cret" {
		t.Errorf("basic auth %q %q %v, want gpupack s3cret", u, p, ok)
	}
}

// TestAccessTrustsTheCAFile: a server whose certificate the system does
// not trust is refused without the CA file and read with it.
func TestAccessTrustsTheCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(&recorder{})
	defer srv.Close()
	ca := writeFile(t, t.TempDir(), "ca.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	untrusted, err := Open(srv.URL, Access{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := untrusted.queryRange(t.Context(), "up", v1.Range{Start: now.Add(-time.Hour), End: now, Step: time.Minute}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: error %v, want one about the certificate", err)
	}
	trusted, err := Open(srv.URL, Access{CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	query(t, trusted)
}

// TestAccessRefusesWhatCannotWork: Open refuses, before sending anything,
// credentials twice over, half of basic auth, a reserved header and a
// file it cannot read, naming the flag, and never shows the URL's
// password.
func TestAccessRefusesWhatCannotWork(t *testing.T) {
	dir := t.TempDir()
	token := writeFile(t, dir, "token", "t")
	missing := filepath.Join(dir, "missing")
	cases := map[string]struct {
		url    string
		access Access
		want   string
	}{
		"URL user and token":  {url: "http://u:hidden@prom:9090", access: Access{BearerTokenFile: token}, want: "drop the user from the URL"},
		"user without file":   {url: "http://prom:9090", access: Access{Username: "u"}, want: "--prometheus-password-file"},
		"token and basic":     {url: "http://prom:9090", access: Access{BearerTokenFile: token, Username: "u", PasswordFile: token}, want: "at most one of"},
		"reserved header":     {url: "http://prom:9090", access: Access{Headers: map[string]string{"Authorization": "x"}}, want: "Authorization"},
		"missing token file":  {url: "http://prom:9090", access: Access{BearerTokenFile: missing}, want: "--prometheus-bearer-token-file"},
		"missing header file": {url: "http://prom:9090", access: Access{HeaderFiles: map[string]string{"X-Scope-OrgID": missing}}, want: "--prometheus-header-file X-Scope-OrgID"},
		"CA not PEM":          {url: "https://prom:9090", access: Access{CAFile: token}, want: "--prometheus-ca-file"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Open(c.url, c.access)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
			if strings.Contains(err.Error(), "hidden") {
				t.Errorf("error shows the URL's password: %v", err)
			}
		})
	}
}
