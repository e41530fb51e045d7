package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/internal/source/procfs"
	"github.com/gpupack/gpupack/usage"
)

// BenchmarkAgentInterval is one sampling interval of a busy node (8
// time-sliced GPUs, 4 pods on each with 2 processes apiece, cgroups read
// from a /proc tree on disk) and one scrape of its series: the agent's
// CPU cost per interval, which divided by the interval (10 s by default)
// is its overhead per sampled second (docs/reference/benchmarks.md).
func BenchmarkAgentInterval(b *testing.B) {
	const gpus, podsPerGPU, procsPerPod = 8, 4, 2
	root := b.TempDir()
	k := usage.Known
	var samples []agent.DeviceSample
	holders := map[string][]agent.Holder{}
	pods := map[string]agent.Pod{}
	for g := range gpus {
		d := agent.Device{Index: g, UUID: fmt.Sprintf("GPU-%04d", g), Model: "NVIDIA H100 80GB HBM3"}
		s := agent.DeviceSample{Device: d, ActivityMeasured: true}
		for p := range podsPerGPU {
			uid := fmt.Sprintf("00000000-0000-0000-%04d-%012d", g, p)
			cid := fmt.Sprintf("%064x", g*100+p)
			name := fmt.Sprintf("train-%d-%d", g, p)
			pods[uid] = agent.Pod{Namespace: "ml", Name: name, Containers: map[string]string{cid: "main"}}
			holders[d.UUID] = append(holders[d.UUID], agent.Holder{Namespace: "ml", Pod: name, Container: "main"})
			for q := range procsPerPod {
				pid := uint32(1000 + g*100 + p*10 + q)
				writeCgroup(b, root, pid, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+uid+".slice/cri-containerd-"+cid+".scope\n")
				s.Processes = append(s.Processes, agent.ProcessSample{PID: pid, SMActive: k(0.1), MemActive: k(0.05), FBUsedMiB: k(2000)})
			}
		}
		samples = append(samples, s)
	}
	a := NewAgent("gpu-node-1", AgentSources{
		GPUs:    &fakeGPUs{samples: samples},
		Cgroup:  procfs.Reader{Root: root}.Cgroup,
		Holders: func(context.Context) (map[string][]agent.Holder, error) { return holders, nil },
		Pods:    func(context.Context) (map[string]agent.Pod, error) { return pods, nil },
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(a)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := a.Sample(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

func writeCgroup(b *testing.B, root string, pid uint32, content string) {
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}
