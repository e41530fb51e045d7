package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestThroughput compares how fast the same binary schedules 1,000
// one-GPU pods onto 1,000 kwok nodes of 8 GPUs with the stock profile (the
// default plugins) and with the gpupack profile of deploy/scheduler.yaml.
// The two alternate over ten rounds (stock, gpupack, gpupack, stock, ...),
// so that neither always runs on a warmer or busier control plane; each
// round starts its scheduler after its 1,000 pods exist and deletes them
// afterwards. A watch records when each pod is bound, and each round gives
// two rates, from the scheduler's start to the last binding (start-up and
// informer sync included) and from the first binding to the last (steady
// state), and the scheduler's CPU time per pod, which the other processes
// sharing the machine disturb far less than the rates. It reports each
// profile's medians; it asserts only that every pod is bound (tests never
// assert on wall-clock time).
func TestThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 nodes: not in -short")
	}
	schedulerBinary(t) // fail or skip before starting a cluster
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

	configs := map[string]string{"stock": stockConfig(t, c.Kubeconfig()), schedulerName: SchedulerConfig(t, c.Kubeconfig(), "")}
	fromStart, steady, cpu := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	order := []string{"stock", schedulerName, schedulerName, "stock"}
	for round, profile := range slices.Concat(order, order, order[:2]) {
		namespace := fmt.Sprintf("%s-%d", profile, round)
		c.CreateNamespace(namespace)
		testcluster.Parallel(t, pods, func(i int) error {
			p := gpuPod(namespace, fmt.Sprintf("p-%04d", i), map[string]int64{"nvidia.com/gpu": 1})
			p.Spec.SchedulerName = profile
			_, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
		binds := watchBinds(t, cs, namespace)
		start := time.Now()
		proc := runScheduler(t, c, "scheduler-"+namespace, configs[profile])
		first, last := binds.wait(t, pods, proc)
		proc.Stop()
		fromStart[profile] = append(fromStart[profile], pods/last.Sub(start).Seconds())
		steady[profile] = append(steady[profile], (pods-1)/last.Sub(first).Seconds())
		cpu[profile] = append(cpu[profile], float64(proc.CPUTime().Microseconds())/pods)
		t.Logf("round %d, %s profile: %.1f pods/s from start, %.1f pods/s steady, %.0f us of scheduler CPU per pod",
			round, profile, fromStart[profile][len(fromStart[profile])-1], steady[profile][len(steady[profile])-1], cpu[profile][len(cpu[profile])-1])

		deletePods(t, cs, namespace)
	}
	for _, rates := range []struct {
		name string
		by   map[string][]float64
	}{{"from start", fromStart}, {"steady", steady}} {
		s, g := median(rates.by["stock"]), median(rates.by[schedulerName])
		t.Logf("%d one-GPU pods on %d nodes x 8 GPUs, %s, median of %d rounds each: stock profile %.1f pods/s, gpupack profile %.1f pods/s (%.0f%% of stock)",
			pods, nodes, rates.name, len(rates.by["stock"]), s, g, 100*g/s)
	}
	s, g := median(cpu["stock"]), median(cpu[schedulerName])
	t.Logf("scheduler CPU per pod, median of %d rounds each: stock profile %.0f us, gpupack profile %.0f us (%.0f%% of stock)", len(cpu["stock"]), s, g, 100*g/s)
}

// median is the middle value (the mean of the two middle ones for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// binds records when each pod of a namespace is first seen bound.
type binds struct {
	mu    sync.Mutex
	at    map[string]time.Time
	watch watch.Interface
}

// watchBinds starts watching the namespace's pods; call it before the
// scheduler starts.
func watchBinds(t *testing.T, cs kubernetes.Interface, namespace string) *binds {
	t.Helper()
	w := watchPods(t, cs, namespace)
	b := &binds{at: map[string]time.Time{}, watch: w}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			now := time.Now()
			b.mu.Lock()
			if _, seen := b.at[p.Name]; !seen {
				b.at[p.Name] = now
			}
			b.mu.Unlock()
		}
	}()
	return b
}

// watchPods watches the namespace's pods from now on, in the apiserver's
// order, resuming from the last event seen if the apiserver closes the
// watch.
func watchPods(t testing.TB, cs kubernetes.Interface, namespace string) watch.Interface {
	t.Helper()
	list, err := cs.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(t.Context(), list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(namespace).Watch(ctx, options)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// wait waits until want pods are bound (or the process exits) and returns
// the times of the first and the last binding.
func (b *binds) wait(t *testing.T, want int, proc *testcluster.Process) (first, last time.Time) {
	t.Helper()
	defer b.watch.Stop()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		if err := proc.Exited(); err != nil {
			return false, err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.at) >= want, nil
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		t.Fatalf("%d of %d pods seen bound: %v", len(b.at), want, err)
	}
	for _, at := range b.at {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}

// stockConfig is the stock kube-scheduler's profile under the name "stock",
// with the same client settings as SchedulerConfig.
func stockConfig(t testing.TB, kubeconfig string) string {
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

// deletePods deletes the namespace's pods at once (grace period 0) and
// waits until none is left, deleting again what a timed-out or failed
// call left behind.
func deletePods(t testing.TB, cs kubernetes.Interface, namespace string) {
	t.Helper()
	zero := int64(0)
	left := -1
	var lastErr error
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if left != 0 {
			lastErr = cs.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		}
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		left = len(list.Items)
		return left == 0, nil
	})
	if err != nil {
		t.Fatalf("%s: %d pods left after deletion: %v (last error: %v)", namespace, left, err, lastErr)
	}
}
