package serve

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/sim"
	"github.com/gpupack/gpupack/usage"
)

// provider is a Provider for tests: a fixed view and readiness.
type provider struct {
	v     *app.View
	ready error
}

func (p *provider) View() *app.View { return p.v }
func (p *provider) Ready() error    { return p.ready }

// testView is a small view with every part filled, its strings made of
// the given text (to plant hostile names).
func testView(text string) *app.View {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	pod := func(ns, name, node string, alloc, active float64) usage.PodUsage {
		p := usage.PodUsage{Namespace: ns, Pod: name, Node: node, Devices: []string{node + "/gpu0"}}
		p.AllocatedGPUSeconds = usage.Seconds(alloc)
		p.ActiveGPUSeconds = usage.Known(active)
		p.IdleCost = usage.Known((alloc - active) / 3600 * 2)
		p.Pattern = usage.Pattern{Name: usage.IdleHeld, Recommendation: "reclaim " + text}
		created, ready := start.Add(time.Minute), start.Add(3*time.Minute)
		p.Startup = usage.Startup{Workload: "w-" + name, Created: &created, AppReady: &ready, LoadSeconds: usage.Known(80),
			Storage: usage.ModelStorage{Kind: usage.StorageCSI, Detail: "csi-" + text}}
		var phases []usage.PhaseTime
		for k, sec := range []float64{5, 10, 20, 60, 20} {
			phases = append(phases, usage.PhaseTime{Phase: usage.Phases[k], Seconds: usage.Known(sec)})
		}
		var err error
		if p.Startup.Phases, err = usage.NewPhaseTimes(phases); err != nil {
			panic(err) // the phases above are named in order
		}
		return p
	}
	r := &usage.Report{Start: start, End: start.Add(2 * time.Hour), StepSecond: 30, Currency: "EUR",
		Pods: []usage.PodUsage{pod("ns-"+text, "pod-"+text, "node-"+text, 7200, 720), pod("b", "zeta", "n2", 3600, 3000), pod("a", "alpha", "n1", 1800, 0)}}
	r.Startup = usage.SummarizeStartup(r.Pods, r.Start, r.End, 30*time.Second)
	r.Cluster.AllocatedGPUSeconds = 12600
	r.Cluster.ActiveGPUSeconds = usage.Known(3720)
	r.Cluster.CapacityGPUSeconds = 14400
	r.Namespaces = []usage.GroupUsage{{Name: "ns-" + text, Pods: 1}}
	r.Nodes = []usage.NodeUsage{{GroupUsage: usage.GroupUsage{Name: "node-" + text, Pods: 1}}}
	created := start.Add(-time.Hour)
	p := &plan.Plan{Window: 2 * time.Hour, Decisions: []*plan.Decision{{Workload: "ns-" + text + "/w", Pods: 1, Before: "1 GPU", Action: plan.Reclaim,
		Reason: plan.Reason{Code: "idle-held", Detail: text}}}, Warnings: []string{"plan " + text},
		Tainted: []plan.TaintedGPU{{Node: "xidnode-" + text, UUID: "GPU-" + text, XID: 79, Devices: []string{"gpu.nvidia.com/p/gpu-0"}, Rules: []string{"rule-" + text}}}}
	health := planout.HealthOf([]usage.DeviceHealth{
		{Node: "xidnode-" + text, UUID: "GPU-" + text, GPU: "gpu-" + text, XIDs: []int{13, 79}},
		{Node: "n2", UUID: "GPU-n2-1", GPU: "1", XIDs: []int{31}},
	}, p)
	return &app.View{
		Source: "test " + text, AsOf: start.Add(2 * time.Hour), Start: r.Start, End: r.End, Report: r,
		Hours: []app.Hour{
			{Start: start, CapacityGPUSeconds: usage.Known(7200), AllocatedGPUSeconds: usage.Known(6000), ActiveGPUSeconds: usage.Known(2000), IdleCost: usage.Known(2.5)},
			{Start: start.Add(time.Hour), CapacityGPUSeconds: usage.Known(7200), AllocatedGPUSeconds: usage.Known(6600), ActiveGPUSeconds: usage.Unknown, IdleCost: usage.Unknown},
		},
		Nodes: 2, GPUs: 2,
		QueueWait: &usage.QueueWait{Scheduled: usage.WaitFace{All: usage.WaitStats{Pods: 3, UnknownWait: 1}}},
		Pending: []app.PendingPod{{Finding: diagnose.Finding{Pod: "ns-" + text + "/wait-" + text, Request: "1 GPU", Cause: diagnose.Allocation,
			Summary: "0/2 nodes are available: " + text, Fix: []string{"reclaim " + text}, Remedies: testRemedies(text)}, Created: &created, WaitedSeconds: usage.Known(3600),
			SchedulerMessage: "0/2 nodes: " + text}},
		Plan: p, Health: health,
		PlanFiles: []app.PlanFile{{Name: "plan.md", Data: []byte("# plan " + text + "\n")}, {Name: "node-labels.yaml", Data: []byte("nodes: {}\n")}},
		Curve:     []app.CurveRun{{Result: sim.Result{Policy: "policy-" + text}, Points: []sim.Point{{ArrivedRatio: 0.5, AllocRatio: 0.5}, {ArrivedRatio: 1, AllocRatio: 0.9}}}},
		Err:       "Prometheus: " + text, ErrAt: &created,
		Warnings: []string{"warn " + text},
	}
}

