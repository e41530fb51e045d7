package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/sim"
)

func TestReplayJSONAndCurve(t *testing.T) {
	out := t.TempDir()
	var stdout bytes.Buffer
	o := &options{nodes: "../../../sim/testdata/nodes.csv", pods: "../../../sim/testdata/pods.csv",
		policies: []string{"gpupack", "fgd", "bestfit"}, seed: 1, replay: true, speedup: 1000, format: "json", out: out}
	if err := run(context.Background(), o, &stdout); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want one JSON object per policy, got %d lines:\n%s", len(lines), stdout.String())
	}
	for i, line := range lines {
		var r sim.ReplayResult
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Policy != o.policies[i] || r.MeanGPUAlloc <= 0 || r.Pods == 0 {
			t.Errorf("line %d %q (%v): want the replay of %s", i, line, err, o.policies[i])
		}
	}
	csv, err := os.ReadFile(filepath.Join(out, "replay.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(string(csv), "\n"); rows != 1+3*sim.ReplaySamples {
		t.Errorf("replay.csv has %d lines; want a header and %d samples per policy", rows, sim.ReplaySamples)
	}
}

// TestReplayLoad loads the small trace past capacity: the offered load is
// what was asked for, pods wait, and the table says how many copies.
func TestReplayLoad(t *testing.T) {
	base := options{nodes: "../../../sim/testdata/nodes.csv", pods: "../../../sim/testdata/pods.csv",
		policies: []string{"bestfit", "gpupack"}, seed: 1, replay: true, speedup: 1000}
	var stdout bytes.Buffer
	o := base
	o.format, o.load = "json", 1.5
	if err := run(context.Background(), &o, &stdout); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r sim.ReplayResult
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Policy != o.policies[i] || r.OfferedLoad < 1.5 || r.GPUPodsWaited == 0 || r.WaitedDemandGPUHours <= 0 || r.WaitedDemandGPUHours > r.DemandGPUHours {
			t.Errorf("line %d %q (%v): want %s's replay at offered load >= 1.5 with pods waiting", i, line, err, o.policies[i])
		}
	}
	stdout.Reset()
	o = base
	o.format, o.load = "table", 1.5
	if err := run(context.Background(), &o, &stdout); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"copies bring it to 1.5x", "offered load 1.5x capacity"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestReplayTable(t *testing.T) {
	var stdout bytes.Buffer
	o := &options{nodes: "../../../sim/testdata/nodes.csv", pods: "../../../sim/testdata/pods.csv",
		policies: []string{"bestfit"}, seed: 1, replay: true, speedup: 1, format: "table"}
	if err := run(context.Background(), o, &stdout); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mean GPU alloc", "wait p95 s", "wait p99 s", "demand GPU-h waited", "waits by GPU shape", "bestfit"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestReplayFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"inflation with replay": {[]string{"--replay", "--inflation", "2"}, "--inflation has no meaning with --replay"},
		"speedup alone":         {[]string{"--replay-speedup", "10"}, "--replay-speedup needs --replay"},
		"speedup zero":          {[]string{"--replay", "--replay-speedup", "0", "--policy", "bestfit"}, "speedup 0"},
		"load alone":            {[]string{"--replay-load", "1.3"}, "--replay-load needs --replay"},
		"load zero":             {[]string{"--replay", "--replay-load", "0"}, "--replay-load 0: want"},
		"load too far":          {[]string{"--replay", "--replay-load", "100", "--replay-speedup", "0.001"}, "--replay-load: the pod list offers"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand(context.Background())
			cmd.SetArgs(append(tc.args, "--nodes", "../../../sim/testdata/nodes.csv", "--pods", "../../../sim/testdata/pods.csv"))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// TestChurn: a steady churn of the small trace at load 0.9, as JSON: the
// offered load is the one asked for, the waits come by GPU shape, and the
// demand that waited is within the demand; and the flags that make no
// sense with it are refused.
func TestChurn(t *testing.T) {
	var stdout bytes.Buffer
	o := &options{nodes: "../../../sim/testdata/nodes.csv", pods: "../../../sim/testdata/pods.csv",
		policies: []string{"gpupack", "bestfit"}, seed: 1, churn: 0.9, churnHours: 200, churnWarmupHours: 100, format: "json"}
	if err := run(context.Background(), o, &stdout); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r sim.ReplayResult
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Policy != o.policies[i] || r.OfferedLoad != 0.9 || len(r.ByShape) == 0 ||
			r.DemandGPUHours <= 0 || r.WaitedDemandGPUHours > r.DemandGPUHours || r.WindowSeconds > 200*3600 {
			t.Errorf("line %d %q (%v): want %s's churn at load 0.9 over 200 h, with waits by shape", i, line, err, o.policies[i])
		}
	}
	for name, args := range map[string][]string{
		"with replay":   {"--churn", "0.9", "--replay"},
		"with bounds":   {"--churn", "0.9", "--bounds"},
		"hours alone":   {"--churn-hours", "10"},
		"load too high": {"--churn", "1.2", "--nodes", "../../../sim/testdata/nodes.csv", "--pods", "../../../sim/testdata/pods.csv"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand(context.Background())
			cmd.SetArgs(args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "churn") {
				t.Errorf("%v: error %v, want one about --churn", args, err)
			}
		})
	}
}
