package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpupack/gpupack/gpu"
)

// NewClient returns a client for the cluster that kubeconfig names; see
// RESTConfig for where it looks when kubeconfig is empty.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	config, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(config)
}

// RESTConfig finds the cluster to talk to, in this order: the kubeconfig
// file given (gpupack's --kubeconfig flag), the files listed in $KUBECONFIG,
// the in-cluster config of the pod's ServiceAccount, then ~/.kube/config.
// Each uses the file's current context.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	config, err := findConfig(kubeconfig, os.Getenv("KUBECONFIG"), rest.InClusterConfig, clientcmd.RecommendedHomeFile)
	if err != nil {
		return nil, err
	}
	config.UserAgent = "gpupack (" + rest.DefaultKubernetesUserAgent() + ")"
	// A handful of list calls; the defaults (5 QPS) only matter for the
	// Watcher's initial lists on a busy cluster.
	config.QPS, config.Burst = 50, 100
	return config, nil
}

// findConfig is RESTConfig with its sources passed in, for tests.
func findConfig(flag, env string, inCluster func() (*rest.Config, error), home string) (*rest.Config, error) {
	fromFiles := func(source string, paths ...string) (*rest.Config, error) {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
		config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return config, nil
	}
	if flag != "" {
		if _, err := os.Stat(flag); err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return fromFiles("--kubeconfig "+flag, flag)
	}
	if env != "" {
		return fromFiles("$KUBECONFIG "+env, filepath.SplitList(env)...)
	}
	config, err := inCluster()
	if err == nil {
		return config, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("in-cluster config: %w", err)
	}
	if _, statErr := os.Stat(home); statErr != nil {
		return nil, fmt.Errorf("no cluster configured: pass --kubeconfig, set KUBECONFIG, run gpupack in a pod with a ServiceAccount, or create %s", home)
	}
	return fromFiles(home, home)
}

// LoadFrom is Load on the cluster that RESTConfig finds for kubeconfig, for
// the CLI's --kubeconfig flag.
func LoadFrom(ctx context.Context, kubeconfig string, c *gpu.Catalogue) (*State, error) {
	client, err := NewClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	return Load(ctx, client, c)
}
