package e2e_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// BenchmarkLoad measures a live snapshot (kube.Load: list nodes, pods and
// FailedScheduling events, build the snapshot) of a kwok cluster of 1,000
// nodes x 8 H100 GPUs and 5,000 one-GPU pods, created in parallel and
// already bound (spec.nodeName) so that no scheduling is waited for. Besides
// the mean it reports the median time of the iterations and the Go heap in
// use after a load; run it with -benchtime=5x for a median of five.
func BenchmarkLoad(b *testing.B) {
	const nodes, gpusPerNode, pods = 1000, 8, 5000
	c := testcluster.Start(b, testcluster.Options{})
	config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	config.QPS, config.Burst = 2000, 2000
	client := kubernetes.NewForConfigOrDie(config)
	const ns = "bench"
	c.CreateNamespace(ns)

	start := time.Now()
	spec := testcluster.GPUNode{Product: h100Product, MemoryMiB: 81559, GPUs: gpusPerNode}
	testcluster.Parallel(b, nodes, func(i int) error {
		node, err := spec.Object(fmt.Sprintf("h100-%04d", i))
		if err != nil {
			return err
		}
		_, err = client.CoreV1().Nodes().Create(b.Context(), node, metav1.CreateOptions{})
		return err
	})
	testcluster.Parallel(b, pods, func(i int) error {
		pod := makePod(ns, fmt.Sprintf("job-%05d", i)).gpus(testcluster.ResourceGPU, 1).node(fmt.Sprintf("h100-%04d", i%nodes)).obj()
		_, err := client.CoreV1().Pods(ns).Create(b.Context(), pod, metav1.CreateOptions{})
		return err
	})
	b.Logf("created %d nodes and %d pods in %v", nodes, pods, time.Since(start).Round(time.Millisecond))

	b.ReportAllocs()
	var times []time.Duration
	var heap uint64
	for b.Loop() {
		t0 := time.Now()
		st, err := kube.Load(b.Context(), client, gpu.Default())
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
		if got := st.Snapshot.GPUCount(); len(st.Snapshot.Nodes) != nodes || got != nodes*gpusPerNode || len(st.Snapshot.Pods) != pods {
			b.Fatalf("snapshot has %d nodes, %d GPUs, %d pods; want %d, %d, %d", len(st.Snapshot.Nodes), got, len(st.Snapshot.Pods), nodes, nodes*gpusPerNode, pods)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapInuse)
		runtime.KeepAlive(st)
	}
	slices.Sort(times)
	b.ReportMetric(times[len(times)/2].Seconds(), "median-s")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}
