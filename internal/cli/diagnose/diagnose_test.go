package diagnose

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/testkit/golden"
)

func TestGolden(t *testing.T) {
	cases := map[string]options{
		"demo.table":     {format: "table"},
		"demo.json":      {format: "json"},
		"demo-pod.table": {format: "table", pod: "ml/train-7b"},
		"no-usage.table": {format: "table", cluster: app.Cluster{Snapshot: "../../source/demo/cluster.yaml"}},
		// The demo of an hour of usage, kept for the cases the demo world lacks:
		// a pod that fits now with its own usage, a model's memory estimate.
		"hour.table":     {format: "table", cluster: app.Cluster{Snapshot: "testdata/hour.cluster.yaml"}, usage: "testdata/hour.usage.yaml"},
		"unlisted.table": {format: "table", cluster: app.Cluster{Snapshot: "testdata/unlisted.yaml"}},
		// A workload that a GPU quota keeps from creating its pod.
		"quota.table": {format: "table", cluster: app.Cluster{Snapshot: "testdata/quota.cluster.yaml"}, usage: "testdata/quota.usage.yaml"},
		"quota.json":  {format: "json", cluster: app.Cluster{Snapshot: "testdata/quota.cluster.yaml"}, usage: "testdata/quota.usage.yaml"},
		// DRA devices whose taints the pods' claims do not tolerate.
		"dra-taint.table": {format: "table", cluster: app.Cluster{Snapshot: "testdata/dra-taint.cluster.yaml"}},
		// The application step for the demo week's running pods.
		"running.table": {format: "table", running: true},
		"running.json":  {format: "json", running: true},
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

// TestUsageNamesUnknownPods: usage entries that name no pod of the cluster
// are named in a warning, and the diagnosis goes on with the others.
func TestUsageNamesUnknownPods(t *testing.T) {
	u := filepath.Join(t.TempDir(), "u.yaml")
	doc := "apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\npods: [{pod: ml/gone, gpuMemory: 1Gi}, {pod: ml/train-7b, gpuMemory: 1Gi}]"
	if err := os.WriteFile(u, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := run(context.Background(), &options{usage: u, format: "table"}, io.Discard, &stderr); err != nil {
		t.Fatal(err)
	}
	want := "warning: " + u + ": 1 of its 2 pods are not in demo/cluster.yaml, so their facts are not used: ml/gone\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
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
		"unknown field":              {options{cluster: app.Cluster{Snapshot: write("a.yaml", head+"nodes: [{name: n, cpu: '1', memory: 1Gi, gpu: 3}]")}}, `a.yaml:3: nodes[0]: unknown field "gpu"; want one of cpu, gpus,`},
		"missing node":               {options{cluster: app.Cluster{Snapshot: write("b.yaml", head+"nodes: [{name: n, cpu: '1', memory: 1Gi}]\npods: [{name: p, gpu: {count: 1}, node: m}]")}}, `b.yaml: pod "default/p" is bound to node "m", which is not in the snapshot`},
		"impossible qty":             {options{cluster: app.Cluster{Snapshot: write("c.yaml", head+"nodes: [{name: n, cpu: '1', memory: 1Gi, gpus: [{model: H100, count: 100}]}]")}}, "c.yaml: nodes[0]: gpus[0]: count: 100"},
		"bad usage":                  {options{usage: write("u.yaml", "apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\npods: [{pod: ml/a, activity: 5, pattern: busy}]")}, "u.yaml: pods[0]: activity: 5 is not a ratio"},
		"no such pod":                {options{pod: "ml/nope"}, "--pod ml/nope: no pending or failed GPU pod"},
		"other cluster":              {options{usage: write("v.yaml", "apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\npods: [{pod: ml/a, gpuMemory: 1Gi}, {pod: ml/b, gpuMemory: 1Gi}]")}, "v.yaml: none of its 2 pods is in demo/cluster.yaml (ml/a, ml/b): it describes another cluster"},
		"bad format":                 {options{format: "xml"}, `--format "xml"`},
		"two clusters":               {options{cluster: app.Cluster{Snapshot: "a.yaml", Kubeconfig: "k"}}, "--snapshot and --kubeconfig/--live both name a cluster"},
		"running a pod":              {options{running: true, pod: "ml/a"}, "--usage and --pod are for pending pods"},
		"window alone":               {options{running: true, window: "24h"}, "--window 24h needs --prometheus"},
		"prometheus without running": {options{prometheus: "http://127.0.0.1:9"}, "--prometheus measures the running pods: add --running"},
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

// TestCancelled: gpupack diagnose stops on SIGINT or SIGTERM, as simulate
// does: with main's signal context done, the command fails with the
// context's error (so gpupack exits non-zero) and prints no report.
func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as a SIGINT would
	cmd := NewCommand(ctx)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as the root sets them
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(nil)
	err := cmd.ExecuteContext(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if out.Len() > 0 {
		t.Errorf("wrote %q before failing", out.String())
	}
}
