package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// appScenario: two vLLM pods hold an H100 each for the whole run, at a
// constant activity, so that any window inside the run has known active
// GPU-seconds.
const appScenario = `duration: 50s
nodes:
  - {name: vllm-a, model: H100-80GB, gpus: 2}
pods:
  - {namespace: serve, name: llm-0, node: vllm-a, gpu: 0, from: 1s, to: 50s, memoryMiB: 70000, activity: {pattern: constant, level: 0.6}}
  - {namespace: serve, name: llm-1, node: vllm-a, gpu: 1, from: 1s, to: 50s, memoryMiB: 30000, activity: {pattern: constant, level: 0.25}}
`

// vllmPod is what a vLLM server of the scenario's pods produces: tokens
// at constant rates, and a constant queue.
type vllmPod struct {
	namespace, pod string
	activity       float64 // the scenario's
	generation     float64 // tokens/s
	prompt         float64 // tokens/s
	waiting        float64 // requests
}

// vllmMetrics serves p's /metrics in vLLM's exposition, its counters
// growing at p's rates from the server's start.
//
// The format is vLLM's own (vllm/v1/metrics/loggers.py, PrometheusStatLogger,
// read through the search tool): labels model_name and engine on every
// series; vllm:num_requests_waiting a gauge ("Number of requests waiting
// to be processed."); vllm:prompt_tokens and vllm:generation_tokens
// prometheus_client Counters ("Number of prefill tokens processed.",
// "Number of generation tokens processed."), which prometheus_client's
// text exposition writes as a counter family NAME_total and a gauge
// family NAME_created holding the counter's creation time, as vLLM's
// /metrics shows them.
func vllmMetrics(p vllmPod, model string) http.Handler {
	born := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elapsed := time.Since(born).Seconds()
		labels := fmt.Sprintf(`{engine="0",model_name=%q}`, model)
		var b strings.Builder
		fmt.Fprintf(&b, "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting%s %.1f\n", labels, p.waiting)
		for _, c := range []struct {
			name, help string
			rate       float64
		}{{"vllm:prompt_tokens", "Number of prefill tokens processed.", p.prompt}, {"vllm:generation_tokens", "Number of generation tokens processed.", p.generation}} {
			fmt.Fprintf(&b, "# HELP %[1]s_total %[2]s\n# TYPE %[1]s_total counter\n%[1]s_total%[3]s %[4]g\n", c.name, c.help, labels, c.rate*elapsed)
			fmt.Fprintf(&b, "# HELP %[1]s_created %[2]s\n# TYPE %[1]s_created gauge\n%[1]s_created%[3]s %.9e\n", c.name, c.help, labels, float64(born.UnixNano())/1e9)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(b.String()))
	})
}