// testRemedies are a remedy of each form, made of the text: commands, a
// patch, a configuration, and advice, which the page does not show.
func testRemedies(text string) []diagnose.Remedy {
	body, _ := json.Marshal([]map[string]string{{"op": "remove", "path": "/spec/nodeSelector/" + text}})
	return []diagnose.Remedy{
		{Kind: diagnose.Reclaim, Targets: []diagnose.Object{{Kind: "Pod", Namespace: "ns-" + text, Name: "p"}},
			Commands: []string{"kubectl delete pod -n ns-" + text + " p"}, Note: "note " + text},
		{Kind: diagnose.PodSpec, Targets: []diagnose.Object{{Kind: "Pod", Namespace: "ns-" + text, Name: "p"}},
			Patch: &diagnose.Patch{Type: diagnose.JSONPatch, Body: body}},
		{Kind: diagnose.MIGConfig, Config: "config " + text, Commands: []string{"label " + text}},
		{Kind: diagnose.Advice, Note: "advice " + text},
	}
}

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRoutes(t *testing.T) {
	v := testView("x")
	h := Handler(Options{Provider: &provider{v: v}, Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "gpupack_test 1\n")
	})})
	want := func(x any) string {
		b, err := json.MarshalIndent(x, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	cases := map[string]struct {
		code  int
		ctype string
		body  string // exact, when set
		has   string // contained, when set
	}{
		"/":                       {200, "text/html; charset=utf-8", "", `id="pods-table"`},
		"/api/v1/report":          {200, "application/json", want(v.Report), ""},
		"/api/v1/pending":         {200, "application/json", want(v.Pending), ""},
		"/api/v1/queuewait":       {200, "application/json", want(v.QueueWait), ""},
		"/api/v1/plan":            {200, "application/json", want(v.Plan), ""},
		"/api/v1/hours":           {200, "application/json", want(v.Hours), ""},
		"/api/v1/health":          {200, "application/json", want(v.Health), ""},
		"/api/v1/view":            {200, "application/json", want(v), ""},
		"/plan/files/plan.md":     {200, "text/plain; charset=utf-8", "# plan x\n", ""},
		"/plan/files/nope.yaml":   {404, "application/json", "", "plan.md, node-labels.yaml"},
		"/plan/files/..%2fserver": {404, "application/json", "", "no plan file"},
		"/static/app.js":          {200, "text/javascript; charset=utf-8", "", "sortTable"},
		"/static/style.css":       {200, "text/css; charset=utf-8", "", "tabular-nums"},
		"/healthz":                {200, "text/plain; charset=utf-8", "ok\n", ""},
		"/readyz":                 {200, "text/plain; charset=utf-8", "ok\n", ""},
		"/metrics":                {200, "", "gpupack_test 1\n", ""},
		"/nope":                   {404, "", "", ""},
	}
	for path, c := range cases {
		t.Run(path, func(t *testing.T) {
			resp := get(t, h, http.MethodGet, path)
			got := body(t, resp)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, c.code, got)
			}
			if c.ctype != "" && resp.Header.Get("Content-Type") != c.ctype {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), c.ctype)
			}
			if c.body != "" {
				if d := cmp.Diff(c.body, got); d != "" {
					t.Errorf("body (-want +got):\n%s", d)
				}
			}
			if c.has != "" && !strings.Contains(got, c.has) {
				t.Errorf("body lacks %q:\n%.500s", c.has, got)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy %q: want default-src 'none' and script-src 'self'", csp)
			}
		})
	}
	resp := get(t, h, http.MethodGet, "/plan/files/plan.md")
	if cd := resp.Header.Get("Content-Disposition"); cd != "attachment; filename=plan.md" {
		t.Errorf("download Content-Disposition %q, want attachment; filename=plan.md", cd)
	}
	if resp := get(t, Handler(Options{Provider: &provider{v: v}}), http.MethodGet, "/metrics"); resp.StatusCode != 404 {
		t.Errorf("/metrics without Options.Metrics: status %d, want 404", resp.StatusCode)
	}
}

