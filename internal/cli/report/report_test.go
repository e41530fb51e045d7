package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/testkit/golden"
	"github.com/gpupack/gpupack/internal/util/mempolicy"
	"github.com/gpupack/gpupack/usage"
)

func check(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

func defaults() *options {
	// --window and --step unset, as on the command line: the demo's week.
	return &options{format: "table", top: 10}
}

func TestDemoGolden(t *testing.T) {
	for _, format := range []string{"table", "json", "csv", "podusage"} {
		t.Run(format, func(t *testing.T) {
			opts := defaults()
			opts.format = format
			var b bytes.Buffer
			if err := run(context.Background(), opts, &b); err != nil {
				t.Fatal(err)
			}
			check(t, "demo."+format, b.Bytes())
			if format == "podusage" {
				if _, err := usage.ParseFacts(b.Bytes(), "demo.podusage"); err != nil {
					t.Errorf("diagnose cannot read the podusage output: %v", err)
				}
			}
		})
	}
}

// TestDemoWeekWindow: --window 168h names the demo's whole week, so it
// prints what the default prints.
func TestDemoWeekWindow(t *testing.T) {
	opts := defaults()
	opts.window, opts.windowSet = 168*time.Hour, true
	var b bytes.Buffer
	if err := run(context.Background(), opts, &b); err != nil {
		t.Fatal(err)
	}
	check(t, "demo.table", b.Bytes())
}

func demoReport(t *testing.T, opts *options) *usage.Report {
	t.Helper()
	opts.format = "json"
	var b bytes.Buffer
	if err := run(context.Background(), opts, &b); err != nil {
		t.Fatal(err)
	}
	var r usage.Report
	if err := jsonUnmarshal(b.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestBadInput(t *testing.T) {
	cases := map[string]struct {
		mutate func(o *options)
		want   string
	}{
		"format": {func(o *options) { o.format = "xml" }, `--format "xml"`},
		"resolution": {func(o *options) {
			o.prometheus, o.window, o.accounting = "http://127.0.0.1:1", 7*24*time.Hour, string(app.AccountingRaw)
		}, "use --step 55s or more"},
		"accounting":     {func(o *options) { o.accounting = "fast" }, `--accounting "fast": want raw, hourly or auto`},
		"hourly on demo": {func(o *options) { o.accounting = string(app.AccountingHourly) }, "--accounting hourly has Prometheus sum the hours"},
		"hourly odd window": {func(o *options) {
			o.prometheus, o.accounting, o.window = "http://127.0.0.1:1", string(app.AccountingHourly), 90*time.Minute
		}, "want a window of whole hours"},
		"hourly odd end": {func(o *options) {
			o.prometheus, o.accounting, o.end = "http://127.0.0.1:1", string(app.AccountingHourly), "2026-01-05T10:30:00Z"
		}, "want a whole hour such as 2026-01-05T10:00:00Z"},
		// The demo is bounded as Prometheus is: these ate all memory.
		"demo window": {func(o *options) { o.window, o.step = 100000*time.Hour, 30*time.Second }, "--window 100000h0m0s at --step 30s is more than 11000 steps per series, the most that report accounts (and that one Prometheus query returns); use --step 9h5m28s or more, or a shorter --window"},
		// The demo holds one week: a longer window stretched the step to
		// 32728 s and changed the week's figures.
		"demo beyond week":      {func(o *options) { o.window = 100000 * time.Hour }, "--window 100000h0m0s: the demo holds one week, 2026-01-05..2026-01-12; give --window 168h or less"},
		"demo end outside week": {func(o *options) { o.end, o.window = "2026-02-01T00:00:00Z", 24*time.Hour }, "the demo holds one week, 2026-01-05..2026-01-12; give an --end and --window within it"},
		"demo step":             {func(o *options) { o.step = time.Nanosecond }, "--step 1ns: want a whole number of milliseconds"},
		"tiny step":             {func(o *options) { o.window, o.step = 24*time.Hour, time.Millisecond }, "use --step 8s or more"},
		// Nonsense flag values, accepted silently before.
		"negative top":   {func(o *options) { o.top = -1 }, "--top -1: want 0 or more"},
		"zero step":      {func(o *options) { o.step, o.stepSet = 0, true }, "--step 0s: want a positive step"},
		"negative step":  {func(o *options) { o.step = -time.Second }, "--step -1s: want a positive step"},
		"zero window":    {func(o *options) { o.window, o.windowSet = 0, true }, "--window 0s: want a positive length"},
		"step > window":  {func(o *options) { o.step = 2 * time.Hour; o.window = time.Hour }, "--step 2h0m0s is longer than --window 1h0m0s"},
		"odd step":       {func(o *options) { o.step = 1500 * time.Microsecond; o.window = time.Second }, "--step 1.5ms: want a whole number of milliseconds"},
		"app name twice": {func(o *options) { o.app = []string{"tokens=a", "tokens=b"} }, "--app-metric tokens is given twice"},
		"app on demo":    {func(o *options) { o.app = []string{"tokens=a"} }, "--app-metric queries the Prometheus that --prometheus names"},
		"unreachable":    {func(o *options) { o.prometheus = "http://127.0.0.1:1" }, `prometheus http://127.0.0.1:1: query "DCGM_FI_PROF_GR_ENGINE_ACTIVE"`},
		"app metric":     {func(o *options) { o.app = []string{"tokens"} }, "want NAME=PROMQL"},
		"prices":         {func(o *options) { o.prices = "testdata/nope.yaml" }, "--prices"},
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"query processing would load too many samples"}`)
	}))
	defer failing.Close()
	cases["prometheus error"] = struct {
		mutate func(o *options)
		want   string
	}{func(o *options) { o.prometheus = failing.URL }, "prometheus " + failing.URL + `: query "DCGM_FI_PROF_GR_ENGINE_ACTIVE": bad_data: query processing would load too many samples`}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := defaults()
			tc.mutate(opts)
			err := run(context.Background(), opts, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func TestPriceFile(t *testing.T) {
	p, err := app.LoadPricing("testdata/prices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Currency() != "USD" || len(p.Rules) != 1 {
		t.Fatalf("currency %q, %d rules; want USD and 1", p.Currency(), len(p.Rules))
	}
	if got := p.PerHour(usage.Device{Model: "NVIDIA L40S"}); got != usage.Known(2) {
		t.Errorf("L40S price %+v, want 2", got)
	}
	p.NodeLabels = map[string]map[string]string{"n": {"node-pool": "spot"}}
	if got := p.PerHour(usage.Device{Node: "n", Model: "NVIDIA L40S"}); got != usage.Known(1) {
		t.Errorf("spot L40S price %+v, want 1", got)
	}
}

// TestPriceFileCurrency: a file in USD that prices one model must not
// print the catalogue's EUR prices as USD; the report names the models it
// cannot price. A price of 0 is free and costs 0, not unknown.
func TestPriceFileCurrency(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	opts := defaults()
	opts.prices = write("usd.yaml", "currency: USD\nprices: {H100-80GB: 3.1}\n")
	err := run(context.Background(), opts, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no price for") || !strings.Contains(err.Error(), "usd.yaml: ") || !strings.Contains(err.Error(), "L40S (on ") {
		t.Fatalf("demo with a USD price for the H100 only: err = %v, want the unpriced models named", err)
	}
	// Every demo model free: every cost is a measured 0.
	opts = defaults()
	opts.format = "json"
	opts.prices = write("free.yaml", "currency: USD\nprices: {H100-80GB: 0, A100-40GB: 0, L40S: 0, L4: 0}\n")
	var out bytes.Buffer
	if err := run(context.Background(), opts, &out); err != nil {
		t.Fatal(err)
	}
	var r usage.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Currency != "USD" || r.Cluster.Cost != usage.Known(0) {
		t.Errorf("free GPUs: currency %s, cluster cost %+v; want USD and a known 0", r.Currency, r.Cluster.Cost)
	}
	// Type errors are placed.
	if _, err := app.LoadPricing(write("bad.yaml", "prices:\n  T4: 0.3\nnodeRules:\n  - labels: {a: b}\n    perHour: \"1\"\n")); err == nil || !strings.Contains(err.Error(), "bad.yaml:5: nodeRules[0].perHour") {
		t.Errorf("err = %v, want it placed at bad.yaml:5: nodeRules[0].perHour", err)
	}
}

// gcPercentWriter records the collector's GC percent at each write.
type gcPercentWriter struct {
	bytes.Buffer
	seen map[int]bool
}

func (w *gcPercentWriter) Write(p []byte) (int, error) {
	cur := debug.SetGCPercent(-1)
	debug.SetGCPercent(cur)
	w.seen[cur] = true
	return w.Buffer.Write(p)
}

// TestLargeReportJSONGCPercent: write applies the one-shot policy: a
// large report's JSON is written with the collector's margin at
// mempolicy.WritingGCPercent and the margin is given back after; a small
// report's is written as it was. The bytes are WriteJSON's. (What the
// policy does with GOGC set lower or off is mempolicy's TestWriting.)
func TestLargeReportJSONGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	report := func(pods int) *usage.Report {
		r := &usage.Report{Pods: make([]usage.PodUsage, pods)}
		for i := range r.Pods {
			r.Pods[i].Namespace, r.Pods[i].Pod = "ml", fmt.Sprintf("p%d", i)
		}
		return r
	}
	for _, c := range []struct {
		pods          int
		before, while int
	}{
		{mempolicy.Large, 100, mempolicy.WritingGCPercent},
		{mempolicy.Large - 1, 100, 100}, // small: as it was
	} {
		r := report(c.pods)
		var want bytes.Buffer
		if err := r.WriteJSON(&want); err != nil {
			t.Fatal(err)
		}
		debug.SetGCPercent(c.before)
		w := &gcPercentWriter{seen: map[int]bool{}}
		err := write(w, r, "json", "test", 10)
		after := debug.SetGCPercent(100)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.seen) != 1 || !w.seen[c.while] {
			t.Errorf("%d pods, GC percent %d before: %v while writing, want only %d", c.pods, c.before, slices.Sorted(maps.Keys(w.seen)), c.while)
		}
		if after != c.before {
			t.Errorf("%d pods, GC percent %d before: %d after writing, want it given back", c.pods, c.before, after)
		}
		if !bytes.Equal(w.Bytes(), want.Bytes()) {
			t.Errorf("%d pods: write's JSON differs from WriteJSON's", c.pods)
		}
	}
}

// TestCostPerActiveHourOfNoActivity: where activity was measured and was
// none, the cost per active GPU-hour has no value since no active hour was
// bought, and the table says so, not "unknown"; "unknown" stays for
// activity that was not measured.
func TestCostPerActiveHourOfNoActivity(t *testing.T) {
	totals := func(active usage.Amount) usage.Totals {
		return usage.Totals{AllocatedGPUSeconds: 3600, ActiveGPUSeconds: active, Cost: usage.Known(3), IdleCost: usage.Known(3)}
	}
	r := &usage.Report{Currency: "EUR", Namespaces: []usage.GroupUsage{
		{Name: "idle", Pods: 1, Totals: totals(usage.Known(0))},
		{Name: "unmeasured", Pods: 1, Totals: totals(usage.Unknown)},
	}}
	r.Cluster.Totals = totals(usage.Known(0))
	var b strings.Builder
	if err := writeTable(&b, r, "test", 10); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"EUR per active GPU-hour": "no active hour", "idle ": "no active hour", "unmeasured ": "unknown"}
	for prefix, cell := range want {
		var line string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, prefix) {
				line = l
				break
			}
		}
		if !strings.HasSuffix(line, cell) {
			t.Errorf("line %q: want it to end in %q\n%s", line, cell, b.String())
		}
	}
}

// TestPrometheusPasswordHidden: the report's source line and its errors
// name the Prometheus URL with its password redacted.
func TestPrometheusPasswordHidden(t *testing.T) {
	cases := map[string]struct {
		status int
		body   func(path string) string
	}{
		"a report": {status: http.StatusOK, body: func(path string) string {
			if strings.HasSuffix(path, "/query") {
				return `{"status":"success","data":{"resultType":"vector","result":[]}}`
			}
			return `{"status":"success","data":{"resultType":"matrix","result":[]}}`
		}},
		"an error": {status: http.StatusBadRequest, body: func(string) string {
			return `{"status":"error","errorType":"bad_data","error":"too many samples"}`
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body(r.URL.Path))
			}))
			defer prom.Close()
			opts := defaults()
			opts.prometheus = strings.Replace(prom.URL, "http://", "http://user:secret@", 1)
			opts.window, opts.accounting = time.Hour, string(app.AccountingRaw)
			var out bytes.Buffer
			err := run(context.Background(), opts, &out)
			shown := out.String()
			if err != nil {
				shown += err.Error()
			}
			if want := strings.Replace(prom.URL, "http://", "http://user:xxxxx@", 1); !strings.Contains(shown, want) {
				t.Errorf("output and error %q do not name %s", shown, want)
			}
			if strings.Contains(shown, "secret") {
				t.Errorf("output and error show the password: %q", shown)
			}
		})
	}
}
