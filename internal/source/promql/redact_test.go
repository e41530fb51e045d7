package promql

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/usage"
)

func TestRedacted(t *testing.T) {
	cases := map[string]struct{ url, want string }{
		"no userinfo":         {"http://prometheus:9090", "http://prometheus:9090"},
		"user and password":   {"http://user:secret@prometheus:9090/prom", "http://user:xxxxx@prometheus:9090/prom"},
		"user only":           {"https://user@prometheus", "https://user@prometheus"},
		"password with space": {"http://user:se cret@prometheus", unparseable},
		"password with slash": {"http://user:se/cret@prometheus:9090", unparseable},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Redacted(c.url); got != c.want {
				t.Errorf("Redacted(%q) = %q, want %q", c.url, got, c.want)
			}
		})
	}
}

// TestErrorsHideThePassword: New's and a query's errors name the URL
// with its password redacted, whether Prometheus answers an error, is not
// there at all, or the URL does not parse.
func TestErrorsHideThePassword(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer failing.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	withSecret := func(u string) string { return strings.Replace(u, "http://", "http://user:secret@", 1) }
	cases := map[string]struct {
		url  string
		want string
	}{
		"an HTTP error":      {url: withSecret(failing.URL), want: "user:xxxxx@"},
		"no server":          {url: withSecret(gone.URL), want: "user:xxxxx@"},
		"an unparseable URL": {url: "http://user:se/secret@prometheus:9090", want: unparseable},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := New(c.url)
			if err == nil {
				start := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
				_, err = s.LoadBuckets(t.Context(), usage.Window{Start: start, End: start.Add(time.Hour), Step: time.Minute}, time.Hour)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}