func TestReadOnly(t *testing.T) {
	h := Handler(Options{Provider: &provider{v: testView("x")}})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		for _, path := range []string{"/", "/api/v1/report", "/plan/files/plan.md", "/readyz"} {
			resp := get(t, h, m, path)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: status %d, Allow %q; want 405 and Allow: GET, HEAD", m, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
	if resp := get(t, h, http.MethodHead, "/api/v1/report"); resp.StatusCode != 200 {
		t.Errorf("HEAD /api/v1/report: status %d, want 200", resp.StatusCode)
	}
}

func TestNotReady(t *testing.T) {
	why := errors.New("Prometheus http://prom:9090: connection refused")
	cases := map[string]struct {
		p        *provider
		path     string
		code     int
		contains string
	}{
		"readyz says why":                {&provider{v: testView("x"), ready: why}, "/readyz", 503, "not ready: Prometheus http://prom:9090: connection refused"},
		"healthz stays up":               {&provider{ready: why}, "/healthz", 200, "ok"},
		"no view: api says why":          {&provider{ready: why}, "/api/v1/report", 503, "no data yet: Prometheus http://prom:9090: connection refused"},
		"no view: page says why":         {&provider{ready: why}, "/", 200, "no data yet: Prometheus http://prom:9090: connection refused"},
		"no view yet, ready":             {&provider{}, "/api/v1/pending", 503, "the first refresh has not finished"},
		"no view: downloads say why":     {&provider{ready: why}, "/plan/files/plan.md", 503, "no data yet"},
		"no plan":                        {&provider{v: &app.View{Source: "Prometheus p"}}, "/api/v1/plan", 404, "no plan in this view: Prometheus p has no plan"},
		"no report":                      {&provider{v: &app.View{Source: "Prometheus p"}}, "/api/v1/report", 404, "no usage report"},
		"no queue wait":                  {&provider{v: &app.View{Source: "Prometheus p"}}, "/api/v1/queuewait", 404, "no queue wait in this view"},
		"empty lists are []":             {&provider{v: &app.View{}}, "/api/v1/pending", 200, "[]"},
		"health not read":                {&provider{v: &app.View{Source: "Prometheus p"}}, "/api/v1/health", 404, "no GPU health in this view: Prometheus p has not read"},
		"no GPU with XIDs":               {&provider{v: &app.View{Health: []planout.GPUHealth{}}}, "/api/v1/health", 200, "[]"},
		"page: health not read":          {&provider{v: &app.View{}}, "/", 200, "GPU health not read in this view."},
		"page: no GPU with XIDs":         {&provider{v: &app.View{Health: []planout.GPUHealth{}}}, "/", 200, "No XID errors in the window."},
		"stale data shows the error":     {&provider{v: testView("x")}, "/", 200, "last refresh failed at 2026-01-04 23:00 UTC: <span id=\"error-text\">Prometheus: x</span>"},
		"nil provider is never ready":    {nil, "/readyz", 503, "no data provider is configured"},
		"nil provider: page says so too": {nil, "/", 200, "no data provider is configured"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := Options{}
			if c.p != nil {
				o.Provider = c.p
			}
			resp := get(t, Handler(o), http.MethodGet, c.path)
			got := body(t, resp)
			if resp.StatusCode != c.code || !strings.Contains(got, c.contains) {
				t.Errorf("status %d, body %.300q; want %d containing %q", resp.StatusCode, got, c.code, c.contains)
			}
		})
	}
}

