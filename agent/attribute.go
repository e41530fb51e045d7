package agent

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/usage"
)

// Device is one GPU, or one MIG instance of it, as NVML reads it and
// dcgm-exporter labels it.
type Device struct {
	// Index is the physical GPU's NVML index (dcgm-exporter's "gpu").
	Index int
	// UUID is the physical GPU's UUID, also for a MIG instance.
	UUID  string
	Model string
	// MIGUUID, MIGInstance and MIGProfile name a MIG instance (its own
	// UUID, GPU instance ID and profile, e.g. "1g.10gb"); MIGUUID is ""
	// for a whole GPU.
	MIGUUID     string
	MIGInstance int
	MIGProfile  string
}

// HolderID is the ID that the kubelet's pod-resources API gives the
// device: the MIG instance's UUID, else the GPU's.
func (d Device) HolderID() string {
	if d.MIGUUID != "" {
		return d.MIGUUID
	}
	return d.UUID
}

// ProcessSample is one process's use of one device over a sampling
// interval, as NVML gives it.
type ProcessSample struct {
	PID uint32
	// SMActive and MemActive are the mean shares of the interval, 0..1,
	// in which the process used the SMs and the memory interface: unknown
	// where NVML has no per-process utilisation (a MIG instance) or no
	// sample of the process.
	SMActive, MemActive usage.Amount
	// FBUsedMiB is the framebuffer the process held when the running
	// processes were listed: 0 for a process that had exited by then,
	// unknown where the list could not be read.
	FBUsedMiB usage.Amount
}

// DeviceSample is what NVML said of one device over an interval.
type DeviceSample struct {
	Device    Device
	Processes []ProcessSample
	// ActivityMeasured says NVML gave per-process utilisation for the
	// device (it does not on a MIG instance): without it every
	// container's SM and memory activity is unknown, not 0.
	ActivityMeasured bool
}

// Pod is one pod of the node, from the API server: its name and its
// containers' names by runtime ID (the ID without "containerd://").
type Pod struct {
	Namespace, Name string
	Containers      map[string]string
}

// Holder is a container that the kubelet allocated a device to, as its
// pod-resources API lists it.
type Holder struct {
	Namespace, Pod, Container string
}

// HolderKey is the device ID under which Attribute looks up holders: the
// pod-resources ID without the "::N" replica suffix that time-slicing
// and MPS add to a GPU's UUID.
func HolderKey(deviceID string) string {
	if i := strings.Index(deviceID, "::"); i >= 0 {
		return deviceID[:i]
	}
	return deviceID
}

// Node is what Attribute joins the samples with: each process's cgroup
// (by PID; a PID missing is unresolved), the node's pods by UID, and the
// holders of each device by HolderKey.
type Node struct {
	Cgroups map[uint32]CgroupRef
	Pods    map[string]Pod
	Holders map[string][]Holder
}

// MaxOwnersPerDevice bounds the series one device gives: the containers
// that hold it are always kept, and at most this many containers in all.
// Processes of the containers left out count as unattributed.
const MaxOwnersPerDevice = 32

// PodFigures is one container's use of one device over an interval: the
// sums over its processes. A container that holds the device with no
// process on it used nothing: measured 0.
type PodFigures struct {
	Device Device
	Owner  usage.Owner
	// SMActive and MemActive are ratios 0..1 of the whole device; unknown
	// where NVML gave no per-process utilisation.
	SMActive, MemActive usage.Amount
	FBUsedMiB           usage.Amount
	Processes           int
	// Holds says the kubelet allocated the device to the container; a
	// container that uses a device it does not hold (NVIDIA_VISIBLE_DEVICES
	// set by hand, a privileged pod) is kept, marked false.
	Holds bool
}

// DeviceFigures is one device's coverage over an interval.
type DeviceFigures struct {
	Device Device
	// Coverage is the share, 0..1, of the device's per-process SM
	// activity (or, with no SM activity, of its processes' framebuffer)
	// that went to containers holding it; unknown when nothing ran.
	Coverage usage.Amount
	// Processes and Unattributed count the device's processes and those
	// not attributed to a container holding it (host processes,
	// processes that exited before their cgroup was read, containers of
	// pods not yet listed, other containers).
	Processes, Unattributed int
}

// Attribution is one interval's figures, in the order of devices
// (physical index, MIG instance) and owners.
type Attribution struct {
	Pods    []PodFigures
	Devices []DeviceFigures
}

// Attribute joins each device's processes to the containers they run in,
// sums them per container, gives every holder of the device its figures
// (0 without a process) and the device its coverage.
func Attribute(samples []DeviceSample, node Node) Attribution {
	var out Attribution
	for _, s := range samples {
		pods, dev := attributeDevice(s, node)
		out.Pods = append(out.Pods, pods...)
		out.Devices = append(out.Devices, dev)
	}
	slices.SortStableFunc(out.Devices, func(x, y DeviceFigures) int { return compareDevices(x.Device, y.Device) })
	slices.SortStableFunc(out.Pods, func(x, y PodFigures) int {
		if c := compareDevices(x.Device, y.Device); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(x.Owner.Namespace, y.Owner.Namespace), cmp.Compare(x.Owner.Pod, y.Owner.Pod), cmp.Compare(x.Owner.Container, y.Owner.Container))
	})
	return out
}

