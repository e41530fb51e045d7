package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	clireclaim "github.com/gpupack/gpupack/internal/cli/reclaim"
	"github.com/gpupack/gpupack/internal/serve"
	"github.com/gpupack/gpupack/reclaim"
)

// TestDemoReclaimsAreTheCLIs: serve --demo's /api/v1/reclaims holds, as
// its set, what gpupack reclaim --format json prints for the demo, and an
// empty ledger.
func TestDemoReclaimsAreTheCLIs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := newDemoProvider(ctx)
	deadline := time.Now().Add(2 * time.Minute)
	for d.Reclaims().Set == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the demo's reclaim dry run was not built within 2 minutes: %v", d.Ready())
		}
		time.Sleep(50 * time.Millisecond)
	}
	h := serve.Handler(serve.Options{Provider: d, Reclaims: d.Reclaims})
	var got struct {
		Set    json.RawMessage `json:"set"`
		Ledger []any           `json:"ledger"`
	}
	if err := json.Unmarshal(fetch(t, h, "/api/v1/reclaims"), &got); err != nil {
		t.Fatal(err)
	}
	var want, have any
	if err := json.Unmarshal(cliJSON(t, clireclaim.NewCommand(ctx), "--format", "json"), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got.Set, &have); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, have); d != "" {
		t.Errorf("/api/v1/reclaims' set differs from gpupack reclaim --format json (-cli +api):\n%s", d)
	}
	if len(want.(map[string]any)["candidates"].([]any)) == 0 {
		t.Error("the demo has no reclaim candidates")
	}
	if got.Ledger == nil || len(got.Ledger) != 0 {
		t.Errorf("ledger %v, want [] (the demo acts on nothing)", got.Ledger)
	}
}

// TestReclaimMetrics: every kind and outcome of gpupack_reclaims_total
// reads 0 before its first (so that increase() sees the first failure),
// each observation counts once, and the freed GPU-hours add up.
func TestReclaimMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	observe, freed, err := reclaimMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	observe(reclaim.Notebook, reclaim.OutcomeFailed)
	observe(reclaim.Deployment, reclaim.OutcomeReclaimed)
	observe(reclaim.Deployment, reclaim.OutcomeReclaimed)
	freed(1.5)
	freed(0.25)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"gpupack_reclaimed_gpu_hours_total": 1.75}
	for _, k := range reclaimKinds {
		for _, o := range reclaimOutcomes {
			want["gpupack_reclaims_total kind="+string(k)+" outcome="+o] = 0
		}
	}
	want["gpupack_reclaims_total kind=Notebook outcome=failed"] = 1
	want["gpupack_reclaims_total kind=Deployment outcome=reclaimed"] = 2
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("/metrics (-want +got):\n%s", d)
	}
}

// TestReclaimFlagsRefused: serve --reclaim-controller refuses, before it
// reads anything, flags that cannot work, and never shows the webhook
// file's content.
func TestReclaimFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(kubeconfig, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
	badPolicy, hook := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "hook")
	write(badPolicy, "apiVersion: gpupack.io/v1alpha1\nkind: ReclaimPolicy\nactivityFloor: 5\n")
	write(hook, "ftp://hooks.example.com/x?token=s3cret\n")
	cases := map[string]struct {
		args []string
		want string
	}{
		"approvals not NS/NAME": {args: []string{"--reclaim-approvals", "gpupack"}, want: `--reclaim-approvals "gpupack": want NAMESPACE/NAME`},
		"no policy file":        {args: []string{"--reclaim-policy", filepath.Join(dir, "none.yaml")}, want: "--reclaim-policy: open"},
		"a floor of 5":          {args: []string{"--reclaim-policy", badPolicy}, want: "activityFloor"},
		"ledger not NS/NAME":    {args: []string{"--ledger", "ledger"}, want: `--ledger "ledger": want NAMESPACE/NAME`},
		"both webhooks":         {args: []string{"--notify-webhook", "https://hooks.example.com/x", "--notify-webhook-file", hook}, want: "exclude each other"},
		"a webhook file of ftp": {args: []string{"--notify-webhook-file", hook}, want: "--notify-webhook-file " + hook + ": want one http or https URL"},
		"no interval":           {args: []string{"--reclaim-interval", "0s"}, want: "--reclaim-interval 0s: want a positive duration"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand(t.Context())
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"--prometheus", "http://127.0.0.1:1", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0", "--reclaim-controller"}, c.args...))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("serve %v: error %v, want one saying %q", c.args, err, c.want)
			}
			if strings.Contains(err.Error()+out.String(), "s3cret") {
				t.Errorf("the webhook file's token shows: %v\n%s", err, out.String())
			}
		})
	}
}