// hostile are names a cluster may hold (pod names cannot, but labels,
// annotations, messages and other sources can): markup, quotes, a closing
// script tag, and a very long string.
var hostile = []string{
	`<script>window.pwned=1</script>`,
	`"><img src=x onerror="window.pwned=1">`,
	`'</script><script>window.pwned=1</script>`,
	`</title></style><svg onload=window.pwned=1>`,
	`javascript:window.pwned=1`,
	strings.Repeat("long-<u>-", 20000),
}

// TestHostileNames renders the page and the API with hostile strings in
// every cluster-derived field and checks, on the parsed HTML, that they
// are text only: no script but the page's own, no event handler
// attribute, no javascript: link, and the strings readable verbatim.
func TestHostileNames(t *testing.T) {
	for _, text := range hostile {
		name := text
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			h := Handler(Options{Provider: &provider{v: testView(text)}, Reclaims: func() *app.ReclaimStatus { return testReclaims(text) }})
			resp := get(t, h, http.MethodGet, "/")
			page := body(t, resp)
			doc, err := html.Parse(strings.NewReader(page))
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			var walk func(n *html.Node)
			walk = func(n *html.Node) {
				if n.Type == html.ElementNode {
					if n.Data == "script" {
						if src := attr(n, "src"); src != "/static/app.js" || n.FirstChild != nil {
							t.Errorf("a script element that is not the page's own: src %q", src)
						}
					}
					for _, a := range n.Attr {
						if strings.HasPrefix(strings.ToLower(a.Key), "on") {
							t.Errorf("<%s> has an event handler attribute %s=%q", n.Data, a.Key, a.Val)
						}
						if (a.Key == "href" || a.Key == "src") && strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:") {
							t.Errorf("<%s %s=%q> is a javascript: link", n.Data, a.Key, a.Val)
						}
					}
					if n.Data == "img" || n.Data == "u" || (n.Data == "svg" && attr(n, "class") != "chart") {
						t.Errorf("an element <%s> came from data", n.Data)
					}
				}
				if n.Type == html.TextNode {
					texts = append(texts, n.Data)
				}
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					walk(c)
				}
			}
			walk(doc)
			all := strings.Join(texts, "\n")
			for _, want := range []string{"pod-" + text, "ns-" + text, "node-" + text, "reclaim " + text, "0/2 nodes are available: " + text, "Prometheus: " + text, "policy-" + text,
				"kubectl delete pod -n ns-" + text + " p", "note " + text, "config " + text, "label " + text, string(testRemedies(text)[1].Patch.Body),
				"xidnode-" + text, "GPU-" + text, "gpu-" + text, "DeviceTaintRule rule-" + text, "Deployment ml/owner-" + text, "skip-" + text} {
				if !strings.Contains(all, want) {
					t.Errorf("the page's text lacks %.60q verbatim", want)
				}
			}
			if strings.Contains(all, "advice "+text) {
				t.Errorf("the page shows advice, which has nothing to apply")
			}
			for _, path := range []string{"/api/v1/view", "/api/v1/report", "/api/v1/pending", "/api/v1/health", "/api/v1/reclaims"} {
				got := body(t, get(t, h, http.MethodGet, path))
				if strings.Contains(got, "<") {
					t.Errorf("%s has a raw '<' (JSON must escape it as \\u003c)", path)
				}
			}
			dl := get(t, h, http.MethodGet, "/plan/files/plan.md")
			if ct := dl.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || dl.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("download served as %q (nosniff %q): want text/plain, nosniff, so it never renders as HTML", ct, dl.Header.Get("X-Content-Type-Options"))
			}
		})
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// TestCharts checks that each chart has its series and a mark per known
// value, and a gap (no mark) for an unknown one.
func TestCharts(t *testing.T) {
	v := testView("x")
	charts := hourCharts(v.Hours, "EUR")
	if len(charts) != 2 {
		t.Fatalf("%d hour charts, want 2", len(charts))
	}
	marks := func(c *chart) map[string]int {
		m := map[string]int{}
		for _, s := range c.Series {
			m[s.Name] = len(s.Points)
		}
		return m
	}
	if d := cmp.Diff(map[string]int{"capacity": 2, "allocated": 2, "active": 1}, marks(charts[0])); d != "" {
		t.Errorf("GPU-hours chart marks (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"idle cost": 1}, marks(charts[1])); d != "" {
		t.Errorf("idle cost chart marks (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"scheduling": 3, "image pull": 3, "init": 3, "to first GPU use": 3, "first use to ready": 3}, marks(startupChart(v.Report))); d != "" {
		t.Errorf("start-up chart marks (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"policy-x": 2}, marks(curveChart(v.Curve, nil))); d != "" {
		t.Errorf("curve chart marks (-want +got):\n%s", d)
	}
	// With the bounds: the hindsight packing's level and the cap's, two
	// marks each (the chart's ends), the cap above the packing on the page.
	withBounds := curveChart(v.Curve, &sim.Bounds{Hindsight: &sim.HindsightPacking{GPUAllocRatio: 0.95}, PlaceIfFitsCap: &sim.PlaceIfFitsCap{Ratio: 0.96}})
	if d := cmp.Diff(map[string]int{"policy-x": 2, "hindsight packing": 2, "place-if-fits cap": 2}, marks(withBounds)); d != "" {
		t.Errorf("curve chart marks with the bounds (-want +got):\n%s", d)
	}
	if h, c := withBounds.Series[1], withBounds.Series[2]; c.Points[0].Y >= h.Points[0].Y {
		t.Errorf("the cap's level (y %.1f) is not above the hindsight packing's (y %.1f)", c.Points[0].Y, h.Points[0].Y)
	}
	// The allocated line is higher on the page (smaller y) in the second
	// hour, which holds more.
	alloc := charts[0].Series[1]
	if alloc.Points[1].Y >= alloc.Points[0].Y {
		t.Errorf("allocated marks at y %v then %v: want the second (6600 s) above the first (6000 s)", alloc.Points[0].Y, alloc.Points[1].Y)
	}
}

// TestPendingRemedies: the pending table shows, under each fix, what to
// apply in <pre> elements, config first, then its commands; advice shows
// nothing.
func TestPendingRemedies(t *testing.T) {
	v := testView("x")
	doc, err := html.Parse(strings.NewReader(body(t, get(t, Handler(Options{Provider: &provider{v: v}}), http.MethodGet, "/"))))
	if err != nil {
		t.Fatal(err)
	}
	var pres []string
	var walk func(n *html.Node, inPending bool)
	walk = func(n *html.Node, inPending bool) {
		if n.Type == html.ElementNode && attr(n, "id") == "pending-table" {
			inPending = true
		}
		if inPending && n.Type == html.ElementNode && n.Data == "pre" && n.FirstChild != nil {
			pres = append(pres, n.FirstChild.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inPending)
		}
	}
	walk(doc, false)
	want := []string{"kubectl delete pod -n ns-x p", string(testRemedies("x")[1].Patch.Body), "config x", "label x"}
	if diff := cmp.Diff(want, pres); diff != "" {
		t.Errorf("<pre> in the pending table (-want +got):\n%s", diff)
	}
}

// TestFailedTable: the pods that failed after scheduling get a table of
// their own, with what their status says and, under each fix, what to
// apply; a view without any has no such table.
func TestFailedTable(t *testing.T) {
	v := testView("x")
	h := Handler(Options{Provider: &provider{v: v}})
	if page := body(t, get(t, h, http.MethodGet, "/")); strings.Contains(page, `id="failed-table"`) {
		t.Errorf("a view without failed pods shows a failed table")
	}
	v.Failed = []diagnose.Finding{{Pod: "ml/two", Request: "2 nvidia.com/gpu", Cause: diagnose.Rejected,
		Evidence: diagnose.Evidence{Failure: &diagnose.FailureFacts{FailureCause: cluster.FailureCause{Kind: cluster.SharedRequestRefused, Evidence: "maximum request size for shared resources is 1; found 2"},
			Node: "l4-ts", Reason: "UnexpectedAdmissionError"}},
		Fix:      []string{"then delete the failed pod ml/two"},
		Remedies: []diagnose.Remedy{{Fix: 0, Kind: diagnose.Recreate, Commands: []string{"kubectl delete pod -n ml two"}}}}}
	page := body(t, get(t, h, http.MethodGet, "/"))
	for _, want := range []string{`<a href="#failed">failed</a>`, `id="failed-table"`, `<tr data-pod="ml/two"><td class="pod">ml/two</td><td>2 nvidia.com/gpu</td><td class="cause">rejected: shared-request-refused</td><td>l4-ts</td>`,
		"UnexpectedAdmissionError: maximum request size for shared resources is 1; found 2", "<pre>kubectl delete pod -n ml two</pre>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestHealthTable: the page shows each GPU's state and its XIDs as
// planout.HealthOf words them.
func TestHealthTable(t *testing.T) {
	p := &plan.Plan{Tainted: []plan.TaintedGPU{{Node: "dra-a", UUID: "GPU-a0", XID: 79, Rules: []string{"gpupack-unhealthy-dra-a-gpu-0"}}}}
	got := planout.HealthOf([]usage.DeviceHealth{
		{Node: "dra-a", UUID: "GPU-a0", GPU: "0", XIDs: []int{79}},
		{Node: "plugin-b", UUID: "GPU-b1", GPU: "1", XIDs: []int{13, 48}},
		{Node: "plugin-b", UUID: "GPU-b2", GPU: "2", XIDs: []int{31}},
	}, p)
	page := body(t, get(t, Handler(Options{Provider: &provider{v: &app.View{Health: got}}}), http.MethodGet, "/"))
	for _, want := range []string{"critical (XID 79)", "critical (XID 48)", ">application<", ">13, 48<"} {
		if !strings.Contains(page, want) {
			t.Errorf("the health table lacks %q", want)
		}
	}
}

// TestCurveTableShareBound: the simulator's table shows each run's share
// bound, and a dash where its LP gave none.
func TestCurveTableShareBound(t *testing.T) {
	b := 0.96457
	v := &app.View{Curve: []app.CurveRun{
		{Result: sim.Result{Policy: "gpupack", GPUAllocRatio: 0.9595, GPUAllocShareBound: &b}},
		{Result: sim.Result{Policy: "fgd", GPUAllocRatio: 0.956, ShareBoundError: "lp: infeasible"}},
	}}
	page := body(t, get(t, Handler(Options{Provider: &provider{v: v}}), http.MethodGet, "/"))
	for _, want := range []string{"<td>gpupack</td><td>0</td><td>0</td><td>95.95%</td><td>96.46%</td>", "<td>fgd</td><td>0</td><td>0</td><td>95.60%</td><td>-</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the simulator's table lacks %q", want)
		}
	}
	if strings.Contains(page, `id="curve-bounds"`) {
		t.Error("a view without bounds shows them")
	}
	v.Bounds = &sim.Bounds{Hindsight: &sim.HindsightPacking{GPUAllocRatio: 0.9861}, PlaceIfFitsCap: &sim.PlaceIfFitsCap{Ratio: 0.9646}}
	page = body(t, get(t, Handler(Options{Provider: &provider{v: v}}), http.MethodGet, "/"))
	for _, want := range []string{"packed with hindsight by a search reach 98.61%: a lower estimate of the offline optimum", "allocates more than 96.46% of the GPUs"} {
		if !strings.Contains(page, want) {
			t.Errorf("the simulator's section lacks %q", want)
		}
	}
}

// TestCostPerActiveHourOfNoActivity: where activity was measured and was
// none, the page says the cost per active GPU-hour has no active hour to
// price, not that it is unknown; "unknown" stays for unmeasured activity.
func TestCostPerActiveHourOfNoActivity(t *testing.T) {
	totals := func(active usage.Amount) usage.Totals {
		return usage.Totals{AllocatedGPUSeconds: 3600, ActiveGPUSeconds: active, Cost: usage.Known(3), IdleCost: usage.Known(3)}
	}
	r := &usage.Report{Currency: "EUR",
		Pods: []usage.PodUsage{{Namespace: "idle", Pod: "p", Totals: totals(usage.Known(0))}},
		Namespaces: []usage.GroupUsage{
			{Name: "idle", Pods: 1, Totals: totals(usage.Known(0))},
			{Name: "unmeasured", Pods: 1, Totals: totals(usage.Unknown)},
		}}
	r.Cluster.Totals = totals(usage.Known(0))
	page := body(t, get(t, Handler(Options{Provider: &provider{v: &app.View{Report: r}}}), http.MethodGet, "/"))
	for _, want := range []string{
		`id="card-cost-active">no active hour<`,
		`<td class="f">p</td>`,
		`>no active hour</td><td class="pattern">`,
		`<tr><td>idle</td>`,
		`>no active hour</td></tr>`,
		`<tr><td>unmeasured</td>`,
		`>unknown</td></tr>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestChanges: the apply controller's status is on the page and at
// /api/v1/changes when a controller runs, and /api/v1/changes is 404
// without one; a pod whose budget blocks it is named.
func TestChanges(t *testing.T) {
	v := testView("x")
	if resp := get(t, Handler(Options{Provider: &provider{v: v}}), http.MethodGet, "/api/v1/changes"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/api/v1/changes without a controller: %d, want 404", resp.StatusCode)
	}
	st := &app.ChangeStatus{Approved: "bob", Set: &change.Set{Hash: "0123456789abcdef", Nodes: []change.Node{{Name: "gpu-1", Pool: "h100",
		Labels: []change.Label{{Key: "nvidia.com/mig.config", To: "h100-mig-1"}},
		Stop:   []change.Stop{{Pod: cluster.PodKey{Namespace: "ml", Name: "held"}, Budget: &change.Budget{Namespace: "ml", Name: "pdb"}}}}}},
		Results: []app.NodeResult{{Node: "gpu-0", Outcome: app.OutcomeRolledBack, Reason: "mig-manager failed the change"}},
		Measured: []app.ChangeMeasured{{Node: "gpu-2", Hours: 12, ExpectedFits: []cluster.PodKey{{Namespace: "ml", Name: "wait-a"}, {Namespace: "ml", Name: "wait-b"}},
			FitsPlaced: []string{"ml/wait-a"}, FitsGPUHours: 11.5, AllocatedBeforeGPUHours: 40, AllocatedAfterGPUHours: 84}, {Node: "gpu-3", Error: "no time has passed since the change"}}}
	h := Handler(Options{Provider: &provider{v: v}, Changes: func() *app.ChangeStatus { return st }})
	page := body(t, get(t, h, http.MethodGet, "/"))
	for _, want := range []string{`id="changes-hash">0123456789abcdef<`, "approved by bob", "nvidia.com/mig.config=h100-mig-1", "ml/held", "rolled-back", "mig-manager failed the change",
		`<td>gpu-2</td><td data-v="12">12.0</td><td data-v="2">2</td><td>ml/wait-a</td><td data-v="11.5">11.50</td><td data-v="40">40.00</td><td data-v="84">84.00</td>`,
		"not measured: no time has passed since the change", "GPU pods pending 0 → 0"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	resp := get(t, h, http.MethodGet, "/api/v1/changes")
	var got app.ChangeStatus
	if err := json.Unmarshal([]byte(body(t, resp)), &got); err != nil || got.Set.Hash != "0123456789abcdef" || got.Results[0].Outcome != app.OutcomeRolledBack || got.Measured[0].FitsGPUHours != 11.5 {
		t.Errorf("/api/v1/changes: %+v, %v", got, err)
	}
}

// TestPodsShowGPUSplit: each pod's row says how its shared GPUs were
// split among their pods (usage.PodUsage.Attribution).
func TestPodsShowGPUSplit(t *testing.T) {
	r := &usage.Report{Currency: "EUR", Pods: []usage.PodUsage{
		{Namespace: "ml", Pod: "a", Attribution: usage.AttributionPerProcess, Pattern: usage.Pattern{Name: usage.Busy}},
		{Namespace: "ml", Pod: "b", Attribution: usage.AttributionEvenSplit, Pattern: usage.Pattern{Name: usage.Bursty}},
	}}
	page := body(t, get(t, Handler(Options{Provider: &provider{v: &app.View{Report: r}}}), http.MethodGet, "/"))
	for _, want := range []string{`>GPU split</th>`, `<td class="pattern">busy</td><td>per-process</td>`, `<td class="pattern">bursty</td><td>even-split</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestRunningAndStartupFixes: the page shows each running pod's verdict,
// evidence and change, the start-up fixes and the line against the field,
// as report words them.
func TestRunningAndStartupFixes(t *testing.T) {
	b := usage.Bottleneck{Verdict: usage.CPUBoundVerdict, Pattern: usage.Bursty, MeanActivity: usage.Known(0.1), IdleRatio: usage.Known(0.8),
		Evidence: usage.Evidence{CPULimitCores: usage.Known(4), CPUThrottledRatio: usage.Known(0.41)},
		Change:   usage.Change{Kind: usage.RaiseCPULimit, FromCores: usage.Known(4), ToCores: usage.Known(7)}}
	r := &usage.Report{Pods: []usage.PodUsage{{Namespace: "serve", Pod: "chat", Node: "n1", Pattern: usage.Pattern{Name: usage.Bursty}, Bottleneck: &b}},
		Bottlenecks: []usage.VerdictCount{{Verdict: usage.CPUBoundVerdict, Pods: 1}},
		Field:       &usage.FieldComparison{ActiveOfAllocated: usage.Known(0.1), Published: usage.FieldAverage},
		Startup: usage.StartupSummary{StoragePaths: []usage.StartupGroup{{Key: usage.StorageDownload, Phases: make([]usage.PhaseStats, len(usage.Phases))}},
			Fixes: []usage.StartupFix{{Workload: "ml/ft", Storage: usage.StorageDownload, Kind: usage.CacheDownload, Starts: 2, SecondsPerStart: usage.Known(427), GPUHoursPerMonth: usage.Known(1.5)}}}}
	page := body(t, get(t, Handler(Options{Provider: &provider{v: &app.View{Report: r}}}), http.MethodGet, "/"))
	for _, want := range []string{
		`id="running-table"`, ">serve/chat<", `class="verdict">cpu-bound<`, "(1 cpu-bound)",
		"raise the CPU limit from 4 to 7 cores: throttled 41% of CFS periods",
		"ml/ft: cache the weights on the node", "up to 1.50 GPU-hours a month freed",
		"this cluster: 10.0% of allocated GPU time active; the field: about 5% GPU utilisation",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
