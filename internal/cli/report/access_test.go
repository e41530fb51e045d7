package report

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestPrometheusAccessFromFiles runs the gpupack binary's report against
// a Prometheus stand-in that answers every query with no series (an empty report): each
// request carries the bearer token and the X-Scope-OrgID header read
// from their files and the header given on the command line, and the
// token file, rewritten by the stand-in after the first request (a
// rotated Secret), is read again for the next ones.
func TestPrometheusAccessFromFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gpupack binary")
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	tenant := filepath.Join(dir, "tenant")
	for file, text := range map[string]string{token: "first-token\n", tenant: "team-a\n"} {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var seen []http.Header
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		if len(seen) == 1 {
			if err := os.WriteFile(token, []byte("rotated-token"), 0o600); err != nil {
				t.Error(err)
			}
		}
		mu.Unlock()
		kind := "matrix"
		if strings.HasSuffix(r.URL.Path, "/query") {
			kind = "vector"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"` + kind + `","result":[]}}`))
	}))
	defer prom.Close()

	cmd := exec.CommandContext(t.Context(), testcluster.BuildGpupack(t), "report", "--prometheus", prom.URL, "--window", "1h", "--accounting", "raw",
		"--prometheus-bearer-token-file", token, "--prometheus-header-file", "X-Scope-OrgID="+tenant, "--prometheus-header", "X-Team=gpu,infra")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("gpupack report: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("the stand-in saw %d requests, want several", len(seen))
	}
	for i, h := range seen {
		want := "Bearer rotated-token"
		if i == 0 {
			want = "Bearer first-token"
		}
		if got := h.Get("Authorization"); got != want {
			t.Errorf("request %d: Authorization %q, want %q", i, got, want)
		}
		if got := h.Get("X-Scope-OrgID"); got != "team-a" {
			t.Errorf("request %d: X-Scope-OrgID %q, want team-a", i, got)
		}
		if got := h.Get("X-Team"); got != "gpu,infra" {
			t.Errorf("request %d: X-Team %q, want gpu,infra", i, got)
		}
	}
}
