package diagnose

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/internal/golden"

	"github.com/gpupack/gpupack/internal/cli/source"
)

func TestGolden(t *testing.T) {
	cases := map[string]options{
		"demo.table":     {format: "table"},
		"demo.json":      {format: "json"},
		"demo-pod.table": {format: "table", pod: "ml/train-7b"},
		"no-usage.table": {format: "table", cluster: source.Cluster{Snapshot: "demo/cluster.yaml"}},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), &o, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", name+".golden"), out.Bytes())
		})
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
	head := "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\n"
	cases := map[string]struct {
		o    options
		want string
	}{
		"unknown field":  {options{cluster: source.Cluster{Snapshot: write("a.yaml", head+"nodes: [{name: n, cpu: '1', memory: 1Gi, gpu: 3}]")}}, `a.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "gpu"`},
		"missing node":   {options{cluster: source.Cluster{Snapshot: write("b.yaml", head+"nodes: [{name: n, cpu: '1', memory: 1Gi}]\npods: [{name: p, gpu: {count: 1}, node: m}]")}}, `b.yaml: pod "p" is bound to node "m", which is not in the snapshot`},
		"impossible qty": {options{cluster: source.Cluster{Snapshot: write("c.yaml", head+"nodes: [{name: n, cpu: '1', memory: 1Gi, gpus: [{model: H100, count: 100}]}]")}}, "c.yaml: nodes[0]: gpus[0]: count: 100"},
		"bad usage":      {options{usage: write("u.yaml", "apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\npods: [{pod: ml/a, activity: 5, pattern: busy}]")}, "u.yaml: pods[0]: activity: 5 is not a ratio"},
		"no such pod":    {options{pod: "ml/nope"}, "--pod ml/nope: no pending pod"},
		"bad format":     {options{format: "xml"}, `--format "xml"`},
		"two clusters":   {options{cluster: source.Cluster{Snapshot: "a.yaml", Kubeconfig: "k"}}, "--snapshot and --kubeconfig/--live both name a cluster"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.o.format == "" {
				tc.o.format = "table"
			}
			err := run(context.Background(), &tc.o, &bytes.Buffer{}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
