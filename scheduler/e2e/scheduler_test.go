package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/scheduler/gpupack"
)

// schedulerName is the profile that gpupack-scheduler runs.
const schedulerName = "gpupack"

// schedulerBinary returns the cached gpupack-scheduler, skipping the test
// when it has not been built (failing it under GPUPACK_E2E).
func schedulerBinary(t testing.TB) string {
	t.Helper()
	if path := os.Getenv("GPUPACK_SCHEDULER_BIN"); path != "" {
		return path
	}
	out, err := exec.Command("bash", "../../hack/build-scheduler.sh", "--print-path").Output()
	if err != nil {
		t.Fatalf("hack/build-scheduler.sh --print-path: %v", err)
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("gpupack-scheduler is not built for these sources and this commit (%s); run hack/build-scheduler.sh", path)
		if os.Getenv("GPUPACK_E2E") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// startGpupackScheduler runs gpupack-scheduler with the plugin enabled in
// the profile "gpupack" and leader election off.
func startGpupackScheduler(t *testing.T, c *testcluster.Cluster, pluginArgs string) *testcluster.Process {
	t.Helper()
	return runScheduler(t, c, "gpupack-scheduler", SchedulerConfig(t, c.Kubeconfig(), pluginArgs), "--v=2")
}

// runScheduler runs gpupack-scheduler (whose profiles may be the stock
// ones) as name with the KubeSchedulerConfiguration config, serving no
// port.
func runScheduler(t testing.TB, c *testcluster.Cluster, name, config string, args ...string) *testcluster.Process {
	t.Helper()
	bin := schedulerBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return c.Run(name, bin, append([]string{
		"--config=" + file,
		"--authentication-kubeconfig=" + c.Kubeconfig(),
		"--authorization-kubeconfig=" + c.Kubeconfig(),
		"--authentication-skip-lookup",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--cert-dir=" + dir,
	}, args...)...)
}

// SchedulerConfig is the KubeSchedulerConfiguration of deploy/scheduler.yaml
// with the given kubeconfig, client rate limits for storms, leader
// election off and, when pluginArgs is not empty, the GPUPack plugin's args
// replaced by it (JSON).
func SchedulerConfig(t testing.TB, kubeconfig, pluginArgs string) string {
	t.Helper()
	manifests, err := os.ReadFile("../../deploy/scheduler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for doc := range strings.SplitSeq(string(manifests), "\n---\n") {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(doc), &cm); err == nil && cm.Kind == "ConfigMap" && cm.Name == "gpupack-scheduler-config" {
			text = cm.Data["scheduler-config.yaml"]
		}
	}
	if text == "" {
		t.Fatal("deploy/scheduler.yaml: no ConfigMap gpupack-scheduler-config with scheduler-config.yaml")
	}
	var config map[string]any
	if err := yaml.Unmarshal([]byte(text), &config); err != nil {
		t.Fatalf("deploy/scheduler.yaml: scheduler-config.yaml: %v", err)
	}
	config["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 1000, "burst": 2000}
	config["leaderElection"] = map[string]any{"leaderElect": false}
	if pluginArgs != "" {
		var args any
		if err := json.Unmarshal([]byte(pluginArgs), &args); err != nil {
			t.Fatal(err)
		}
		for _, profile := range config["profiles"].([]any) {
			for _, pc := range profile.(map[string]any)["pluginConfig"].([]any) {
				if pc := pc.(map[string]any); pc["name"] == gpupack.Name {
					pc["args"] = args
				}
			}
		}
	}
	out, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// client returns a client with room for pod storms.
func client(t testing.TB, c *testcluster.Cluster) kubernetes.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	config.QPS, config.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func gpuPod(namespace, name string, requests map[string]int64) *corev1.Pod {
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	for r, n := range requests {
		list[corev1.ResourceName(r)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers:    []corev1.Container{{Name: "main", Image: "example.invalid/app", Resources: corev1.ResourceRequirements{Requests: list, Limits: list}}},
			Tolerations:   []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
		},
	}
}

// TestSchedulerConfigRejectsMalformedArgs: the scheduler refuses to start,
// naming the field.
func TestSchedulerConfigRejectsMalformedArgs(t *testing.T) {
	bin := schedulerBinary(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte(SchedulerConfig(t, kubeconfig, `{"policy": "tetris"}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--config="+config, "--secure-port=0").CombinedOutput()
	if err == nil {
		t.Fatalf("gpupack-scheduler started with policy tetris:\n%s", out)
	}
	if !strings.Contains(string(out), "GPUPack args: policy: unknown policy") || !strings.Contains(string(out), "tetris") {
		t.Errorf("the refusal does not name the field:\n%s", out)
	}
}

// TestStorm: a storm of 1,000 mixed GPU pods (whole GPUs, MIG slices, time
// slices; 1.3 times the cluster's shares) against 100 kwok GPU nodes; no GPU,
// MIG slice or time-slice replica is over-allocated, and every pod is
// either bound with its devices recorded or Pending with gpupack's reason.
func TestStorm(t *testing.T) {
	nodes, pods := 100, 1000
	if testing.Short() {
		nodes, pods = 20, 200
	}
	c := testcluster.Start(t, testcluster.Options{})
	cs := client(t, c)
	ctx := t.Context()

	specs := map[string]testcluster.GPUNode{
		"h100": {Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 8},
		"mig":  {Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 2, MIG: map[string]int64{"3g.40gb": 2, "1g.10gb": 8}, MIGConfig: "custom"},
		"l4ts": {Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 4, Sharing: testcluster.SharingTimeSlicing, Replicas: 4},
	}
	var names []string
	for i := range nodes {
		kind := []string{"h100", "mig", "l4ts"}[i%3]
		names = append(names, fmt.Sprintf("%s-%03d", kind, i))
	}
	testcluster.Parallel(t, len(names), func(i int) error {
		kind, _, _ := strings.Cut(names[i], "-")
		n, err := specs[kind].Object(names[i])
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	c.CreateNamespace("storm")
	sched := startGpupackScheduler(t, c, "")

	shapes := []map[string]int64{
		{"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 2},
		{"nvidia.com/mig-1g.10gb": 1}, {"nvidia.com/mig-1g.10gb": 1}, {"nvidia.com/mig-3g.40gb": 1},
		{"nvidia.com/gpu": 4},
	}
	start := time.Now()
	testcluster.Parallel(t, pods, func(i int) error {
		_, err := cs.CoreV1().Pods("storm").Create(ctx, gpuPod("storm", fmt.Sprintf("p-%04d", i), shapes[i%len(shapes)]), metav1.CreateOptions{})
		return err
	})

	// Wait until every pod is bound or carries gpupack's reason.
	var list *corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := sched.Exited(); err != nil {
			return false, err
		}
		var err error
		if list, err = cs.CoreV1().Pods("storm").List(ctx, metav1.ListOptions{}); err != nil {
			return false, err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Spec.NodeName == "" && !explained(p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods not all bound or explained: %v", err)
	}
	elapsed := time.Since(start)

	nodeList, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := checkNoOverAllocation(t, nodeList.Items, list.Items)
	t.Logf("%d pods: %d bound, %d pending with gpupack's reason, in %v (%.0f pods/s)", len(list.Items), bound, len(list.Items)-bound, elapsed.Round(time.Millisecond), float64(len(list.Items))/elapsed.Seconds())
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.NodeName == "" {
			t.Logf("for example, %s: %s", p.Name, scheduledMessage(p))
			break
		}
	}
	if bound == 0 || bound == len(list.Items) {
		t.Errorf("%d of %d pods bound: the storm should fill the cluster and leave some pending", bound, len(list.Items))
	}
}

func scheduledMessage(p *corev1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Message
		}
	}
	return ""
}

// explained reports whether a pending pod's PodScheduled condition carries
// gpupack's summary.
func explained(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "gpupack: ") {
			return true
		}
	}
	return false
}

// checkNoOverAllocation checks every device of every node against the
// devices the bound GPU pods' annotations record (shares, and the VRAM
// stated on time-sliced GPUs), and returns how many pods are bound.
func checkNoOverAllocation(t *testing.T, nodes []corev1.Node, pods []corev1.Pod) int {
	t.Helper()
	byName := map[string]*cluster.Node{}
	for i := range nodes {
		n, _ := kube.ConvertNode(&nodes[i], gpu.Default())
		byName[n.Name] = n
	}
	type share struct {
		node       string
		gpu, slice int
	}
	holders := map[share][]string{}
	vram := map[share]gpu.MiB{} // stated VRAM on each time-sliced GPU
	bound := 0
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		bound++
		n := byName[p.Spec.NodeName]
		cp, _ := kube.ConvertPod(p)
		if !cp.WantsGPU() {
			continue
		}
		devices, err := wellknown.ParseDevices(p.Annotations[wellknown.AnnotationGPUDevices])
		if err != nil {
			t.Errorf("pod %s on %s: %v", p.Name, n.Name, err)
			continue
		}
		want := cp.GPU.Count
		if cp.GPU.Kind == cluster.MIGSlice {
			want = 1
		}
		if len(devices) != want {
			t.Errorf("pod %s asks for %s and records %d devices", p.Name, cp.GPU, len(devices))
		}
		for _, d := range devices {
			if d.GPU >= len(n.GPUs) {
				t.Errorf("pod %s records GPU %d of %s, which has %d", p.Name, d.GPU, n.Name, len(n.GPUs))
				continue
			}
			g := n.GPUs[d.GPU]
			switch g.Sharing {
			case cluster.MIG:
				if d.Slice < 0 || d.Slice >= len(g.Layout) || g.Layout[d.Slice].Profile != cp.GPU.Profile {
					t.Errorf("pod %s (MIG %s) records %s GPU %d slice %d, not a slice of its profile", p.Name, cp.GPU.Profile, n.Name, d.GPU, d.Slice)
				}
			default:
				if cp.GPU.Kind == cluster.MIGSlice {
					t.Errorf("pod %s (MIG %s) is on %s GPU %d, which is %s", p.Name, cp.GPU.Profile, n.Name, d.GPU, g.Sharing)
				}
			}
			holders[share{n.Name, d.GPU, d.Slice}] = append(holders[share{n.Name, d.GPU, d.Slice}], p.Name)
			if g.Sharing == cluster.TimeSliced {
				vram[share{n.Name, d.GPU, d.Slice}] += cp.GPU.Memory
			}
		}
	}
	for s, hs := range holders {
		g := byName[s.node].GPUs[s.gpu]
		limit := 1
		if g.Sharing == cluster.TimeSliced || g.Sharing == cluster.MPS {
			limit = g.Replicas
		}
		if len(hs) > limit {
			t.Errorf("%s GPU %d slice %d (%s) is held by %d pods, limit %d: %v", s.node, s.gpu, s.slice, g.Sharing, len(hs), limit, hs)
		}
		if vram[s] > g.Memory {
			t.Errorf("%s GPU %d (%s) holds pods stating %d MiB of VRAM, more than its %d MiB: %v", s.node, s.gpu, g.Sharing, vram[s], g.Memory, hs)
		}
	}
	return bound
}
