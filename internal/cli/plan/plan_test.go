package plan

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/internal/testkit/golden"
	"github.com/gpupack/gpupack/plan"
)

func check(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name+".golden"), got)
}

func defaults() options {
	def := plan.DefaultOptions()
	return options{format: "table", reclaim: def.ReclaimIdleRatio, headroom: def.Headroom, reserveOff: def.ReserveDiscount, spotOff: def.SpotDiscount}
}

func TestGolden(t *testing.T) {
	cases := map[string]func(o *options){
		"demo.table":     func(*options) {},
		"demo.json":      func(o *options) { o.format = "json" },
		"no-usage.table": func(o *options) { o.cluster.Snapshot = "../../source/demo/cluster.yaml" },
		// The demo of three pools, kept for the cases the demo world lacks: a
		// node that mixes MIG and time-slicing, multi-GPU pods.
		"pools.table": func(o *options) {
			o.cluster.Snapshot, o.usage = "testdata/pools.cluster.yaml", "testdata/pools.usage.yaml"
		},
		// GPUs offered through DRA beside a device plugin node.
		"dra.table": func(o *options) {
			o.cluster.Snapshot, o.usage = "testdata/dra.cluster.yaml", "testdata/dra.usage.yaml"
		},
	}
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			o := defaults()
			set(&o)
			var out bytes.Buffer
			if err := run(context.Background(), &o, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			check(t, name, out.Bytes())
		})
	}
}

// TestOutFiles checks every generated file against its golden copy, and
// that the node labels name configs that exist. It plans the pools
// fixture, whose workload requests the admission webhook's, the chart's and
// the scheduler's end-to-end tests read (MPS and time slices in one pool,
// the config names they label their nodes with).
func TestOutFiles(t *testing.T) {
	dir := t.TempDir()
	o := defaults()
	o.out = dir
	o.window = "7d"
	o.cluster.Snapshot, o.usage, o.autoscaling = "testdata/pools.cluster.yaml", "testdata/pools.usage.yaml", "../../source/demo/autoscaling.yaml"
	if err := run(context.Background(), &o, &bytes.Buffer{}, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{planout.FileDevicePlugin, planout.FileMIGParted, planout.FileNodeLabels, planout.FileRequests, planout.FileKEDA, planout.FileKarpenter, planout.FileSummary} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		check(t, "out-"+name, b)
	}
	if _, err := os.Stat(filepath.Join(dir, planout.FileDRA)); !os.IsNotExist(err) {
		t.Errorf("%s written for a cluster without DRA GPUs (stat: %v)", planout.FileDRA, err)
	}
	labels, _ := os.ReadFile(filepath.Join(dir, planout.FileNodeLabels))
	dp, _ := os.ReadFile(filepath.Join(dir, planout.FileDevicePlugin))
	mig, _ := os.ReadFile(filepath.Join(dir, planout.FileMIGParted))
	for _, line := range strings.Split(string(labels), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "nvidia.com/device-plugin.config: "); ok && !strings.Contains(string(dp), "  "+v+": |") {
			t.Errorf("node label names device plugin config %s, which the ConfigMap lacks", v)
		}
		if v, ok := strings.CutPrefix(line, "nvidia.com/mig.config: "); ok && !strings.Contains(string(mig), "  "+v+":") {
			t.Errorf("node label names mig-parted config %s, which the config lacks", v)
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]struct {
		set  func(o *options)
		want string
	}{
		"prometheus down":      {func(o *options) { o.prometheus = "http://127.0.0.1:1" }, "prometheus http://127.0.0.1:1: query"},
		"prometheus and usage": {func(o *options) { o.prometheus, o.usage = "http://127.0.0.1:1", "u.yaml" }, "exclude each other"},
		"window differs":       {func(o *options) { o.window = "24h" }, "--window 24h, but " + demo.UsageName + " covers 168h0m0s"},
		"bad window":           {func(o *options) { o.window = "a week" }, `--window "a week"`},
		"bad reclaim":          {func(o *options) { o.reclaim = 80 }, "reclaim threshold 80"},
		"bad usage": {func(o *options) {
			o.usage = write("u.yaml", "apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\npods: [{pod: ml/a, idleHeldRatio: 2}]")
		}, "u.yaml: pods[0]: idleHeldRatio: 2"},
		"bad snapshot": {func(o *options) {
			o.cluster.Snapshot = write("c.yaml", "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes: [{name: n}]")
		}, "c.yaml: nodes[0]: cpu"},
		"bad format": {func(o *options) { o.format = "xml" }, `--format "xml"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := defaults()
			tc.set(&o)
			err := run(context.Background(), &o, &bytes.Buffer{}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
