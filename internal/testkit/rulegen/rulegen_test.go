package rulegen

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestOutputIsWhatTheRulesRecord records gpupack's real rules (both
// levels, `gpupack rules --step 30s`) with promtool over the raw series
// of two GPUs for a day, loads what the generator writes for the same
// fleet (at the evaluation offsets promtool used) into a second real
// Prometheus, and compares every gpupack:* series, sample for sample.
func TestOutputIsWhatTheRulesRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("records the rules with promtool on a real Prometheus")
	}
	f := Fleet{GPUs: 2, Days: 1, Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
	end := f.End().Add(time.Hour)

	raw := startOn(t, func(w *os.File) error { return f.WriteRaw(w, f.All()) }, "--query.lookback-delta=29s")
	levels, err := promql.RulesYAMLByLevel(Step, promql.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	for i, rules := range levels {
		file := filepath.Join(t.TempDir(), fmt.Sprintf("gpupack-rules-%d.yaml", i))
		if err := os.WriteFile(file, rules, 0o644); err != nil {
			t.Fatal(err)
		}
		raw.BackfillRules(file, f.Start, end)
	}
	want := series(t, raw.URL, f.Start, end)
	first := func(name string) time.Time {
		for k, pts := range want {
			if strings.HasPrefix(k, name+"{") {
				return time.UnixMilli(pts[0].t).UTC()
			}
		}
		t.Fatalf("the rules recorded no %s", name)
		return time.Time{}
	}
	f.Offset5m = first("gpupack:sampled_steps:5m").Sub(f.Start) % window
	f.Offset1h = first("gpupack:devices:1h").Sub(f.Start) % time.Hour
	t.Logf("promtool evaluated the levels at offsets %s and %s", f.Offset5m, f.Offset1h)

	gen := startOn(t, func(w *os.File) error { return f.WriteDay(w, f.All(), 0) }, "--query.lookback-delta=29s")
	got := series(t, gen.URL, f.Start, end)
	if len(want) < 40*f.GPUs {
		t.Fatalf("the rules recorded %d series, too few to compare", len(want))
	}
	n := 0
	for _, pts := range want {
		n += len(pts)
	}
	t.Logf("comparing %d series, %d samples", len(want), n)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(point{})); diff != "" {
		t.Errorf("the generated rule output differs from the rules' (-recorded +generated):\n%.6000s", diff)
	}
}

// startOn backfills what write writes into a new Prometheus, in day blocks,
// and starts it with args.
func startOn(t *testing.T, write func(*os.File) error, args ...string) *testcluster.Prometheus {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "in.om")
	w, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	testcluster.Backfill(t, filepath.Join(dir, "data"), file, day)
	return testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir, Args: args})
}

// series reads every gpupack:* sample in [from, to] from the server at
// url, by series (name and sorted labels).
func series(t *testing.T, base string, from, to time.Time) map[string][]point {
	t.Helper()
	q := fmt.Sprintf(`{__name__=~"gpupack:.+"}[%dms]`, to.Sub(from).Milliseconds())
	resp, err := http.PostForm(base+"/api/v1/query", url.Values{"query": {q}, "time": {fmt.Sprintf("%.3f", float64(to.UnixMilli())/1000)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Values [][2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, body.Error)
	}
	out := map[string][]point{}
	for _, r := range body.Data.Result {
		var labels []string
		for k, v := range r.Metric {
			if k != "__name__" {
				labels = append(labels, k+"="+v)
			}
		}
		slices.Sort(labels)
		key := r.Metric["__name__"] + "{" + strings.Join(labels, ",") + "}"
		for _, v := range r.Values {
			var p point
			p.t = int64(v[0].(float64)*1000 + 0.5)
			if p.v, err = strconv.ParseFloat(v[1].(string), 64); err != nil {
				t.Fatalf("%s: value %v: %v", key, v[1], err)
			}
			out[key] = append(out[key], p)
		}
	}
	return out
}