// TestAppMetricFromVLLM: a real Prometheus scrapes fake-dcgm and a vLLM
// /metrics target per pod, the pod and namespace attached by the relabel
// rules of a Kubernetes pod scrape; report --app-metric reads the token
// rate and the queue through it, and gives each pod its tokens per
// active GPU-hour and GPU cost per million tokens as the known rates,
// activity and price make them.
func TestAppMetricFromVLLM(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pods := []vllmPod{
		{namespace: "serve", pod: "llm-0", activity: 0.6, generation: 1500, prompt: 4200, waiting: 3},
		{namespace: "serve", pod: "llm-1", activity: 0.25, generation: 400, prompt: 900, waiting: 0},
	}
	// A Kubernetes pod scrape (kubernetes_sd_configs, role pod) finds
	// each target with __meta_kubernetes_namespace and
	// __meta_kubernetes_pod_name, which its relabel rules copy into
	// namespace and pod; static targets carrying the same meta labels
	// go through the same rules.
	var vllmTargets strings.Builder
	for _, p := range pods {
		srv := httptest.NewServer(vllmMetrics(p, "meta-llama/Llama-3.1-8B-Instruct"))
		defer srv.Close()
		fmt.Fprintf(&vllmTargets, "      - {targets: [%q], labels: {__meta_kubernetes_namespace: %s, __meta_kubernetes_pod_name: %s}}\n", srv.Listener.Addr().String(), p.namespace, p.pod)
	}

	write(t, filepath.Join(dir, "scenario.yaml"), appScenario)
	truthPath := filepath.Join(dir, "truth.json")
	addr, stop := startFakeDCGM(t, ctx, filepath.Join(dir, "scenario.yaml"), truthPath)
	defer stop()
	config := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n"+
		"  - {job_name: dcgm, honor_labels: true, static_configs: [{targets: [%q]}]}\n"+
		"  - job_name: vllm\n    static_configs:\n%s"+
		"    relabel_configs:\n"+
		"      - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}\n"+
		"      - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}\n",
		addr, vllmTargets.String())
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Config: config})

	truth := waitTruth(t, ctx, truthPath)
	// A window inside the run and inside what Prometheus scraped, the
	// first rate window included (Prometheus may start scraping seconds
	// into the run on a busy machine): the pods hold their GPUs, and the
	// counters grow, through all of it.
	first := latest(truth.Start, firstSample(t, prom.URL, `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, truth.End), firstSample(t, prom.URL, `vllm:generation_tokens_total`, truth.End))
	start := first.Truncate(time.Second).Add(12 * time.Second)
	end := truth.End.Truncate(time.Second).Add(-2 * time.Second)
	if end.Sub(start) < 10*time.Second {
		t.Fatalf("Prometheus first scraped at %s, %s into the %s run: too late for a window of 10 s", first.Format(time.RFC3339Nano), first.Sub(truth.Start), truth.End.Sub(truth.Start))
	}
	const price = 2.4 // EUR per H100-hour
	write(t, filepath.Join(dir, "prices.yaml"), fmt.Sprintf("currency: EUR\nprices: {H100-80GB: %g}\n", price))
	r := reportJSON(t, ctx, prom.URL, start, end, time.Second, "--prices", filepath.Join(dir, "prices.yaml"),
		"--app-metric", "tokens=sum by (namespace, pod) (rate(vllm:generation_tokens_total[10s]))",
		"--app-metric", "waiting=sum by (namespace, pod) (vllm:num_requests_waiting)")
	seconds := end.Sub(start).Seconds()
	for _, p := range pods {
		key := p.namespace + "/" + p.pod
		got := reportPod(t, r, key)
		if got == nil {
			continue
		}
		apps := map[string]usage.AppUsage{}
		for _, a := range got.App {
			apps[a.Name] = a
		}
		tokens, waiting := apps["tokens"], apps["waiting"]
		// The truth: R tokens/s over the window, on a GPU active a of
		// the time, priced at price per allocated hour.
		wantTotal := p.generation * seconds
		wantPerActiveHour := p.generation * 3600 / p.activity
		wantCostPerMillion := price * seconds / 3600 / (wantTotal / 1e6)
		near(t, key+" tokens", tokens.Total, wantTotal, 0.02*wantTotal)
		near(t, key+" tokens per active GPU-hour", tokens.PerActiveGPUHour, wantPerActiveHour, 0.02*wantPerActiveHour)
		near(t, key+" GPU cost per million tokens", tokens.CostPerMillion, wantCostPerMillion, 0.02*wantCostPerMillion)
		near(t, key+" requests waiting", waiting.Mean, p.waiting, 0.01)
		t.Logf("%s: %.0f tokens, %.0f per active GPU-hour (truth %.0f), EUR %.4f per million (truth %.4f)", key,
			tokens.Total.Value(), tokens.PerActiveGPUHour.Value(), wantPerActiveHour, tokens.CostPerMillion.Value(), wantCostPerMillion)
	}
}

// latest is the latest of times.
func latest(times ...time.Time) time.Time {
	var out time.Time
	for _, tm := range times {
		if tm.After(out) {
			out = tm
		}
	}
	return out
}

// firstSample is the time of the first sample Prometheus holds of the
// series that selector names, looking back 3 minutes from at.
func firstSample(t *testing.T, promURL, selector string, at time.Time) time.Time {
	t.Helper()
	q := url.Values{"query": {selector + "[3m]"}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	resp, err := http.Get(promURL + "/api/v1/query?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s: %v", selector, err)
	}
	var first float64
	for _, s := range r.Data.Result {
		if len(s.Values) > 0 {
			if ts, ok := s.Values[0][0].(float64); ok && (first == 0 || ts < first) {
				first = ts
			}
		}
	}
	if first == 0 {
		t.Fatalf("Prometheus holds no sample of %s", selector)
	}
	return time.UnixMilli(int64(first * 1000))
}
