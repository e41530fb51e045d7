package kube

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestFindConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := func(name, server string) string {
		path := filepath.Join(dir, name)
		config := clientcmdapi.Config{
			Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server}},
			AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "t"}},
			Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
			CurrentContext: "x",
		}
		if err := clientcmd.WriteToFile(config, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flag, env, home := kubeconfig("flag", "https://flag:6443"), kubeconfig("env", "https://env:6443"), kubeconfig("home", "https://home:6443")
	inCluster := func() (*rest.Config, error) { return &rest.Config{Host: "https://in-cluster:443"}, nil }
	outside := func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	missing := filepath.Join(dir, "missing")

	cases := map[string]struct {
		flag, env, home string
		inCluster       func() (*rest.Config, error)
		wantHost        string
		wantErr         string
	}{
		"the flag first":            {flag: flag, env: env, home: home, inCluster: inCluster, wantHost: "https://flag:6443"},
		"then KUBECONFIG":           {env: env, home: home, inCluster: inCluster, wantHost: "https://env:6443"},
		"then in-cluster":           {home: home, inCluster: inCluster, wantHost: "https://in-cluster:443"},
		"then ~/.kube/config":       {home: home, inCluster: outside, wantHost: "https://home:6443"},
		"a missing --kubeconfig":    {flag: missing, env: env, inCluster: inCluster, wantErr: "--kubeconfig: stat " + missing},
		"nothing configured at all": {home: missing, inCluster: outside, wantErr: "no cluster configured: pass --kubeconfig, set KUBECONFIG"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			config, err := findConfig(tc.flag, tc.env, tc.inCluster, tc.home)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("findConfig() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if config.Host != tc.wantHost {
				t.Errorf("host = %q, want %q", config.Host, tc.wantHost)
			}
		})
	}
}
