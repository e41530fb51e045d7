package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/internal/app"
	clidiagnose "github.com/gpupack/gpupack/internal/cli/diagnose"
	cliplan "github.com/gpupack/gpupack/internal/cli/plan"
	"github.com/gpupack/gpupack/internal/cli/report"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/usage"
)

var demoOnce struct {
	once sync.Once
	v    *app.View
	err  error
}

// demoView builds the demo view once for the package's tests (the
// simulator run takes a few seconds).
func demoView(t *testing.T) *app.View {
	t.Helper()
	demoOnce.once.Do(func() { demoOnce.v, demoOnce.err = app.DemoView(context.Background()) })
	if demoOnce.err != nil {
		t.Fatal(demoOnce.err)
	}
	return demoOnce.v
}

// cliJSON runs a verb with args and returns what it prints.
func cliJSON(t *testing.T, cmd *cobra.Command, args ...string) []byte {
	t.Helper()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func fetch(t *testing.T, h http.Handler, path string) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != 200 {
		t.Fatalf("GET %s: status %d: %s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes()
}

// TestDemoAPIIsTheCLIs checks that the API serves, byte for byte, what the
// verbs print as JSON for the same demos, and the pending pods as
// diagnose's findings.
func TestDemoAPIIsTheCLIs(t *testing.T) {
	ctx := context.Background()
	h := serve.Handler(serve.Options{Provider: fixed{demoView(t)}})
	if d := cmp.Diff(string(cliJSON(t, report.NewCommand(ctx), "--demo", "--format", "json")), string(fetch(t, h, "/api/v1/report"))); d != "" {
		t.Errorf("/api/v1/report differs from gpupack report --demo --format json (-cli +api):\n%s", d)
	}
	if d := cmp.Diff(string(cliJSON(t, cliplan.NewCommand(ctx), "--format", "json")), string(fetch(t, h, "/api/v1/plan"))); d != "" {
		t.Errorf("/api/v1/plan differs from gpupack plan --format json (-cli +api):\n%s", d)
	}
	var diag diagnose.Report
	if err := json.Unmarshal(cliJSON(t, clidiagnose.NewCommand(ctx), "--format", "json"), &diag); err != nil {
		t.Fatal(err)
	}
	var pending []app.PendingPod
	if err := json.Unmarshal(fetch(t, h, "/api/v1/pending"), &pending); err != nil {
		t.Fatal(err)
	}
	var findings []diagnose.Finding
	for _, p := range pending {
		findings = append(findings, p.Finding)
	}
	if len(findings) == 0 {
		t.Fatal("the demo has no pending pods")
	}
	// A patch body is raw JSON, which each encoder indents at its own
	// depth: the same patch, in other whitespace.
	compact := cmp.Transformer("compact", func(m json.RawMessage) string {
		var b bytes.Buffer
		if err := json.Compact(&b, m); err != nil {
			return "invalid JSON: " + string(m)
		}
		return b.String()
	})
	if d := cmp.Diff(diag.Findings, findings, compact); d != "" {
		t.Errorf("/api/v1/pending differs from gpupack diagnose --format json's findings (-cli +api):\n%s", d)
	}
}

// TestDemoHoursAddUp checks that the hours of the demo add up to its
// report's day.
func TestDemoHoursAddUp(t *testing.T) {
	v := demoView(t)
	if got, want := len(v.Hours), int(v.End.Sub(v.Start).Hours()); got != want {
		t.Fatalf("%d hours, want %d over %s..%s", got, want, v.Start, v.End)
	}
	var capacity, alloc, active float64
	for _, h := range v.Hours {
		if !h.AllocatedGPUSeconds.Known() || !h.ActiveGPUSeconds.Known() {
			t.Fatalf("hour %s: unknown figures in a demo with every sample", h.Start)
		}
		capacity += h.CapacityGPUSeconds.Value()
		alloc += h.AllocatedGPUSeconds.Value()
		active += h.ActiveGPUSeconds.Value()
	}
	c := v.Report.Cluster
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"capacity", capacity, float64(c.CapacityGPUSeconds)},
		{"allocated", alloc, float64(c.AllocatedGPUSeconds)},
		{"active", active, c.ActiveGPUSeconds.Value()},
	} {
		if math.Abs(x.got-x.want) > 1e-6*math.Max(1, x.want) {
			t.Errorf("%s GPU-seconds: the hours add up to %v, the day's report says %v", x.name, x.got, x.want)
		}
	}
	p, snap, err := app.DemoPlan(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	files, err := planout.Files(p, snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.PlanFiles) != len(files) || len(v.Curve) != 2 || len(v.Curve[0].Points) < 100 {
		t.Errorf("%d plan files, %d simulator runs (%d points in the first): want the %d files plan --out writes, 2 runs of at least 100 points", len(v.PlanFiles), len(v.Curve), len(v.Curve[0].Points), len(files))
	}
}

// TestDemoHealth: the demo's GPU health is report --demo's, each GPU with
// its kind and fix: the demo's critical XID is on a GPU that the device
// plugin offers, so the fix is to cordon its node, and the plan writes no
// DeviceTaintRule for it.
func TestDemoHealth(t *testing.T) {
	h := serve.Handler(serve.Options{Provider: fixed{demoView(t)}})
	var r struct {
		Health []usage.DeviceHealth `json:"health"`
	}
	if err := json.Unmarshal(cliJSON(t, report.NewCommand(context.Background()), "--demo", "--format", "json"), &r); err != nil {
		t.Fatal(err)
	}
	var got []planout.GPUHealth
	if err := json.Unmarshal(fetch(t, h, "/api/v1/health"), &got); err != nil {
		t.Fatal(err)
	}
	var devices []usage.DeviceHealth
	critical := 0
	for _, g := range got {
		devices = append(devices, g.DeviceHealth)
		if g.Critical != 0 {
			critical++
			if want := "kubectl cordon " + g.Node + ","; !strings.HasPrefix(g.Fix, want) || len(g.TaintRules) != 0 {
				t.Errorf("GPU %s of %s: fix %q, rules %v; want %q and no DeviceTaintRule (the demo has no DRA)", g.UUID, g.Node, g.Fix, g.TaintRules, want)
			}
		}
	}
	if len(r.Health) == 0 || critical == 0 {
		t.Fatalf("the demo's report has %d GPUs with XIDs, %d critical; want some, one critical at least", len(r.Health), critical)
	}
	if d := cmp.Diff(r.Health, devices); d != "" {
		t.Errorf("/api/v1/health differs from gpupack report --demo's health (-cli +api):\n%s", d)
	}
	for _, f := range demoView(t).PlanFiles {
		if f.Name == planout.FileDRATaintRules {
			t.Errorf("the demo plan writes %s, but no demo GPU is offered through DRA", f.Name)
		}
	}
}
