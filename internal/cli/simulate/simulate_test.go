package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/sim"
)

func TestSimulateJSONAndCurve(t *testing.T) {
	out := t.TempDir()
	var stdout bytes.Buffer
	o := &options{nodes: "../../../sim/testdata/nodes.csv", pods: "../../../sim/testdata/pods.csv",
		policies: []string{"gpupack", "fgd", "bestfit"}, seed: 2, inflation: 1.3, format: "json", out: out, bounds: true}
	if err := run(context.Background(), o, &stdout); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want one JSON object per policy and one for the bounds, got %d lines:\n%s", len(lines), stdout.String())
	}
	var bounds sim.Bounds
	if err := json.Unmarshal([]byte(lines[3]), &bounds); err != nil || bounds.Kind != sim.BoundsName ||
		bounds.Hindsight == nil || bounds.Hindsight.GPUAllocRatio <= 0 || bounds.PlaceIfFitsCap == nil || bounds.PlaceIfFitsCap.Ratio <= 0 {
		t.Errorf("last line %q (%v): want the bounds, with the hindsight packing and the place-if-fits cap", lines[3], err)
	}
	for _, k := range []string{`"place_if_fits_cap":{"ratio":`, `"hindsight_packing":{"policy":"hindsight"`, `"first_share_failure":`} {
		if !strings.Contains(lines[3], k) {
			t.Errorf("the bounds' line lacks %s: %s", k, lines[3])
		}
	}
	lines = lines[:3]
	required := []string{"policy", "seed", "inflation", "nodes", "gpus", "pods_arrived", "pods_scheduled", "pods_failed",
		"gpu_milli_capacity", "gpu_milli_allocated", "gpu_alloc_ratio", "gpu_alloc_ratio_at_full", "frag_gpu_milli", "gpu_alloc_bound", "gpu_alloc_share_bound", "first_failed_share", "unallocated", "wall_seconds"}
	for i, line := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %d is not JSON: %v", i, err)
		}
		for _, k := range required {
			if _, ok := obj[k]; !ok {
				t.Errorf("line %d lacks %q", i, k)
			}
		}
		if obj["policy"] != o.policies[i] {
			t.Errorf("line %d is policy %v, want %s", i, obj["policy"], o.policies[i])
		}
	}
	csv, err := os.ReadFile(filepath.Join(out, "curve.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if rows[0] != "policy,seed,arrived_ratio,gpu_alloc_ratio" || len(rows) < 3*100 {
		t.Errorf("curve.csv: header %q, %d rows; want a header and at least 100 points per policy", rows[0], len(rows))
	}
	if last := rows[len(rows)-1]; !strings.HasPrefix(last, "hindsight,2,") {
		t.Errorf("curve.csv ends with %q, want the hindsight packing's row", last)
	}
	svg, err := os.ReadFile(filepath.Join(out, "curve.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(svg), "<polyline"); n != 2*3 || !strings.HasSuffix(strings.TrimSpace(string(svg)), "</svg>") {
		t.Errorf("curve.svg has %d curves, want 3 in each of its 2 panels, and must be complete", n)
	}
	if n := strings.Count(string(svg), `stroke-dasharray="5,3"`); n < 2 || n > 3 || !strings.Contains(string(svg), "hindsight packing") {
		t.Errorf("curve.svg has %d dashed lines, want the hindsight packing's level in the legend and in the panels it falls in", n)
	}
	if n := strings.Count(string(svg), `stroke-dasharray="1,3"`); n < 2 || n > 3 || !strings.Contains(string(svg), "place-if-fits cap") {
		t.Errorf("curve.svg has %d dotted lines, want the place-if-fits cap in the legend and in the panels it falls in", n)
	}
}

// TestSimulateTable: the table, with the bounds only when asked, and
// never a "ceiling" or "offline" level a policy could pass.
func TestSimulateTable(t *testing.T) {
	for name, c := range map[string]struct {
		bounds       bool
		want, wantNo []string
	}{
		"runs": {false, []string{"cluster: 21 nodes, 88 GPUs", "GPU alloc at 100%", "fgd", "capped", "free GPUs at the end", "CPU or memory short"},
			[]string{"place-if-fits cap", "hindsight packing"}},
		"bounds": {true, []string{"place-if-fits cap: ", "no policy that places each pod that fits allocates more", "hindsight packing: ", "a lower estimate\nof the offline optimum"},
			nil},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout bytes.Buffer
			o := &options{nodes: "../../../sim/testdata/nodes.csv", pods: "../../../sim/testdata/pods.csv",
				policies: []string{"fgd"}, seed: 1, inflation: 1.3, format: "table", bounds: c.bounds}
			if err := run(context.Background(), o, &stdout); err != nil {
				t.Fatal(err)
			}
			for _, want := range c.want {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, stdout.String())
				}
			}
			for _, no := range append(c.wantNo, "ceiling", "offline packing") {
				if strings.Contains(stdout.String(), no) {
					t.Errorf("table has %q:\n%s", no, stdout.String())
				}
			}
		})
	}
}

func TestSimulateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,2000\n"), 0o644)
	cpuOnly := filepath.Join(dir, "cpu.csv")
	os.WriteFile(cpuOnly, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0,0\n"), 0o644)
	t4Nodes := filepath.Join(dir, "t4.csv")
	os.WriteFile(t4Nodes, []byte("sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,T4\n"), 0o644)
	v100Pods := filepath.Join(dir, "v100.csv")
	os.WriteFile(v100Pods, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1000,1024,1,1000,V100M16|V100M32\n"), 0o644)
	cases := map[string]struct {
		o      options
		want   string
		cancel bool // run with the context already done, as after a SIGINT
	}{
		"policy twice": {options{policies: []string{"fgd", "bestfit", "fgd"}, format: "table"}, "fgd is given twice", false},
		"model no node has": {options{nodes: t4Nodes, pods: v100Pods, policies: []string{"fgd"}, format: "table", inflation: 1.3},
			"1 of its 1 GPU pods (the first p1) ask in gpu_spec only for models that no node of " + t4Nodes + " has (V100-16GB|V100-32GB; the nodes have T4)", false},
		"cancelled":      {options{nodes: "openb:gpu_node", pods: "openb:default", policies: []string{"fgd"}, format: "table", inflation: 1.3}, "context canceled", true},
		"unknown policy": {options{policies: []string{"best"}, format: "table"}, "unknown policy \"best\"", false},
		"bad format":     {options{policies: []string{"fgd"}, format: "xml"}, "--format", false},
		"missing file":   {options{nodes: "/no/such.csv", pods: "openb:default", policies: []string{"fgd"}, format: "table", inflation: 1.3}, "cannot open /no/such.csv", false},
		"bad row":        {options{nodes: "openb:gpu_node", pods: bad, policies: []string{"fgd"}, format: "table", inflation: 1.3}, "bad.csv:2: column gpu_milli", false},
		"cannot fill":    {options{nodes: "openb:gpu_node", pods: cpuOnly, policies: []string{"fgd"}, format: "table", inflation: 1.3}, "asks for no GPU", false},
		"bad inflation":  {options{nodes: "openb:gpu_node", pods: "openb:default", policies: []string{"fgd"}, format: "table", inflation: -2}, "inflation", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel() // as a SIGINT would
			}
			var out bytes.Buffer
			err := run(ctx, &tc.o, &out)
			if out.Len() > 0 {
				t.Errorf("wrote %q before failing", out.String())
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
