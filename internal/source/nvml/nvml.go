//go:build nvml && cgo

package nvml

import (
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpupack/gpupack/agent"
)

// Reader samples the node's GPUs through NVML. It is not safe for
// concurrent use: the agent samples from one goroutine.
type Reader struct {
	lib nvml.Interface
	// lastSeen is, per device (HolderID), the newest per-process sample's
	// time already read, so each interval reads only its own samples.
	lastSeen map[string]uint64
}

// Open loads libnvidia-ml.so.1 and initialises NVML; on a machine without
// the driver it returns an error wrapping ErrUnavailable.
func Open() (*Reader, error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND || ret == nvml.ERROR_DRIVER_NOT_LOADED {
			return nil, fmt.Errorf("%w: %v: no NVIDIA driver on this machine (libnvidia-ml.so.1 not found or not loaded); run the agent on GPU nodes with the NVIDIA container runtime", ErrUnavailable, ret)
		}
		return nil, fmt.Errorf("initialising NVML: %v", ret)
	}
	return New(lib), nil
}

// New reads through an initialised NVML library (the real one, or
// go-nvml's mock in tests).
func New(lib nvml.Interface) *Reader {
	return &Reader{lib: lib, lastSeen: map[string]uint64{}}
}

// Close shuts NVML down.
func (r *Reader) Close() error {
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shutting NVML down: %v", ret)
	}
	return nil
}

// Sample reads every device: whole GPUs, or the MIG instances of a GPU in
// MIG mode, each with the processes of the interval since the last call.
func (r *Reader) Sample() ([]agent.DeviceSample, error) {
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %v", ret)
	}
	var out []agent.DeviceSample
	for i := range n {
		h, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d: %v", i, ret)
		}
		samples, err := r.gpu(i, h)
		if err != nil {
			return nil, err
		}
		out = append(out, samples...)
	}
	return out, nil
}

// gpu reads GPU i: itself, or its MIG instances.
func (r *Reader) gpu(i int, h nvml.Device) ([]agent.DeviceSample, error) {
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device %d UUID: %v", i, ret)
	}
	model, _ := h.GetName()
	d := agent.Device{Index: i, UUID: uuid, Model: model}
	if mode, _, ret := h.GetMigMode(); ret != nvml.SUCCESS || mode != nvml.DEVICE_MIG_ENABLE {
		s, err := r.device(d, h)
		return []agent.DeviceSample{s}, err
	}
	return r.migInstances(d, h)
}

// migInstances reads the MIG instances of the GPU in MIG mode.
func (r *Reader) migInstances(parent agent.Device, h nvml.Device) ([]agent.DeviceSample, error) {
	most, ret := h.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device %s MIG device count: %v", parent.UUID, ret)
	}
	var out []agent.DeviceSample
	for j := range most {
		mh, ret := h.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %s MIG device %d: %v", parent.UUID, j, ret)
		}
		d := parent
		if d.MIGUUID, ret = mh.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %s MIG device %d UUID: %v", parent.UUID, j, ret)
		}
		if d.MIGInstance, ret = mh.GetGpuInstanceId(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML MIG device %s GPU instance ID: %v", d.MIGUUID, ret)
		}
		name, _ := mh.GetName()
		d.MIGProfile = migProfile(name)
		s, err := r.device(d, mh)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// migProfile is the profile in a MIG device's name ("NVIDIA A100-SXM4-40GB
// MIG 1g.5gb" gives "1g.5gb"), "" if it names none.
func migProfile(name string) string {
	_, profile, ok := strings.Cut(name, "MIG ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(profile)
}

// device reads one device's running processes and per-process samples.
// NVML has no per-process utilisation on MIG instances (NOT_SUPPORTED);
// NOT_FOUND means no process ran since the last read.
func (r *Reader) device(d agent.Device, h nvml.Device) (agent.DeviceSample, error) {
	procs, ret := h.GetComputeRunningProcesses()
	runningKnown := ret == nvml.SUCCESS
	if !runningKnown && ret != nvml.ERROR_NOT_SUPPORTED && ret != nvml.ERROR_NO_PERMISSION {
		return agent.DeviceSample{}, fmt.Errorf("NVML device %s running processes: %v", d.HolderID(), ret)
	}
	running := make([]agent.RunningProcess, len(procs))
	for i, p := range procs {
		running[i] = agent.RunningProcess{PID: p.Pid, UsedBytes: p.UsedGpuMemory}
	}
	util, measured, err := r.utilisation(d, h)
	if err != nil {
		return agent.DeviceSample{}, err
	}
	return agent.DeviceSample{Device: d, ActivityMeasured: measured, Processes: agent.Processes(util, running, measured, runningKnown)}, nil
}

// utilisation reads the per-process samples newer than the last read.
func (r *Reader) utilisation(d agent.Device, h nvml.Device) ([]agent.UtilSample, bool, error) {
	key := d.HolderID()
	samples, ret := h.GetProcessUtilization(r.lastSeen[key])
	switch {
	case errors.Is(ret, nvml.ERROR_NOT_FOUND):
		return nil, true, nil
	case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED), errors.Is(ret, nvml.ERROR_NO_PERMISSION):
		return nil, false, nil
	case ret != nvml.SUCCESS:
		return nil, false, fmt.Errorf("NVML device %s process utilisation: %v", key, ret)
	}
	out := make([]agent.UtilSample, 0, len(samples))
	for _, s := range samples {
		if s.TimeStamp <= r.lastSeen[key] {
			continue
		}
		out = append(out, agent.UtilSample{PID: s.Pid, TimeStampUs: s.TimeStamp, SMPercent: s.SmUtil, MemPercent: s.MemUtil})
	}
	for _, s := range out {
		r.lastSeen[key] = max(r.lastSeen[key], s.TimeStampUs)
	}
	return out, true, nil
}
