//go:build nvml && cgo

package nvml

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/usage"
)

// node mocks a node with a time-sliced GPU 0 running two processes and a
// GPU 1 in MIG mode with one instance running one; since records the
// timestamps GPU 0's utilisation was asked from.
func node(since *[]uint64) *mock.Interface {
	gpu0 := &mock.Device{
		GetUUIDFunc:    func() (string, nvml.Return) { return "GPU-aaaa", nvml.SUCCESS },
		GetNameFunc:    func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetMigModeFunc: func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 11, UsedGpuMemory: 8 << 30}, {Pid: 12, UsedGpuMemory: 2 << 30}}, nvml.SUCCESS
		},
		GetProcessUtilizationFunc: func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			*since = append(*since, last)
			if len(*since) > 2 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return []nvml.ProcessUtilizationSample{
				{Pid: 11, TimeStamp: 1000, SmUtil: 70, MemUtil: 40},
				{Pid: 12, TimeStamp: 2000, SmUtil: 10, MemUtil: 5},
			}, nvml.SUCCESS
		},
	}
	if since == nil {
		gpu0.GetProcessUtilizationFunc = nil
	}
	mig := &mock.Device{
		GetUUIDFunc:          func() (string, nvml.Return) { return "MIG-cccc", nvml.SUCCESS },
		GetNameFunc:          func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG 3g.20gb", nvml.SUCCESS },
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 21, UsedGpuMemory: 1 << 30}}, nvml.SUCCESS
		},
		GetProcessUtilizationFunc: func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return nil, nvml.ERROR_NOT_SUPPORTED
		},
	}
	gpu1 := &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return "GPU-bbbb", nvml.SUCCESS },
		GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB", nvml.SUCCESS },
		GetMigModeFunc:           func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS },
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return 7, nvml.SUCCESS },
		GetMigDeviceHandleByIndexFunc: func(n int) (nvml.Device, nvml.Return) {
			if n == 0 {
				return mig, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
	}
	devices := []nvml.Device{gpu0, gpu1}
	return &mock.Interface{
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(n int) (nvml.Device, nvml.Return) { return devices[n], nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
	}
}

func TestSample(t *testing.T) {
	k := usage.Known
	var since []uint64
	r := New(node(&since))
	got, err := r.Sample()
	if err != nil {
		t.Fatal(err)
	}
	gpu0 := agent.Device{Index: 0, UUID: "GPU-aaaa", Model: "NVIDIA H100 80GB HBM3"}
	mig := agent.Device{Index: 1, UUID: "GPU-bbbb", Model: "NVIDIA A100-SXM4-40GB", MIGUUID: "MIG-cccc", MIGInstance: 2, MIGProfile: "3g.20gb"}
	want := []agent.DeviceSample{
		{Device: gpu0, ActivityMeasured: true, Processes: []agent.ProcessSample{
			{PID: 11, SMActive: k(0.7), MemActive: k(0.4), FBUsedMiB: k(8192)},
			{PID: 12, SMActive: k(0.1), MemActive: k(0.05), FBUsedMiB: k(2048)},
		}},
		{Device: mig, Processes: []agent.ProcessSample{{PID: 21, SMActive: usage.Unknown, MemActive: usage.Unknown, FBUsedMiB: k(1024)}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sample (-want +got):\n%s", diff)
	}
	// The next intervals ask only for samples after the newest read: the
	// samples already read are left out, and NOT_FOUND (none since) is
	// measured idleness, not an error.
	for interval := 2; interval <= 3; interval++ {
		got, err = r.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if p := got[0].Processes[0]; p.SMActive != k(0) || !got[0].ActivityMeasured {
			t.Errorf("interval %d with no new samples: process %+v, measured %v; want SM 0, measured", interval, p, got[0].ActivityMeasured)
		}
	}
	if diff := cmp.Diff([]uint64{0, 2000, 2000}, since); diff != "" {
		t.Errorf("utilisation asked since (-want +got):\n%s", diff)
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
}

func TestSampleFailsOnDeviceError(t *testing.T) {
	lib := node(nil)
	lib.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST }
	if _, err := New(lib).Sample(); err == nil {
		t.Error("Sample with a lost GPU: no error, want one naming the device")
	}
}
