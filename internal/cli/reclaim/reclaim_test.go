package reclaim

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/internal/testkit/golden"
)

// TestGolden prints the demo's dry run as a table and JSON, and cut to
// one candidate.
func TestGolden(t *testing.T) {
	cases := map[string]func(o *options){
		"demo.table": func(*options) {},
		"demo.json":  func(o *options) { o.format = "json" },
		"demo-one.table": func(o *options) {
			o.only = []string{"fb49700954b4"}
		},
	}
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			o := &options{format: "table"}
			set(o)
			var out bytes.Buffer
			if err := run(context.Background(), o, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", name+".golden"), out.Bytes())
		})
	}
}

func TestRefusals(t *testing.T) {
	cases := map[string]struct {
		set  func(o *options)
		want string
	}{
		"approve the demo":        {func(o *options) { o.approve = "0123456789abcdef" }, "work on a live cluster"},
		"notify the demo":         {func(o *options) { o.notify = true }, "work on a live cluster"},
		"ledger of the demo":      {func(o *options) { o.showLedger = true }, "work on a live cluster"},
		"a snapshot":              {func(o *options) { o.cluster.Snapshot = "../plan/testdata/pools.cluster.yaml" }, "has no owners"},
		"an unknown candidate":    {func(o *options) { o.only = []string{"000000000000"} }, "candidate 000000000000 is not in the set"},
		"bad format":              {func(o *options) { o.format = "yaml" }, "yaml"},
		"bad app metric":          {func(o *options) { o.apps = []string{"tokens"} }, "NAME=PROMQL"},
		"missing policy":          {func(o *options) { o.policy = "does-not-exist.yaml" }, "--policy"},
		"live without prometheus": {func(o *options) { o.cluster.Kubeconfig = "/nonexistent/kubeconfig" }, "--prometheus: reclaim measures idleness"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &options{format: "table"}
			tc.set(o)
			err := run(context.Background(), o, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
