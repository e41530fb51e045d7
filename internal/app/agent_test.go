package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/usage"
)

type fakeGPUs struct {
	samples []agent.DeviceSample
	err     error
}

func (f *fakeGPUs) Sample() ([]agent.DeviceSample, error) { return f.samples, f.err }

const (
	podA = "00000000-0000-0000-0000-00000000000a"
	podB = "00000000-0000-0000-0000-00000000000b"
)

// sharedGPUAgent is an agent over one time-sliced GPU held by ml/a and
// ml/b, whose processes 11 and 12 use 60% and 10% of it; podLists counts
// the pod lists.
func sharedGPUAgent(gpus *fakeGPUs, podLists *int) *Agent {
	k := usage.Known
	gpus.samples = []agent.DeviceSample{{
		Device:           agent.Device{Index: 0, UUID: "GPU-aaaa", Model: "NVIDIA H100 80GB HBM3"},
		ActivityMeasured: true,
		Processes: []agent.ProcessSample{
			{PID: 11, SMActive: k(0.6), MemActive: k(0.3), FBUsedMiB: k(30000)},
			{PID: 12, SMActive: k(0.1), MemActive: k(0.05), FBUsedMiB: k(5000)},
		},
	}}
	cgroups := map[uint32]agent.CgroupRef{11: {PodUID: podA, ContainerID: "ca"}, 12: {PodUID: podB, ContainerID: "cb"}}
	return NewAgent("gpu-node-1", AgentSources{
		GPUs: gpus,
		Cgroup: func(pid uint32) (agent.CgroupRef, bool, error) {
			ref, ok := cgroups[pid]
			return ref, ok, nil
		},
		Holders: func(context.Context) (map[string][]agent.Holder, error) {
			return map[string][]agent.Holder{"GPU-aaaa": {{Namespace: "ml", Pod: "a", Container: "main"}, {Namespace: "ml", Pod: "b", Container: "main"}}}, nil
		},
		Pods: func(context.Context) (map[string]agent.Pod, error) {
			*podLists++
			return map[string]agent.Pod{
				podA: {Namespace: "ml", Name: "a", Containers: map[string]string{"ca": "main"}},
				podB: {Namespace: "ml", Name: "b", Containers: map[string]string{"cb": "main"}},
			}, nil
		},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestAgentExposition compares a whole scrape of the agent after one
// interval, then after a failed one.
func TestAgentExposition(t *testing.T) {
	gpus := &fakeGPUs{}
	lists := 0
	a := sharedGPUAgent(gpus, &lists)
	for range 2 {
		if err := a.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if lists != 1 {
		t.Errorf("the node's pods were listed %d times in two intervals with the same pods, want once", lists)
	}
	const want = `
# HELP GPUPACK_DEV_ATTRIBUTED_RATIO Share, 0..1, of the device's per-process activity (or framebuffer, without activity) attributed to pods holding it.
# TYPE GPUPACK_DEV_ATTRIBUTED_RATIO gauge
GPUPACK_DEV_ATTRIBUTED_RATIO{Hostname="gpu-node-1",UUID="GPU-aaaa",gpu="0",modelName="NVIDIA H100 80GB HBM3"} 1
# HELP GPUPACK_POD_FB_USED Framebuffer MiB held by the container's processes.
# TYPE GPUPACK_POD_FB_USED gauge
GPUPACK_POD_FB_USED{Hostname="gpu-node-1",UUID="GPU-aaaa",container="main",gpu="0",modelName="NVIDIA H100 80GB HBM3",namespace="ml",pod="a"} 30000
GPUPACK_POD_FB_USED{Hostname="gpu-node-1",UUID="GPU-aaaa",container="main",gpu="0",modelName="NVIDIA H100 80GB HBM3",namespace="ml",pod="b"} 5000
# HELP GPUPACK_POD_SM_ACTIVE Share of the interval, 0..1, in which the container's processes ran kernels on the device (NVML per-process SM utilisation).
# TYPE GPUPACK_POD_SM_ACTIVE gauge
GPUPACK_POD_SM_ACTIVE{Hostname="gpu-node-1",UUID="GPU-aaaa",container="main",gpu="0",modelName="NVIDIA H100 80GB HBM3",namespace="ml",pod="a"} 0.6
GPUPACK_POD_SM_ACTIVE{Hostname="gpu-node-1",UUID="GPU-aaaa",container="main",gpu="0",modelName="NVIDIA H100 80GB HBM3",namespace="ml",pod="b"} 0.1
`
	names := []string{usage.DeviceAttributed, usage.PodFBUsed, usage.PodSMActive}
	if err := testutil.CollectAndCompare(a, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	gpus.err = errors.New("GPU is lost")
	if err := a.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "nvml") {
		t.Errorf("Sample with NVML failing: error %v, want one naming the nvml stage", err)
	}
	const failed = `
# HELP gpupack_agent_sample_errors_total Sampling intervals that failed, by the stage that failed (nvml, podresources, pods).
# TYPE gpupack_agent_sample_errors_total counter
gpupack_agent_sample_errors_total{Hostname="gpu-node-1",stage="nvml"} 1
`
	if err := testutil.CollectAndCompare(a, strings.NewReader(failed), append(names, "gpupack_agent_sample_errors_total")...); err != nil {
		t.Errorf("after a failed interval, want no stale figures: %v", err)
	}
}

// TestAgentExpositionMIG: a MIG instance's series carry dcgm-exporter's
// GPU_I_PROFILE and GPU_I_ID and the physical GPU's UUID, and no activity
// (NVML has none per process there), only memory.
func TestAgentExpositionMIG(t *testing.T) {
	mig := agent.Device{Index: 1, UUID: "GPU-bbbb", Model: "NVIDIA A100-SXM4-40GB", MIGUUID: "MIG-cccc", MIGInstance: 2, MIGProfile: "3g.20gb"}
	a := NewAgent("gpu-node-1", AgentSources{
		GPUs: &fakeGPUs{samples: []agent.DeviceSample{{Device: mig, Processes: []agent.ProcessSample{{PID: 21, SMActive: usage.Unknown, MemActive: usage.Unknown, FBUsedMiB: usage.Known(1024)}}}}},
		Cgroup: func(uint32) (agent.CgroupRef, bool, error) {
			return agent.CgroupRef{PodUID: podA, ContainerID: "ca"}, true, nil
		},
		Holders: func(context.Context) (map[string][]agent.Holder, error) {
			return map[string][]agent.Holder{"MIG-cccc": {{Namespace: "ml", Pod: "a", Container: "main"}}}, nil
		},
		Pods: func(context.Context) (map[string]agent.Pod, error) {
			return map[string]agent.Pod{podA: {Namespace: "ml", Name: "a", Containers: map[string]string{"ca": "main"}}}, nil
		},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP GPUPACK_POD_FB_USED Framebuffer MiB held by the container's processes.
# TYPE GPUPACK_POD_FB_USED gauge
GPUPACK_POD_FB_USED{GPU_I_ID="2",GPU_I_PROFILE="3g.20gb",Hostname="gpu-node-1",UUID="GPU-bbbb",container="main",gpu="1",modelName="NVIDIA A100-SXM4-40GB",namespace="ml",pod="a"} 1024
`
	if err := testutil.CollectAndCompare(a, strings.NewReader(want), usage.PodFBUsed, usage.PodSMActive, usage.PodMemActive); err != nil {
		t.Error(err)
	}
}
