package source

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const demo = "apiVersion: gpupack.io/v1alpha1\nkind: ClusterSnapshot\nnodes: [{name: demo-node, cpu: '1', memory: 1Gi}]\n"

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(demo, "demo-node", "file-node", 1)), 0o644); err != nil {
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
		"kubeconfig absent": {c: Cluster{Kubeconfig: filepath.Join(dir, "no-kubeconfig")}, wantErr: "no-kubeconfig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _, err := tc.c.Load(context.Background(), []byte(demo), "demo.yaml", io.Discard)
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
