package gpusim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/usage"
)

// AgentView is what `gpupack agent` would read on node at t after the
// scenario's start: NVML's samples of each device of the node, with one
// process per pod holding it (its SM activity the pod's own, its
// framebuffer the pod's memory; NVML has no per-process activity on a
// MIG instance), and the cgroups, pods and device holders that name
// them. A process's PID is 1000 plus the pod's index in the scenario.
func (s *Scenario) AgentView(node string, t time.Duration) ([]agent.DeviceSample, agent.Node) {
	view := agent.Node{Cgroups: map[uint32]agent.CgroupRef{}, Pods: map[string]agent.Pod{}, Holders: map[string][]agent.Holder{}}
	var samples []agent.DeviceSample
	for _, d := range s.devices() {
		if d.Node != node {
			continue
		}
		ad := agentDevice(d)
		sample := agent.DeviceSample{Device: ad, ActivityMeasured: d.MIGInstance == ""}
		for i := range s.Pods {
			p := &s.Pods[i]
			if !s.holds(p, d, t) {
				continue
			}
			pid, uid, cid := uint32(1000+i), podUID(i), fmt.Sprintf("%064x", i+1)
			view.Cgroups[pid] = agent.CgroupRef{PodUID: uid, ContainerID: cid}
			view.Pods[uid] = agent.Pod{Namespace: p.Namespace, Name: p.Name, Containers: map[string]string{cid: p.container()}}
			view.Holders[ad.HolderID()] = append(view.Holders[ad.HolderID()], agent.Holder{Namespace: p.Namespace, Pod: p.Name, Container: p.container()})
			proc := agent.ProcessSample{PID: pid, SMActive: usage.Unknown, MemActive: usage.Unknown, FBUsedMiB: usage.Known(p.MemoryMiB)}
			if sample.ActivityMeasured {
				proc.SMActive, proc.MemActive = usage.Known(p.Activity.level(t-p.From.D())), usage.Known(p.DRAM)
			}
			sample.Processes = append(sample.Processes, proc)
		}
		samples = append(samples, sample)
	}
	return samples, view
}

// agentDevice is the device as NVML names it: the GPU's index and UUID,
// and a MIG instance's own UUID.
func agentDevice(d usage.Device) agent.Device {
	index, _ := strconv.Atoi(d.GPU)
	ad := agent.Device{Index: index, UUID: d.UUID, Model: d.Model}
	if d.MIGInstance != "" {
		ad.MIGUUID = "MIG-" + d.UUID[len("GPU-"):] + "-" + d.MIGInstance
		ad.MIGInstance, _ = strconv.Atoi(d.MIGInstance)
		ad.MIGProfile = d.MIGProfile
	}
	return ad
}

// podUID is the UID of the scenario's pod i.
func podUID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i+1) }
