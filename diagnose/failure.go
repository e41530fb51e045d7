package diagnose

import (
	"fmt"
	"strings"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// The causes of the pods that failed after scheduling (Report.Failures):
// the scheduler placed them, and then the node did not run them. They come
// after every cause of a pending pod, which they never are.
const (
	// Rejected: the kubelet refused to admit the pod (its phase is Failed,
	// and it is not tried again).
	Rejected Cause = "rejected"
	// Crashing: a container of the pod keeps terminating on its GPU.
	Crashing Cause = "crashing"
)

// Recreate deletes a failed pod, so that its controller makes a new one
// that the scheduler places again: Commands.
const Recreate RemedyKind = "recreate"

// FailureFacts is the evidence of a rejected or crashing finding: what
// the pod's status says (the kubelet's or the container's words, as
// written, and what they mean), the GPUs of its node, and what the usage
// facts add.
type FailureFacts struct {
	cluster.FailureCause
	Node      string `json:"node"`
	Container string `json:"container,omitempty"`
	Reason    string `json:"reason"`
	Message   string `json:"message,omitempty"`
	Restarts  int32  `json:"restarts,omitempty"`
	ExitCode  *int32 `json:"exitCode,omitempty"`
	// GPU is the pod's GPU, or the node's first one, where the node has
	// any.
	GPU *FailedGPU `json:"gpu,omitempty"`
	// Unhealthy are the node's GPUs that reported an XID marking them
	// unhealthy in the usage window.
	Unhealthy []usage.UnhealthyGPU `json:"unhealthy,omitempty"`
	// VRAMUsedP95 is the pod's measured VRAM p95; nil when not measured.
	VRAMUsedP95 *gpu.MiB `json:"vramUsedP95MiB,omitempty"`
	// Stated is the GPU memory the pod states it needs (the annotation
	// gpupack.io/gpu-memory, or its request of GPU memory); nil when it
	// states none.
	Stated *gpu.MiB `json:"statedMiB,omitempty"`
}

// FailedGPU describes the GPU a failed pod ran on (or would have).
type FailedGPU struct {
	Model    string  `json:"model"`
	Memory   gpu.MiB `json:"memoryMiB"`
	Sharing  string  `json:"sharing"`
	Replicas int     `json:"replicas,omitempty"`
}

// failureFindings explains each pod of the snapshot that failed after
// scheduling.
func (e *engine) failureFindings() []Finding {
	var out []Finding
	for _, pf := range e.s.Failures {
		out = append(out, e.failureFinding(pf))
	}
	return out
}

func (e *engine) failureFinding(pf cluster.PodFailure) Finding {
	facts := e.failureFacts(pf)
	f := Finding{Pod: pf.Key(), Request: e.failedRequest(pf), Fit: []NodeGroup{}, Evidence: Evidence{Failure: facts}}
	if pf.Rejected {
		f.Cause = Rejected
		f.StockNote = fmt.Sprintf("the scheduler bound the pod to node %s; the kubelet there rejected it (%s), and does not try it again", pf.Node, pf.Reason)
	} else {
		f.Cause = Crashing
		f.StockNote = fmt.Sprintf("the scheduler bound the pod to node %s, where its container %s has restarted %d times", pf.Node, pf.Container, pf.Restarts)
	}
	switch facts.Kind {
	case cluster.SharedRequestRefused:
		fixSharedRequest(&f, pf, facts)
	case cluster.DevicesUnavailable:
		fixDevicesUnavailable(&f, pf, facts)
	case cluster.AdmissionRejected:
		f.addAdvice(fmt.Sprintf("the kubelet on node %s refused the pod's GPUs: %s; fix the device plugin there", pf.Node, facts.Evidence),
			"the message is the device plugin's own, which gpupack does not read further")
		f.addFix(recreateSentence(pf), recreateRemedy(pf))
	case cluster.GPUOutOfMemory:
		fixOutOfMemory(&f, pf, facts)
	case cluster.GPUFault:
		fixFault(&f, pf, facts)
	default:
		fixUnknownCrash(&f, pf)
	}
	return f
}

// failureFacts gathers the evidence of one failure.
func (e *engine) failureFacts(pf cluster.PodFailure) *FailureFacts {
	facts := &FailureFacts{FailureCause: pf.Cause(), Node: pf.Node, Container: pf.Container, Reason: pf.Reason, Message: pf.Message,
		Restarts: pf.Restarts, ExitCode: pf.ExitCode}
	if g := e.failedGPU(pf); g != nil {
		facts.GPU = &FailedGPU{Model: g.Model.Name, Memory: g.Memory, Sharing: g.Sharing.String(), Replicas: g.Replicas}
	}
	for _, u := range e.usage.Unhealthy {
		if u.Node == pf.Node {
			facts.Unhealthy = append(facts.Unhealthy, u)
		}
	}
	for _, p := range e.s.Pods {
		if p.Key() == pf.Key() && p.GPU.Memory > 0 {
			m := p.GPU.Memory
			facts.Stated = &m
		}
	}
	if pu, ok := e.usage.Pods[pf.Key()]; ok && pu.VRAMMeasured {
		v := pu.VRAMUsedP95
		facts.VRAMUsedP95 = &v
	}
	return facts
}

// failedGPU is the GPU the pod holds (its first device) where the
// snapshot has the pod bound, else the node's first GPU; nil for a node
// without GPUs.
func (e *engine) failedGPU(pf cluster.PodFailure) *cluster.GPU {
	n, ok := e.s.Node(pf.Node)
	if !ok || len(n.GPUs) == 0 {
		return nil
	}
	for _, p := range e.s.Pods {
		if p.Key() == pf.Key() && len(p.Devices) > 0 && p.Devices[0].GPU < len(n.GPUs) {
			return &n.GPUs[p.Devices[0].GPU]
		}
	}
	return &n.GPUs[0]
}

// failedRequest is the pod's GPU request as pending pods show it, where
// the snapshot holds the pod, else as its failure gives it.
func (e *engine) failedRequest(pf cluster.PodFailure) string {
	for _, p := range e.s.Pods {
		if p.Key() == pf.Key() {
			return p.GPU.String()
		}
	}
	if pf.Count == 0 {
		return "no GPU"
	}
	return fmt.Sprintf("%d %s", pf.Count, pf.Resource)
}

func fixSharedRequest(f *Finding, pf cluster.PodFailure, facts *FailureFacts) {
	shared := "shared GPU"
	if g := facts.GPU; g != nil {
		shared = fmt.Sprintf("%s (%s, %d replicas)", g.Model, g.Sharing, g.Replicas)
	}
	f.addFix(fmt.Sprintf("ask for 1 %s instead of %d: on node %s each is a replica of one %s, so %d replicas give no more memory or compute than 1, and NVIDIA's device plugin there refuses more than one (failRequestsGreaterThanOne)",
		pf.Resource, facts.Requested, pf.Node, shared, facts.Requested), requestRemedy(pf, 1))
	if facts.GPU == nil || facts.GPU.Sharing != cluster.MPS.String() {
		f.addAdvice(fmt.Sprintf("or, instead, turn failRequestsGreaterThanOne off in the time-slicing config of node %s's device plugin (sharing.timeSlicing.failRequestsGreaterThanOne: false): the pod then starts with %d replicas, which are still time slices of one GPU", pf.Node, facts.Requested),
			"the device plugin's config is the node pool's, shared by every pod there; under MPS it refuses more than one replica whatever the setting says")
	}
	f.addFix(recreateSentence(pf), recreateRemedy(pf))
}

func fixDevicesUnavailable(f *Finding, pf cluster.PodFailure, facts *FailureFacts) {
	have := "too few healthy"
	if facts.Available != nil {
		have = fmt.Sprintf("%d healthy", *facts.Available)
	}
	sentence := fmt.Sprintf("node %s had %s %s for the %d the pod asks (a GPU went unhealthy, or the device plugin re-registered, after the scheduler counted it): cordon the node and have its GPUs checked (nvidia-smi, DCGM diagnostics)", pf.Node, have, pf.Resource, pf.Count)
	if len(facts.Unhealthy) > 0 {
		sentence += fmt.Sprintf("; GPU %s there reported XID %d", facts.Unhealthy[0].UUID, facts.Unhealthy[0].XID)
	}
	f.addFix(sentence, cordonRemedy(pf.Node))
	f.addFix(recreateSentence(pf), recreateRemedy(pf))
}

func fixOutOfMemory(f *Finding, pf cluster.PodFailure, facts *FailureFacts) {
	if strings.Contains(strings.ToLower(facts.Evidence), "cache blocks") {
		f.addAdvice("vLLM found no memory left for its KV cache: raise --gpu-memory-utilization (the share of the GPU it takes, 0.9 by default) if the GPU is its own, or lower --max-model-len",
			"the engine's arguments are the workload's, which gpupack does not hold")
	}
	g := facts.GPU
	switch {
	case g == nil:
		f.addAdvice(fmt.Sprintf("container %s ran out of GPU memory: give it a GPU with more memory, or lower its batch size, sequence length or precision", pf.Container), adviceHardware)
	case g.Sharing == cluster.MPS.String() && g.Replicas > 1:
		f.addAdvice(fmt.Sprintf("the %s on node %s is shared by MPS among %d clients, each limited to %d MiB: container %s needs more than its share; give it a whole GPU or a MIG slice that holds it, or have the pool's MPS config serve fewer clients per GPU",
			g.Model, pf.Node, g.Replicas, g.Memory/gpu.MiB(g.Replicas), pf.Container), adviceSharing)
	case g.Replicas > 1 && facts.Stated != nil && facts.VRAMUsedP95 != nil && *facts.VRAMUsedP95 > *facts.Stated:
		need := *facts.VRAMUsedP95
		f.addFix(fmt.Sprintf("the %s on node %s is time-sliced into %d replicas, which do not partition its %d MiB, and the pod states it needs %d MiB (gpupack.io/gpu-memory) but used %d MiB at p95: container %s ran out while its neighbours held memory; state %d MiB so that packing counts what it uses",
			g.Model, pf.Node, g.Replicas, g.Memory, *facts.Stated, need, pf.Container, need), memoryAnnotationRemedy(pf, need))
	case g.Replicas > 1:
		f.addAdvice(fmt.Sprintf("the %s on node %s is time-sliced into %d replicas, which do not partition its %d MiB: container %s ran out while its neighbours held memory; state the pod's need with the annotation gpupack.io/gpu-memory so that gpupack-scheduler counts it, or give it a whole GPU or a MIG slice that holds it",
			g.Model, pf.Node, g.Replicas, g.Memory, pf.Container), adviceSharing)
	default:
		f.addAdvice(fmt.Sprintf("container %s needs more than the %d MiB of its %s on node %s: give it a GPU or MIG slice with more memory (`gpupack vram` says which hold its model), or lower its batch size, sequence length or precision",
			pf.Container, g.Memory, g.Model, pf.Node), adviceHardware)
	}
}

func fixFault(f *Finding, pf cluster.PodFailure, facts *FailureFacts) {
	if facts.Application {
		f.addAdvice(fmt.Sprintf("container %s's own GPU kernels fault (%s): the GPU is healthy, so moving the pod does not help; run it with CUDA_LAUNCH_BLOCKING=1 to find the kernel", pf.Container, facts.Evidence),
			"the fault is in the workload's code or libraries")
		return
	}
	xid := facts.XID
	if xid == 0 && len(facts.Unhealthy) > 0 {
		xid = facts.Unhealthy[0].XID
	}
	which := "the GPU"
	if xid != 0 {
		which = fmt.Sprintf("the GPU (XID %d)", xid)
	}
	f.addFix(fmt.Sprintf("%s of node %s failed under container %s (%s): cordon the node and have the GPU checked (nvidia-smi -q, DCGM diagnostics, a reset or a replacement)", which, pf.Node, pf.Container, facts.Evidence), cordonRemedy(pf.Node))
	f.addFix(recreateSentence(pf), recreateRemedy(pf))
}

func fixUnknownCrash(f *Finding, pf cluster.PodFailure) {
	code := ""
	if pf.ExitCode != nil {
		code = fmt.Sprintf(", exit code %d", *pf.ExitCode)
	}
	body := []patchOp{{Op: "add", Path: fmt.Sprintf("/spec/containers/%d/terminationMessagePolicy", pf.ContainerIndex), Value: "FallbackToLogsOnError"}}
	f.addFix(fmt.Sprintf("container %s keeps terminating (%s%s) and its termination message does not say why: set its terminationMessagePolicy to FallbackToLogsOnError, so that its status keeps the last lines of its log, where a CUDA out-of-memory or XID error shows", pf.Container, pf.Reason, code),
		Remedy{Kind: PodSpec, Targets: []Object{{Kind: "Pod", Namespace: pf.Namespace, Name: pf.Name}}, Patch: patchOf(JSONPatch, body), Note: templateNote})
}

// templateNote is the note of a change to a pod's containers, which the
// API does not let change once the pod exists.
const templateNote = "a pod's containers cannot change once it exists: apply this to the pod template of the workload that made it (/spec/template/spec/...), which then makes new pods; a bare pod is deleted and created again with it"

// requestRemedy sets the GPU count of the failure's container, limits and
// requests alike (the apiserver fills requests from limits, and
// extended resources need the two equal).
func requestRemedy(pf cluster.PodFailure, count int64) Remedy {
	res := pointerEscape.Replace(pf.Resource)
	value := fmt.Sprint(count)
	base := fmt.Sprintf("/spec/containers/%d/resources", pf.ContainerIndex)
	body := []patchOp{{Op: "add", Path: base + "/limits/" + res, Value: value}, {Op: "add", Path: base + "/requests/" + res, Value: value}}
	return Remedy{Kind: PodSpec, Targets: []Object{{Kind: "Pod", Namespace: pf.Namespace, Name: pf.Name}}, Patch: patchOf(JSONPatch, body), Note: templateNote}
}

// memoryAnnotationRemedy states the pod's GPU memory need with the
// annotation gpupack.io/gpu-memory, which a running pod may change.
func memoryAnnotationRemedy(pf cluster.PodFailure, need gpu.MiB) Remedy {
	p := &cluster.Pod{Namespace: pf.Namespace, Name: pf.Name}
	body := []patchOp{{Op: "add", Path: "/metadata/annotations/" + pointerEscape.Replace(wellknown.AnnotationGPUMemory), Value: fmt.Sprintf("%dMi", need)}}
	r := Remedy{Kind: PodSpec, Targets: []Object{podObject(p)}, Patch: patchOf(JSONPatch, body),
		Note: "an annotation may change on a running pod, and gpupack-scheduler and plan read it from then on; put it in the workload's pod template too, or its next pods state the old need"}
	r.Commands = []string{kubectlPatch(p, r.Patch)}
	return r
}

func recreateSentence(pf cluster.PodFailure) string {
	if pf.Rejected {
		return fmt.Sprintf("then delete the failed pod %s: the kubelet does not admit a rejected pod again, and its controller makes a new one", pf.Key())
	}
	return fmt.Sprintf("then delete the pod %s, so that its controller makes a new one that the scheduler places on another node", pf.Key())
}

func recreateRemedy(pf cluster.PodFailure) Remedy {
	return Remedy{Kind: Recreate, Targets: []Object{{Kind: "Pod", Namespace: pf.Namespace, Name: pf.Name}},
		Commands: []string{commandLine("kubectl", "delete", "pod", "-n", pf.Namespace, pf.Name)},
		Note:     "a pod no controller owns does not come back: create it again from its manifest"}
}

func cordonRemedy(node string) Remedy {
	return Remedy{Kind: NodeChange, Targets: []Object{nodeObject(node)}, Commands: []string{commandLine("kubectl", "cordon", node)},
		Note: "cordoning keeps new pods off the node; the pods running there stay until drained (kubectl drain)"}
}
