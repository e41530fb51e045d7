package app

import (
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/mempolicy"
	"github.com/gpupack/gpupack/usage"
)

// gogc reads the collector's margin without setting it, as the runtime's
// metrics give it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestHourlyReadsAtReadingGCPercent: the hourly path asks every query of
// its window with the collector's margin at mempolicy.ReadingGCPercent
// (a one-shot report's reading), and gives the margin back when it
// returns, an error's return included.
func TestHourlyReadsAtReadingGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(24 * time.Hour), Step: 30 * time.Second}
	for _, failing := range []bool{false, true} {
		var mu sync.Mutex
		seen := map[int]int{}
		// A query cancelled when another failed may reach the server only
		// after the read returned and gave the margin back: it is no
		// longer asked by the read, and not counted.
		var returned atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			percent := gogc()
			if percent == 100 && returned.Load() {
				http.Error(w, "late", http.StatusServiceUnavailable)
				return
			}
			mu.Lock()
			seen[percent]++
			mu.Unlock()
			if failing {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			kind := "vector"
			if strings.HasSuffix(r.URL.Path, "query_range") {
				kind = "matrix"
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status":"success","data":{"resultType":"` + kind + `","result":[]}}`))
		}))
		_, err := measureHourly(t.Context(), Measurement{Prometheus: srv.URL, Window: w, Hourly: true, Pricing: usage.Pricing{Catalogue: gpu.Default()}})
		returned.Store(true)
		srv.Close()
		if (err != nil) != failing {
			t.Fatalf("failing Prometheus %v: error %v", failing, err)
		}
		if after := gogc(); after != 100 {
			t.Errorf("failing Prometheus %v: GC percent %d after the report, want 100 given back", failing, after)
		}
		mu.Lock()
		if len(seen) != 1 || seen[mempolicy.ReadingGCPercent] == 0 {
			t.Errorf("failing Prometheus %v: queries asked at GC percents %v (percent: queries), want all at %d", failing, seen, mempolicy.ReadingGCPercent)
		}
		mu.Unlock()
	}
}
