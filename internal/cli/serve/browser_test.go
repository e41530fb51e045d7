package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

var update = flag.Bool("update", false, "rewrite docs/img/serve-*.png with the browser test's screenshots")

// browser starts Debian's headless Chromium and collects every console
// error, exception and error log entry of the page.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	bin := testcluster.NeedBinary(t, "chromium-headless-shell", "chromium-headless-shell")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1300, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			problems = append(problems, fmt.Sprintf("exception: %s at %s:%d", d.Text, d.URL, d.LineNumber))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s (%s)", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}
	// The browser lives as long as the context of its first run: start it
	// without a timeout, and bound the test's actions by a child context.
	if err := chromedp.Do(bctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting %s: %v", bin, err)
	}
	if err := chromedp.Listen(bctx, listen); err != nil {
		t.Fatal(err)
	}
	ctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(problems) }
}

// startServe runs `gpupack serve --demo` on a free loopback port, waits
// until its view is whole (the simulator's curve included) and returns
// its base URL, read from the line it prints.
func startServe(t *testing.T) string {
	t.Helper()
	base := startServeArgs(t, "--demo", "--listen", "127.0.0.1:0")
	waitView(t, base, func(v *app.View) bool { return len(v.Computing) == 0 })
	return base
}

// waitView asks base's /api/v1/view until the view it serves satisfies
// done, for at most two minutes, and returns it.
func waitView(t *testing.T, base string, done func(*app.View) bool) *app.View {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body := get(t, base+"/api/v1/view")
		if code == http.StatusOK {
			var v app.View
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatalf("/api/v1/view: %v", err)
			}
			if done(&v) {
				return &v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/v1/view did not reach the state waited for within 2 minutes; last answer %d: %.300s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startServeArgs runs `gpupack serve` with args and returns its base URL.
func startServeArgs(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cmd := NewCommand(ctx)
	cmd.SetArgs(args)
	cmd.SetErr(pw)
	done := make(chan error, 1)
	go func() { done <- cmd.Execute(); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "serving gpupack on "); ok {
				url <- strings.TrimSuffix(rest, "/")
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case u := <-url:
		return u
	case err := <-done:
		t.Fatalf("serve ended before serving: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("serve did not print its address within 2 minutes")
	}
	return ""
}

type chartInfo struct {
	ID     string         `json:"id"`
	Series map[string]int `json:"series"`
}

const chartsJS = `Array.from(document.querySelectorAll('svg.chart'), c => ({id: c.id,
  series: Object.fromEntries(Array.from(c.querySelectorAll('g.series'), g => [g.dataset.series, g.querySelectorAll('.point').length]))}))`

func columnJS(table string, col int) string {
	return fmt.Sprintf(`Array.from(document.querySelectorAll('#%s tbody tr'), r => r.hidden ? null : (r.cells[%d].dataset.v ?? r.cells[%d].textContent)).filter(v => v !== null)`, table, col, col)
}

// TestBrowser opens `gpupack serve --demo` in headless Chromium: the page
// loads without console errors, every chart has its series and points,
// sorting and filtering the pods table work, and the pending list is
// diagnose's. It saves the screenshots the README shows (with -update).
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx, problems := browser(t)
	base := startServe(t)
	v := demoView(t)

	do(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("#pods-table"))
	charts := runB(t, ctx, chromedp.Evaluate[[]chartInfo](chartsJS))
	dashboard := runB(t, ctx, chromedp.FullScreenshot(100))
	want := map[string][]string{
		"chart-hours":     {"capacity", "allocated", "active"},
		"chart-idle-cost": {"idle cost"},
		"chart-startup":   usage.Phases,
		"chart-curve":     {v.Curve[0].Policy, v.Curve[1].Policy, "hindsight packing", "place-if-fits cap"},
	}
	for _, c := range charts {
		names, ok := want[c.ID]
		if !ok {
			t.Errorf("unexpected chart %s", c.ID)
			continue
		}
		delete(want, c.ID)
		for _, n := range names {
			if c.Series[n] == 0 {
				t.Errorf("chart %s: series %q has no points (series: %v)", c.ID, n, c.Series)
			}
		}
		if c.ID == "chart-hours" && c.Series["allocated"] != len(v.Hours) {
			t.Errorf("chart-hours: %d allocated points, want one per hour, %d", c.Series["allocated"], len(v.Hours))
		}
		// The chart is zoomed to where the policies end (TestCurveBand):
		// it leaves out the points below the band, never all of them.
		if n := c.Series[v.Curve[0].Policy]; c.ID == "chart-curve" && (n == 0 || n > len(v.Curve[0].Points)) {
			t.Errorf("chart-curve: %d points for %s, want some of its %d", n, v.Curve[0].Policy, len(v.Curve[0].Points))
		}
	}
	for id := range want {
		t.Errorf("chart %s is missing", id)
	}
	// The model-load table: one row per storage path, keyed as the report
	// keys them, the slowest load first.
	var paths []string
	for _, g := range v.Report.Startup.StoragePaths {
		paths = append(paths, g.Key)
	}
	if got := runB(t, ctx, chromedp.Evaluate[[]string](columnJS("storage-table", 0))); len(paths) == 0 || !slices.Equal(got, paths) {
		t.Errorf("storage table rows %v, want the report's storage paths %v", got, paths)
	}
	// The running pods' table: one row per judged pod, in the report's
	// order, with its verdict.
	var judged, verdicts []string
	for _, p := range v.Report.Running().Pods {
		judged, verdicts = append(judged, p.Pod), append(verdicts, string(p.Bottleneck.Verdict))
	}
	if got := runB(t, ctx, chromedp.Evaluate[[]string](columnJS("running-table", 0))); len(judged) == 0 || !slices.Equal(got, judged) {
		t.Errorf("running table rows %v, want the report's judged pods %v", got, judged)
	}
	if got := runB(t, ctx, chromedp.Evaluate[[]string](columnJS("running-table", 4))); !slices.Equal(got, verdicts) {
		t.Errorf("running table verdicts %v, want %v", got, verdicts)
	}

	// Sort by GPU-hours allocated (column 3): ascending, then descending.
	do(t, ctx, chromedp.Click(`#pods-table thead th:nth-child(4)`))
	up := runB(t, ctx, chromedp.Evaluate[[]string](columnJS("pods-table", 3)))
	do(t, ctx, chromedp.Click(`#pods-table thead th:nth-child(4)`))
	down := runB(t, ctx, chromedp.Evaluate[[]string](columnJS("pods-table", 3)))
	nums := func(xs []string) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			f, err := strconv.ParseFloat(x, 64)
			if err != nil {
				t.Fatalf("sort value %q: %v", x, err)
			}
			out[i] = f
		}
		return out
	}
	if a := nums(up); len(a) != len(v.Report.Pods) || !slices.IsSorted(a) {
		t.Errorf("after one click the allocated column is %v, want %d values ascending", a, len(v.Report.Pods))
	}
	if d := nums(down); !slices.IsSortedFunc(d, func(x, y float64) int { return -cmpFloat(x, y) }) || d[0] == d[len(d)-1] {
		t.Errorf("after two clicks the allocated column is %v, want it descending", d)
	}

	// Filter by a namespace.
	ns := v.Report.Pods[len(v.Report.Pods)-1].Namespace
	wantPods := 0
	for _, p := range v.Report.Pods {
		if strings.Contains(p.Namespace+" "+p.Pod+" "+p.Node, ns) {
			wantPods++
		}
	}
	do(t, ctx, chromedp.SendKeys("#pods-filter", ns))
	shown := runB(t, ctx, chromedp.Evaluate[[]string](columnJS("pods-table", 0)))
	count := runB(t, ctx, chromedp.Text("#pods-count"))
	if len(shown) != wantPods || count != fmt.Sprintf("%d of %d", wantPods, len(v.Report.Pods)) {
		t.Errorf("filter %q shows %d rows (%v), count %q; want %d of %d", ns, len(shown), shown, count, wantPods, len(v.Report.Pods))
	}

	// The pending list is diagnose's, pod by pod, with its cause.
	rows := runB(t, ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('#pending-table tbody tr'), r => [r.dataset.pod, r.querySelector('.cause').textContent, r.cells[5].dataset.v])`))
	created, err := demo.Created()
	if err != nil {
		t.Fatal(err)
	}
	diag, err := app.DemoDiagnosis(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var wantRows [][]string
	for _, f := range diag.Findings {
		cause := "skipped"
		if f.Cause != "" {
			cause = string(f.Cause)
			for _, c := range f.Also {
				cause += ", " + string(c)
			}
		}
		// The wait at the demo week's end, in seconds, as the page writes it.
		wait := ""
		if c, ok := created[f.Pod]; ok {
			wait = strconv.FormatFloat(demo.End().Sub(c).Seconds(), 'g', -1, 64)
		}
		wantRows = append(wantRows, []string{f.Pod, cause, wait})
	}
	if !slices.EqualFunc(rows, wantRows, slices.Equal) {
		t.Errorf("pending list %v, want diagnose's %v with the waits at the week's end", rows, wantRows)
	}
	// Under each fix, what to apply, verbatim: configs, commands, patches.
	pres := runB(t, ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('#pending-table tbody tr'), r => Array.from(r.querySelectorAll('pre'), p => p.textContent))`))
	var wantPres [][]string
	for _, f := range diag.Findings {
		texts := []string{}
		for i := range f.Fix {
			for _, r := range f.Remedies {
				if r.Fix != i || r.Kind == diagnose.Advice {
					continue
				}
				if r.Config != "" {
					texts = append(texts, r.Config)
				}
				if len(r.Commands) > 0 {
					texts = append(texts, strings.Join(r.Commands, "\n"))
				} else if r.Patch != nil {
					texts = append(texts, string(r.Patch.Body))
				}
			}
		}
		wantPres = append(wantPres, texts)
	}
	if diff := cmp.Diff(wantPres, pres); diff != "" {
		t.Errorf("the pending table's remedies (-want +got):\n%s", diff)
	}

	// The pods that failed after scheduling: diagnose's failures, each
	// with its cause and what its status says.
	failed := runB(t, ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('#failed-table tbody tr'), r => [r.dataset.pod, r.querySelector('.cause').textContent])`))
	var wantFailed [][]string
	for _, f := range diag.Failures {
		wantFailed = append(wantFailed, []string{f.Pod, string(f.Cause) + ": " + string(f.Evidence.Failure.Kind)})
	}
	if len(wantFailed) == 0 || !slices.EqualFunc(failed, wantFailed, slices.Equal) {
		t.Errorf("failed table %v, want diagnose's failures %v", failed, wantFailed)
	}

	// The health table: the demo's GPUs with XIDs, each with its kind.
	health := runB(t, ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('#health-table tbody tr'), r => [r.cells[0].textContent, r.cells[2].textContent, r.querySelector('.kind').textContent])`))
	var wantHealth [][]string
	for _, g := range v.Health {
		kind := "application"
		if g.Critical != 0 {
			kind = fmt.Sprintf("critical (XID %d)", g.Critical)
		}
		wantHealth = append(wantHealth, []string{g.Node, g.UUID, kind})
	}
	if len(wantHealth) == 0 || !slices.EqualFunc(health, wantHealth, slices.Equal) {
		t.Errorf("health table %v, want the demo's GPUs with XIDs %v", health, wantHealth)
	}

	// The reclaim section: the demo's dry run, candidate by candidate,
	// the owners left alone folded, and an empty ledger.
	rd, err := app.DetectReclaim(context.Background(), app.ReclaimRequest{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var wantIDs []string
	for _, c := range rd.Set.Candidates {
		wantIDs = append(wantIDs, c.ID)
	}
	ids := runB(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#reclaim-table tbody tr'), r => r.dataset.id)`))
	if len(wantIDs) == 0 || !slices.Equal(ids, wantIDs) {
		t.Errorf("reclaim table rows %v, want the demo's candidates %v", ids, wantIDs)
	}
	folded := runB(t, ctx, chromedp.Evaluate[bool](`!document.querySelector('#reclaim-skipped').open && document.querySelectorAll('#reclaim-skipped-table tbody tr').length === `+strconv.Itoa(len(rd.Set.Skipped))))
	if len(rd.Set.Skipped) == 0 || !folded {
		t.Errorf("the %d owners left alone are not folded under #reclaim-skipped", len(rd.Set.Skipped))
	}
	if got := runB(t, ctx, chromedp.Text("#reclaim-ledger-empty")); got != "No action recorded yet." {
		t.Errorf("the demo's ledger reads %q, want it empty", got)
	}

	pending := runB(t, ctx, chromedp.Screenshot("#pending"))
	plan := runB(t, ctx, chromedp.Screenshot("#plan"))
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
	for name, png := range map[string][]byte{"serve-dashboard.png": dashboard, "serve-pending.png": pending, "serve-plan.png": plan} {
		if !strings.HasPrefix(string(png), "\x89PNG") {
			t.Errorf("%s is not a PNG (%d bytes)", name, len(png))
			continue
		}
		if *update {
			if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", "img", name), png, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
}

// do runs browser steps, failing the test on an error.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// runB runs one browser action and returns its value.
func runB[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// TestBrowserHostileNames serves the demo with hostile names in a pod,
// its namespace, its node and a pending pod's message, over a real
// socket, and checks in the browser that none of them ran (no global set,
// no element made) and that each reads back verbatim as text.
func TestBrowserHostileNames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx, problems := browser(t)
	v := *demoView(t)
	names := []string{`<script>window.pwned=1</script>`, `"><img src=x onerror="window.pwned=2">`, `</script><svg onload="window.pwned=3">`}
	r := *v.Report
	r.Pods = slices.Clone(r.Pods)
	r.Pods[0] = usage.PodUsage{Namespace: names[0], Pod: names[1], Node: names[2], Totals: r.Pods[0].Totals, Pattern: r.Pods[0].Pattern}
	v.Report = &r
	v.Pending = slices.Clone(v.Pending)
	v.Pending[0].Summary = names[1] + names[0]
	v.Err, v.Source = names[2], names[0]
	v.Health = slices.Clone(v.Health)
	v.Health[0].Node, v.Health[0].UUID, v.Health[0].Fix = names[0], names[1], names[2]
	srv := httptest.NewServer(serve.Handler(serve.Options{Provider: fixed{&v}}))
	t.Cleanup(srv.Close)

	do(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#pods-table"))
	pwned := runB(t, ctx, chromedp.Evaluate[bool](`window.pwned !== undefined`))
	made := runB(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('img, main svg:not(.chart), script:not([src="/static/app.js"])').length`))
	cells := runB(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelector('#pods-table tbody').rows).flatMap(r => [r.cells[0].textContent, r.cells[1].textContent, r.cells[2].textContent]).filter(s => s.includes('pwned'))`))
	errText := runB(t, ctx, chromedp.Text("#error-text"))
	pendingWhy := runB(t, ctx, chromedp.Evaluate[string](`document.querySelector('#pending-table tbody tr td:nth-child(4)').firstChild.textContent`))
	healthRow := runB(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelector('#health-table tbody tr').cells, c => c.textContent)`))
	if pwned {
		t.Error("a hostile name ran: window.pwned is set")
	}
	if made != 0 {
		t.Errorf("%d elements (img, svg, script) came from hostile names", made)
	}
	if !slices.Equal(cells, names) {
		t.Errorf("pod row reads %q, want the names verbatim %q", cells, names)
	}
	if len(healthRow) != 6 || healthRow[0] != names[0] || healthRow[2] != names[1] || healthRow[5] != names[2] {
		t.Errorf("health row reads %q, want node, UUID and fix verbatim %q", healthRow, names)
	}
	if errText != names[2] || pendingWhy != names[1]+names[0] {
		t.Errorf("error banner %q, pending message %q: want %q and %q verbatim", errText, pendingWhy, names[2], names[1]+names[0])
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// firstPage is what TestBrowserDemoFirstPage reads off the page in one go.
type firstPage struct {
	Computing  string     `json:"computing"`
	CurveChart bool       `json:"curveChart"`
	Ticks      []string   `json:"ticks"`
	TickX      []float64  `json:"tickX"`
	Pools      [][]string `json:"pools"`
	Lines      []string   `json:"lines"`
	Cards      []string   `json:"cards"`
	Warnings   []string   `json:"warnings"`
}

const firstPageJS = `({
  computing: document.querySelector('#curve-computing')?.textContent ?? '',
  curveChart: document.querySelector('#chart-curve') !== null,
  ticks: Array.from(document.querySelectorAll('#chart-hours text.xtick'), t => t.textContent),
  tickX: Array.from(document.querySelectorAll('#chart-hours text.xtick'), t => +t.getAttribute('x')),
  pools: Array.from(document.querySelectorAll('#pools-table tbody tr'), r => Array.from(r.cells, c => c.textContent)),
  lines: Array.from(document.querySelectorAll('#plan-lines li'), l => l.textContent),
  cards: ['allocated', 'unallocated', 'unsampled', 'capacity'].map(id => document.querySelector('#card-' + id)?.textContent ?? ''),
  warnings: Array.from(document.querySelectorAll('.warning'), w => w.textContent),
})`

// TestBrowserDemoFirstPage holds the demo's simulation back and opens the
// page meanwhile: /healthz and the page answer before it is done, and the
// page says the simulator's run is being computed; the week chart's ticks
// fall on midnights and name the day, in order; the plan section has the
// pool table and the reserve, spot, scale and nodepool lines of gpupack
// plan; the unsampled tile is there and the tiles add up to the capacity;
// no warning alarms about DRA; /metrics serves the demo's counters. Once
// the simulation is let go the page shows the simulator's chart, zoomed to
// the band where the policies end.
func TestBrowserDemoFirstPage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	release := make(chan struct{})
	simulated := make(chan struct{})
	was := simulateDemo
	simulateDemo = func(ctx context.Context, v *app.View) (*app.View, error) {
		defer close(simulated)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return app.WithDemoCurve(ctx, v)
	}
	t.Cleanup(func() { simulateDemo = was })
	ctx, problems := browser(t)
	base := startServeArgs(t, "--demo", "--listen", "127.0.0.1:0")
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz while the demo view is built: %d %q, want 200 ok", code, body)
	}
	if code, _ := get(t, base+"/"); code != http.StatusOK {
		t.Errorf("/ while the demo view is built: %d, want 200", code)
	}
	first := waitView(t, base, func(v *app.View) bool { return true })
	select {
	case <-simulated:
		t.Fatal("the simulation finished before it was let go")
	default:
	}
	if !first.IsComputing(app.ComputingCurve) || first.Curve != nil {
		t.Errorf("the first view's computing %q with %d curve runs, want the curve being computed and none", first.Computing, len(first.Curve))
	}
	do(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("#plan"))
	got := runB(t, ctx, chromedp.Evaluate[firstPage](firstPageJS))
	if !strings.Contains(got.Computing, "being computed") || got.CurveChart {
		t.Errorf("the simulator section reads %q (chart shown: %v), want it to say the run is being computed", got.Computing, got.CurveChart)
	}

	v := demoView(t)
	var wantTicks []string
	for _, h := range v.Hours {
		if h.Start.UTC().Hour() == 0 {
			wantTicks = append(wantTicks, h.Start.UTC().Format("Mon Jan 2"))
		}
	}
	if len(wantTicks) < 7 || !slices.Equal(got.Ticks, wantTicks) || !slices.IsSorted(got.TickX) {
		t.Errorf("week chart ticks %q at x %v, want the midnights %q left to right", got.Ticks, got.TickX, wantTicks)
	}
	var wantPools [][]string
	for _, pp := range v.Plan.Pools {
		wantPools = append(wantPools, planout.PoolCells(pp))
	}
	if diff := cmp.Diff(wantPools, got.Pools); len(wantPools) == 0 || diff != "" {
		t.Errorf("pool table (-want +got):\n%s", diff)
	}
	wantLines := planout.MoneyLines(v.Plan)
	for _, prefix := range []string{"reserve: ", "spot: ", "scale: ", "nodepool: "} {
		if !slices.ContainsFunc(got.Lines, func(l string) bool { return strings.HasPrefix(l, prefix) }) {
			t.Errorf("no %q line in the plan section: %q", prefix, got.Lines)
		}
	}
	if diff := cmp.Diff(wantLines, got.Lines); diff != "" {
		t.Errorf("the plan's reserve, spot, scale and nodepool lines (-want +got):\n%s", diff)
	}
	c := v.Report.Cluster
	wantCards := []string{}
	for _, s := range []usage.Seconds{c.AllocatedGPUSeconds, c.UnallocatedGPUSeconds, c.UnsampledGPUSeconds, c.CapacityGPUSeconds} {
		wantCards = append(wantCards, strconv.FormatFloat(s.Hours(), 'f', 1, 64))
	}
	if !slices.Equal(got.Cards, wantCards) {
		t.Errorf("tiles allocated, unallocated, unsampled, capacity read %q, want %q", got.Cards, wantCards)
	}
	for _, w := range got.Warnings {
		if strings.Contains(w, "DRA") {
			t.Errorf("the demo warns about DRA, which it does not use for the GPU: %q", w)
		}
	}
	code, metrics := get(t, base+"/metrics")
	if code != http.StatusOK || !strings.Contains(metrics, "gpupack_gpu_allocated_seconds_total{") || !strings.Contains(metrics, "gpupack_gpu_unsampled_seconds_total{") {
		t.Errorf("/metrics in demo mode: %d %.400s, want the GPU-second counters", code, metrics)
	}

	close(release)
	whole := waitView(t, base, func(v *app.View) bool { return len(v.Computing) == 0 })
	if len(whole.Curve) == 0 {
		t.Fatal("the whole view has no curve")
	}
	do(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("#chart-curve"))
	yTicks := runB(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#chart-curve text.ytick'), t => t.textContent)`))
	span := func() float64 {
		if len(yTicks) < 2 {
			return 100
		}
		lo, _ := strconv.ParseFloat(strings.TrimSuffix(yTicks[0], "%"), 64)
		hi, _ := strconv.ParseFloat(strings.TrimSuffix(yTicks[len(yTicks)-1], "%"), 64)
		return hi - lo
	}()
	if len(yTicks) < 2 || yTicks[0] == "0%" || span > 50 {
		t.Errorf("simulator chart's y ticks %q: want them zoomed to the band where the policies end, not 0%%..100%%", yTicks)
	}
	if d := os.Getenv("ZZSHOT"); d != "" {
		for _, id := range []string{"chart-curve", "chart-hours", "plan", "usage"} {
			png := runB(t, ctx, chromedp.Screenshot("#"+id))
			_ = os.WriteFile(d+"/"+id+".png", png, 0o644)
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}