func compareDevices(x, y Device) int {
	return cmp.Or(cmp.Compare(x.Index, y.Index), cmp.Compare(x.MIGInstance, y.MIGInstance), cmp.Compare(x.UUID, y.UUID), cmp.Compare(x.MIGUUID, y.MIGUUID))
}

// deviceSums accumulates one device's figures per owner.
type deviceSums struct {
	byOwner map[usage.Owner]*PodFigures
	order   []*PodFigures
	// total and held are SM activity (and framebuffer) of all processes
	// and of those of holders.
	totalSM, heldSM, totalFB, heldFB float64
	smKnown                          bool
	// activity says the device has per-process utilisation.
	activity bool
}

func attributeDevice(s DeviceSample, node Node) ([]PodFigures, DeviceFigures) {
	sums := deviceSums{byOwner: map[usage.Owner]*PodFigures{}}
	dev := DeviceFigures{Device: s.Device, Processes: len(s.Processes)}
	sums.activity = s.ActivityMeasured
	holders := holderSet(s.Device, node, &sums)
	for _, p := range s.Processes {
		owner, ok := ownerOf(p.PID, node)
		sums.addTotal(p)
		if !ok {
			dev.Unattributed++
			continue
		}
		f := sums.byOwner[owner]
		if f == nil {
			if len(sums.order) >= MaxOwnersPerDevice {
				dev.Unattributed++
				continue
			}
			f = sums.owner(s.Device, owner, false)
		}
		f.add(p)
		if !holders[owner] {
			dev.Unattributed++
			continue
		}
		sums.addHeld(p)
	}
	dev.Coverage = sums.coverage()
	out := make([]PodFigures, len(sums.order))
	for i, f := range sums.order {
		out[i] = *f
	}
	return out, dev
}

// holderSet gives every holder of the device its zero figures and says
// which owners hold it.
func holderSet(d Device, node Node, sums *deviceSums) map[usage.Owner]bool {
	held := map[usage.Owner]bool{}
	for _, h := range node.Holders[d.HolderID()] {
		o := usage.Owner{Namespace: h.Namespace, Pod: h.Pod, Container: h.Container}
		if held[o] {
			continue
		}
		held[o] = true
		sums.owner(d, o, true)
	}
	return held
}

// ownerOf resolves a PID to its container through its cgroup and the
// node's pods; a container the pod does not list is the pod with no
// container name.
func ownerOf(pid uint32, node Node) (usage.Owner, bool) {
	ref, ok := node.Cgroups[pid]
	if !ok {
		return usage.Owner{}, false
	}
	pod, ok := node.Pods[ref.PodUID]
	if !ok {
		return usage.Owner{}, false
	}
	return usage.Owner{Namespace: pod.Namespace, Pod: pod.Name, Container: pod.Containers[ref.ContainerID]}, true
}

func (s *deviceSums) owner(d Device, o usage.Owner, holds bool) *PodFigures {
	f := &PodFigures{Device: d, Owner: o, Holds: holds, FBUsedMiB: usage.Known(0)}
	if s.activity {
		f.SMActive, f.MemActive = usage.Known(0), usage.Known(0)
	}
	s.byOwner[o] = f
	s.order = append(s.order, f)
	return f
}

// add sums a process into the container's figures; an unknown figure of
// the process makes the container's unknown.
func (f *PodFigures) add(p ProcessSample) {
	f.Processes++
	f.SMActive = addAmounts(f.SMActive, p.SMActive, 1)
	f.MemActive = addAmounts(f.MemActive, p.MemActive, 1)
	f.FBUsedMiB = addAmounts(f.FBUsedMiB, p.FBUsedMiB, -1)
}

// addAmounts adds b to a, unknown if either is, capped at limit when
// limit > 0 (processes of one container share the device's time).
func addAmounts(a, b usage.Amount, limit float64) usage.Amount {
	if !a.Known() || !b.Known() {
		return usage.Unknown
	}
	v := a.Value() + b.Value()
	if limit > 0 {
		v = min(v, limit)
	}
	return usage.Known(v)
}

func (s *deviceSums) addTotal(p ProcessSample) {
	if p.SMActive.Known() {
		s.totalSM += p.SMActive.Value()
		s.smKnown = true
	}
	s.totalFB += p.FBUsedMiB.Value()
}

func (s *deviceSums) addHeld(p ProcessSample) {
	s.heldSM += p.SMActive.Value()
	s.heldFB += p.FBUsedMiB.Value()
}

// coverage is the held share of SM activity, else of framebuffer.
func (s *deviceSums) coverage() usage.Amount {
	switch {
	case s.smKnown && s.totalSM > 0:
		return usage.Known(s.heldSM / s.totalSM)
	case s.totalFB > 0:
		return usage.Known(s.heldFB / s.totalFB)
	}
	return usage.Unknown
}
