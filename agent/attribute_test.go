package agent

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/usage"
)

var (
	gpu0 = Device{Index: 0, UUID: "GPU-aaaa", Model: "NVIDIA A100-SXM4-40GB"}
	mig1 = Device{Index: 1, UUID: "GPU-bbbb", Model: "NVIDIA A100-SXM4-40GB", MIGUUID: "MIG-cccc", MIGInstance: 7, MIGProfile: "1g.5gb"}
)

// uid makes the pod UID of test pod n.
func uid(n int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012d", n) }

// node is a node with pods train-N (container "main", runtime ID cN) whose
// process pid 100+N runs in it, pod N holding the devices given.
func node(holders map[string][]int, pods ...int) Node {
	n := Node{Cgroups: map[uint32]CgroupRef{}, Pods: map[string]Pod{}, Holders: map[string][]Holder{}}
	for _, p := range pods {
		n.Pods[uid(p)] = Pod{Namespace: "ml", Name: fmt.Sprintf("train-%d", p), Containers: map[string]string{fmt.Sprintf("c%d", p): "main"}}
		n.Cgroups[uint32(100+p)] = CgroupRef{PodUID: uid(p), ContainerID: fmt.Sprintf("c%d", p)}
	}
	for dev, ps := range holders {
		for _, p := range ps {
			n.Holders[dev] = append(n.Holders[dev], Holder{Namespace: "ml", Pod: fmt.Sprintf("train-%d", p), Container: "main"})
		}
	}
	return n
}

func proc(pid uint32, sm, mem, fbMiB float64) ProcessSample {
	return ProcessSample{PID: pid, SMActive: usage.Known(sm), MemActive: usage.Known(mem), FBUsedMiB: usage.Known(fbMiB)}
}

func figures(d Device, pod int, sm, mem, fb usage.Amount, procs int, holds bool) PodFigures {
	return PodFigures{Device: d, Owner: usage.Owner{Namespace: "ml", Pod: fmt.Sprintf("train-%d", pod), Container: "main"}, SMActive: sm, MemActive: mem, FBUsedMiB: fb, Processes: procs, Holds: holds}
}

func TestAttribute(t *testing.T) {
	k := usage.Known
	cases := map[string]struct {
		samples []DeviceSample
		node    Node
		want    Attribution
	}{
		"two pods time-sliced on one GPU": {
			samples: []DeviceSample{{Device: gpu0, ActivityMeasured: true, Processes: []ProcessSample{proc(101, 0.6, 0.3, 20000), proc(102, 0.1, 0.05, 4000)}}},
			node:    node(map[string][]int{"GPU-aaaa": {1, 2}}, 1, 2),
			want: Attribution{
				Pods: []PodFigures{
					figures(gpu0, 1, k(0.6), k(0.3), k(20000), 1, true),
					figures(gpu0, 2, k(0.1), k(0.05), k(4000), 1, true),
				},
				Devices: []DeviceFigures{{Device: gpu0, Coverage: k(1), Processes: 2}},
			},
		},
		"three pods, one idle, one with two processes": {
			samples: []DeviceSample{{Device: gpu0, ActivityMeasured: true, Processes: []ProcessSample{proc(101, 0.25, 0.1, 1000), proc(201, 0.25, 0.1, 1000), proc(102, 0.2, 0, 500)}}},
			node: func() Node {
				n := node(map[string][]int{"GPU-aaaa": {1, 2, 3}}, 1, 2, 3)
				n.Cgroups[201] = CgroupRef{PodUID: uid(1), ContainerID: "c1"}
				return n
			}(),
			want: Attribution{
				Pods: []PodFigures{
					figures(gpu0, 1, k(0.5), k(0.2), k(2000), 2, true),
					figures(gpu0, 2, k(0.2), k(0), k(500), 1, true),
					figures(gpu0, 3, k(0), k(0), k(0), 0, true),
				},
				Devices: []DeviceFigures{{Device: gpu0, Coverage: k(1), Processes: 3}},
			},
		},
		"MIG instance: memory per process, no per-process activity": {
			samples: []DeviceSample{{Device: mig1, Processes: []ProcessSample{{PID: 101, SMActive: usage.Unknown, MemActive: usage.Unknown, FBUsedMiB: k(3000)}}}},
			node:    node(map[string][]int{"MIG-cccc": {1}}, 1),
			want: Attribution{
				Pods:    []PodFigures{figures(mig1, 1, usage.Unknown, usage.Unknown, k(3000), 1, true)},
				Devices: []DeviceFigures{{Device: mig1, Coverage: k(1), Processes: 1}},
			},
		},
		"another container's process and a host process lower coverage": {
			samples: []DeviceSample{{Device: gpu0, ActivityMeasured: true, Processes: []ProcessSample{proc(101, 0.4, 0, 1000), proc(103, 0.4, 0, 1000), proc(999, 0.2, 0, 100)}}},
			node:    node(map[string][]int{"GPU-aaaa": {1}}, 1, 3),
			want: Attribution{
				Pods: []PodFigures{
					figures(gpu0, 1, k(0.4), k(0), k(1000), 1, true),
					figures(gpu0, 3, k(0.4), k(0), k(1000), 1, false),
				},
				Devices: []DeviceFigures{{Device: gpu0, Coverage: k(0.4 / 1.0), Processes: 3, Unattributed: 2}},
			},
		},
		"nothing running: holders measured 0, coverage unknown": {
			samples: []DeviceSample{{Device: gpu0, ActivityMeasured: true}},
			node:    node(map[string][]int{"GPU-aaaa": {1}}, 1),
			want: Attribution{
				Pods:    []PodFigures{figures(gpu0, 1, k(0), k(0), k(0), 0, true)},
				Devices: []DeviceFigures{{Device: gpu0, Coverage: usage.Unknown}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Attribute(tc.samples, tc.node)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Attribute (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAttributeBoundsOwners(t *testing.T) {
	var procs []ProcessSample
	n := node(nil)
	for p := 1; p <= MaxOwnersPerDevice+5; p++ {
		n.Pods[uid(p)] = Pod{Namespace: "ml", Name: fmt.Sprintf("train-%d", p)}
		n.Cgroups[uint32(100+p)] = CgroupRef{PodUID: uid(p)}
		procs = append(procs, proc(uint32(100+p), 0.01, 0, 10))
	}
	got := Attribute([]DeviceSample{{Device: gpu0, ActivityMeasured: true, Processes: procs}}, n)
	if len(got.Pods) != MaxOwnersPerDevice {
		t.Errorf("Attribute kept %d owners of one device, want the bound %d", len(got.Pods), MaxOwnersPerDevice)
	}
	if u := got.Devices[0].Unattributed; u != MaxOwnersPerDevice+5 {
		t.Errorf("Attribute: %d processes unattributed, want all %d (no holder)", u, MaxOwnersPerDevice+5)
	}
}

func TestProcesses(t *testing.T) {
	k := usage.Known
	util := []UtilSample{{PID: 7, SMPercent: 40, MemPercent: 10}, {PID: 7, SMPercent: 60, MemPercent: 30}, {PID: 9, SMPercent: 20}}
	running := []RunningProcess{{PID: 7, UsedBytes: 2 << 30}, {PID: 8, UsedBytes: 1 << 20}}
	got := Processes(util, running, true, true)
	want := []ProcessSample{
		{PID: 7, SMActive: k(0.5), MemActive: k(0.2), FBUsedMiB: k(2048)},
		{PID: 8, SMActive: k(0), MemActive: k(0), FBUsedMiB: k(1)},
		// 9 exited in the interval: sampled, no longer holding memory.
		{PID: 9, SMActive: k(0.2), MemActive: k(0), FBUsedMiB: k(0)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Processes (-want +got):\n%s", diff)
	}
	got = Processes(nil, running[:1], false, true)
	want = []ProcessSample{{PID: 7, SMActive: usage.Unknown, MemActive: usage.Unknown, FBUsedMiB: k(2048)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Processes without per-process activity (-want +got):\n%s", diff)
	}
}

// TestCgroupCacheKeepsExitedProcess: a process read while running is still
// attributed in the next interval, after it exited and its cgroup file is
// gone, and forgotten once no device reports it.
func TestCgroupCacheKeepsExitedProcess(t *testing.T) {
	alive := map[uint32]bool{101: true}
	read := func(pid uint32) (CgroupRef, bool, error) {
		if !alive[pid] {
			return CgroupRef{}, false, fmt.Errorf("/proc/%d/cgroup: no such file", pid)
		}
		return CgroupRef{PodUID: uid(1), ContainerID: "c1"}, true, nil
	}
	c := NewCgroupCache()
	samples := []DeviceSample{{Device: gpu0, Processes: []ProcessSample{{PID: 101}}}}
	want := map[uint32]CgroupRef{101: {PodUID: uid(1), ContainerID: "c1"}}
	if diff := cmp.Diff(want, c.Resolve(samples, read)); diff != "" {
		t.Errorf("interval 1 (-want +got):\n%s", diff)
	}
	delete(alive, 101)
	if diff := cmp.Diff(want, c.Resolve(samples, read)); diff != "" {
		t.Errorf("interval 2, process exited but still sampled (-want +got):\n%s", diff)
	}
	c.Resolve(nil, read)
	c.Resolve(nil, read)
	if c.Len() != 0 {
		t.Errorf("cache holds %d PIDs after two intervals without them, want 0", c.Len())
	}
}
