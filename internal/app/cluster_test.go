package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

const demoDoc = "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes: [{name: demo-node, cpu: '1', memory: 1Gi}]\n"

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(demoDoc, "demo-node", "file-node", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	over := filepath.Join(dir, "over.yaml")
	overDoc := "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes: [{name: n1, cpu: '96', memory: 1Ti, gpus: [{model: H100-80GB, count: 8}]}]\npods:\n"
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		overDoc += "- {namespace: ml, name: " + name + ", cpu: '1', gpu: {count: 4}, node: n1}\n"
	}
	if err := os.WriteFile(over, []byte(overDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		c        Cluster
		wantNode string
		wantErr  string
		name     string
	}{
		"demo":              {c: Cluster{}, wantNode: "demo-node", name: "demo.yaml"},
		"snapshot":          {c: Cluster{Snapshot: file}, wantNode: "file-node", name: file},
		"missing snapshot":  {c: Cluster{Snapshot: filepath.Join(dir, "none.yaml")}, wantErr: "--snapshot: open"},
		"two clusters":      {c: Cluster{Snapshot: file, Live: true}, wantErr: "both name a cluster"},
		"over-committed":    {c: Cluster{Snapshot: over}, wantErr: over + ": node n1 is over-committed: its bound pods ask for 20 GPU in all (ml/a (4 GPU), ml/b (4 GPU), ml/c (4 GPU), ml/d (4 GPU), ml/e (4 GPU)), but it has 8 x H100-80GB (exclusive)"},
		"kubeconfig absent": {c: Cluster{Kubeconfig: filepath.Join(dir, "no-kubeconfig")}, wantErr: "no-kubeconfig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _, err := tc.c.Load(context.Background(), []byte(demoDoc), "demo.yaml", io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Nodes[0].Name; got != tc.wantNode {
				t.Errorf("node = %s, want %s", got, tc.wantNode)
			}
			if got := tc.c.Name("demo.yaml"); got != tc.name {
				t.Errorf("Name = %s, want %s", got, tc.name)
			}
		})
	}
}

func TestReadUsage(t *testing.T) {
	var pods, entries []string
	for i := range 12 {
		pods = append(pods, fmt.Sprintf("{namespace: ml, name: p%d}", i))
	}
	for i := range 14 {
		entries = append(entries, fmt.Sprintf("{pod: ml/p%d, gpuMemory: 1Gi}", i+2))
	}
	s, err := cluster.ParseFile([]byte(demoDoc+"pods: ["+strings.Join(pods, ", ")+"]\n"), "c.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	head := "apiVersion: gpupack.io/v1alpha1\nkind: PodUsage\npods: "
	cases := map[string]struct{ doc, wantWarning, wantErr string }{
		"all known": {doc: head + "[{pod: ml/p0, gpuMemory: 1Gi}]"},
		"empty":     {doc: head + "[]"},
		"some unknown": {doc: head + "[{pod: ml/p0, gpuMemory: 1Gi}, {pod: ml/x, gpuMemory: 1Gi}]",
			wantWarning: "warning: u.yaml: 1 of its 2 pods are not in c.yaml, so their facts are not used: ml/x\n"},
		"many unknown": {doc: head + "[" + strings.Join(entries, ", ") + "]",
			wantWarning: "warning: u.yaml: 4 of its 14 pods are not in c.yaml, so their facts are not used: ml/p12, ml/p13, ml/p14, ml/p15\n"},
		"none known": {doc: head + "[{pod: web/a, gpuMemory: 1Gi}, {pod: web/b, gpuMemory: 1Gi}]",
			wantErr: "u.yaml: none of its 2 pods is in c.yaml (web/a, web/b): it describes another cluster"},
		"bad file": {doc: head + "[{pod: web/a, gpuMemory: [1]}]", wantErr: "u.yaml:3: pods[0].gpuMemory: a list; want a string"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := ReadUsage([]byte(tc.doc), "u.yaml", s, "c.yaml", &stderr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWarning, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}
