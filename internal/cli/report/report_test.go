package report

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/golden"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/usage"
)

func check(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

func defaults() *options {
	return &options{window: 24 * time.Hour, step: 30 * time.Second, format: "table", top: 10}
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
				if _, err := diagnose.ParseUsage(b.Bytes(), "demo.podusage"); err != nil {
					t.Errorf("diagnose cannot read the podusage output: %v", err)
				}
			}
		})
	}
}

func TestMetricsGolden(t *testing.T) {
	var b bytes.Buffer
	opts := defaults()
	r := demoReport(t, opts)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&collector{latest: func() (*usage.Report, error) { return r, nil }})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	check(t, "metrics.txt", b.Bytes())
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("GPUPACK_E2E") == "1" {
			t.Fatal("GPUPACK_E2E=1 but promtool is not on PATH; apt-get install -y prometheus")
		}
		t.Skip("promtool not installed (apt-get install -y prometheus); set GPUPACK_E2E=1 to make this a failure")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(b.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
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
		"format":     {func(o *options) { o.format = "xml" }, `--format "xml"`},
		"resolution": {func(o *options) { o.prometheus = "http://127.0.0.1:1"; o.window = 7 * 24 * time.Hour }, "use --step 55s or more"},
		// The demo is bounded as Prometheus is: these ate all memory.
		"demo window": {func(o *options) { o.window = 100000 * time.Hour }, "--window 100000h0m0s at --step 30s is more than 11000 steps per series, the most that report accounts (and that one Prometheus query returns); use --step 9h5m28s or more, or a shorter --window"},
		"demo step":   {func(o *options) { o.step = time.Nanosecond }, "use --step 8s or more"},
		"unreachable": {func(o *options) { o.prometheus = "http://127.0.0.1:1" }, `prometheus http://127.0.0.1:1: query "DCGM_FI_PROF_GR_ENGINE_ACTIVE"`},
		"app metric":  {func(o *options) { o.app = []string{"tokens"} }, "want NAME=PROMQL"},
		"prices":      {func(o *options) { o.prices = "testdata/nope.yaml" }, "--prices"},
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
	p, err := loadPricing("testdata/prices.yaml")
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
