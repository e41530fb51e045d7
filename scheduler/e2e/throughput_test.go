package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/testcluster"
)

// TestThroughput compares how fast the same binary schedules the same 1,000
// one-GPU pods onto 1,000 kwok nodes of 8 GPUs with the stock profile (the
// default plugins) and with the gpupack profile of deploy/scheduler.yaml.
// Each scheduler starts after its pods exist, and the time runs from its
// start to the last binding, start-up and informer sync included. It
// reports both rates; it asserts only that every pod is bound (tests never
// assert on wall-clock time).
func TestThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 nodes: not in -short")
	}
	bin := schedulerBinary(t)
	c := testcluster.Start(t, testcluster.Options{})
	cs := client(t, c)
	ctx := t.Context()
	const nodes, pods = 1000, 1000
	spec := testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 8}
	testcluster.Parallel(t, nodes, func(i int) error {
		n, err := spec.Object(fmt.Sprintf("h100-%04d", i))
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})

	rate := func(profile, config string) float64 {
		t.Helper()
		c.CreateNamespace(profile)
		testcluster.Parallel(t, pods, func(i int) error {
			p := gpuPod(profile, fmt.Sprintf("p-%04d", i), map[string]int64{"nvidia.com/gpu": 1})
			p.Spec.SchedulerName = profile
			_, err := cs.CoreV1().Pods(profile).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
		file := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		proc := c.Run("scheduler-"+profile, bin, "--config="+file, "--secure-port=0",
			"--authentication-kubeconfig="+c.Kubeconfig(), "--authorization-kubeconfig="+c.Kubeconfig(), "--authentication-skip-lookup")
		waitAllBound(t, cs, profile, pods)
		elapsed := time.Since(start)
		proc.Stop()
		return pods / elapsed.Seconds()
	}
	stock := rate("stock", stockConfig(t, c.Kubeconfig()))
	packed := rate(schedulerName, SchedulerConfig(t, c.Kubeconfig(), ""))
	t.Logf("%d one-GPU pods on %d nodes x 8 GPUs: stock profile %.1f pods/s, gpupack profile %.1f pods/s (%.0f%% of stock)", pods, nodes, stock, packed, 100*packed/stock)
}

// stockConfig is the stock kube-scheduler's profile under the name "stock",
// with the same client settings as SchedulerConfig.
func stockConfig(t *testing.T, kubeconfig string) string {
	t.Helper()
	out, err := yaml.Marshal(map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfig, "qps": 1000, "burst": 2000},
		"leaderElection":   map[string]any{"leaderElect": false},
		"profiles":         []any{map[string]any{"schedulerName": "stock"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func waitAllBound(t *testing.T, cs kubernetes.Interface, namespace string, want int) {
	t.Helper()
	bound := 0
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		bound = 0
		for i := range list.Items {
			if list.Items[i].Spec.NodeName != "" {
				bound++
			}
		}
		return bound == want, nil
	})
	if err != nil {
		t.Fatalf("%s: %d of %d pods bound: %v", namespace, bound, want, err)
	}
}
