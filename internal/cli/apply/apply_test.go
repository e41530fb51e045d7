package apply

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/internal/cli/clio/applyflag"
	"github.com/gpupack/gpupack/internal/testkit/golden"
)

func defaults() options {
	return options{format: "table", outage: time.Duration(change.DefaultOptions().OutageHours * float64(time.Hour))}
}

// TestGolden prints the dry runs of the demo's plan and of the pools and
// DRA fixtures of the plan verb.
func TestGolden(t *testing.T) {
	cases := map[string]func(o *options){
		"demo.table": func(*options) {},
		"demo.json":  func(o *options) { o.format = "json" },
		"demo-one-node.table": func(o *options) {
			o.nodes = []string{"l4-1"}
		},
		"pools.table": func(o *options) {
			o.cluster.Snapshot, o.usage = "../plan/testdata/pools.cluster.yaml", "../plan/testdata/pools.usage.yaml"
		},
		"dra.table": func(o *options) {
			o.cluster.Snapshot, o.usage = "../plan/testdata/dra.cluster.yaml", "../plan/testdata/dra.usage.yaml"
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
			golden.Check(t, filepath.Join("testdata", name+".golden"), out.Bytes())
		})
	}
}

func TestRefusals(t *testing.T) {
	cases := map[string]struct {
		set  func(o *options)
		want string
	}{
		"approve the demo": {func(o *options) { o.approve = "0123456789abcdef" }, "--approve changes a live cluster"},
		"approve a snapshot": {func(o *options) {
			o.approve, o.cluster.Snapshot = "0123456789abcdef", "../plan/testdata/pools.cluster.yaml"
		}, "--approve changes a live cluster"},
		"a node the plan does not change": {func(o *options) { o.nodes = []string{"a100-1"} }, "node a100-1: the plan changes nothing on it"},
		"bad format":                      {func(o *options) { o.format = "yaml" }, "yaml"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := defaults()
			tc.set(&o)
			err := run(context.Background(), &o, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	for _, bad := range []string{"cm", "ns/", "/name", "ns/name", "ns/name:"} {
		if _, err := applyflag.ParseConfigMapRef(bad, true); err == nil {
			t.Errorf("applyflag.ParseConfigMapRef(%q) accepted", bad)
		}
	}
	if ref, err := applyflag.ParseConfigMapRef("gpu-operator/custom-mig-config:config.yaml", true); err != nil || ref.Key != "config.yaml" || ref.Name != "custom-mig-config" {
		t.Errorf("parseConfigMapRef: %+v, %v", ref, err)
	}
}
