// Package wellknown holds gpupack's words on Kubernetes objects: every
// gpupack.io/* annotation and label, and the record formats written in
// them, so that the CLI, the webhook and the scheduler plugin (a module of
// its own, scheduler/) write and read them alike.
//
// wellknown is pure: it imports only package cluster, never client-go,
// net/http or a CLI library, so every package of both modules may import it.
package wellknown

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/cluster"
)

// Annotations on pods.
const (
	// AnnotationGPUMemory states the GPU memory (VRAM) a pod needs on each
	// of its GPUs, as a Kubernetes quantity ("10Gi"). gpupack counts it
	// against time-sliced GPUs, which do not partition VRAM, and keeps pods
	// off GPUs too small for it; the webhook sets it from the plan when it
	// moves a pod to a shared GPU.
	AnnotationGPUMemory = "gpupack.io/gpu-memory"
	// AnnotationGPUDevices records the GPUs, MIG slices and shares a bound
	// pod holds on its node, in FormatDevices' format. gpupack-scheduler
	// writes it on the Binding; every reader of a node's device state
	// (placement.RebuildNode, through the live loader and the plugin)
	// honours it.
	AnnotationGPUDevices = "gpupack.io/gpu-devices"
	// AnnotationAdmission records what the webhook changed on a pod
	// (admission.Changes, as JSON), so that anyone can see and undo it.
	AnnotationAdmission = "gpupack.io/admission"
)

// Labels.
const (
	// LabelPack opts a namespace in to the webhook, with value PackEnabled;
	// the MutatingWebhookConfiguration's namespace selector matches it.
	LabelPack = "gpupack.io/pack"
	// PackEnabled is LabelPack's value that opts a namespace in.
	PackEnabled = "enabled"
	// LabelPool names a node's pool, first of the pool labels that plan
	// groups nodes by.
	LabelPool = "gpupack.io/pool"
	// LabelRole names a pod's component within its workload, first of the
	// labels that plan groups pods by.
	LabelRole = "gpupack.io/role"
)

// What `gpupack apply` records on a node it changes, so that a rollback
// (by this run, a later one or a person) restores exactly what was there.
const (
	// AnnotationChangeSet is the hash of the change set being applied to
	// the node; it is removed when the change ends.
	AnnotationChangeSet = "gpupack.io/change-set"
	// AnnotationPreviousLabels holds, as a JSON object, the values the
	// change replaced of the labels it set; a label that was absent has
	// the value null.
	AnnotationPreviousLabels = "gpupack.io/previous-labels"
	// AnnotationCordoned is set (to the change set's hash) when apply
	// cordoned the node, so that only what apply fenced is unfenced.
	AnnotationCordoned = "gpupack.io/cordoned-by-change"
)

// TaintApply is the key of the device taint (effect NoSchedule) that
// apply puts on the DRA GPUs it changes, with the change set's hash as
// its value, so that the node's other GPUs keep scheduling.
const TaintApply = "gpupack.io/change"

// TaintMIGPending is the startup taint (effect NoSchedule) of the nodes
// that gpupack's Karpenter NodePools create with a mig-parted config
// label: no pod lands on a GPU that mig-manager has not partitioned yet.
// The apply controller removes it once the node's
// nvidia.com/mig.config.state is success.
const TaintMIGPending = "gpupack.io/mig-pending"

// TaintXID is the key of the device taint that plan's DeviceTaintRules put
// on a DRA GPU that reported an XID error marking it unhealthy; the
// taint's value is the XID.
const TaintXID = "gpupack.io/xid"

// FormatDevices writes devices in AnnotationGPUDevices' format: GPU
// indices in the node's GPU order, comma-separated, each followed by
// ":<slice>" for a MIG slice (its index in the GPU's MIG layout), e.g. "3",
// "0,1" or "2:4". Shares of time-sliced and MPS GPUs are counted per GPU,
// so a replica is recorded as its GPU.
func FormatDevices(devices []cluster.Device) string {
	parts := make([]string, len(devices))
	for i, d := range devices {
		parts[i] = strconv.Itoa(d.GPU)
		if d.Slice >= 0 {
			parts[i] += ":" + strconv.Itoa(d.Slice)
		}
	}
	return strings.Join(parts, ",")
}

// ParseDevices reads AnnotationGPUDevices' format; Milli and Memory are
// left zero, for placement to fill in.
func ParseDevices(s string) ([]cluster.Device, error) {
	var out []cluster.Device
	for part := range strings.SplitSeq(s, ",") {
		gpuText, sliceText, hasSlice := strings.Cut(strings.TrimSpace(part), ":")
		g, err := strconv.Atoi(gpuText)
		if err != nil || g < 0 {
			return nil, fmt.Errorf("%s=%q: GPU %q is not an index (want e.g. \"3\", \"0,1\" or \"2:4\")", AnnotationGPUDevices, s, gpuText)
		}
		d := cluster.Device{GPU: g, Slice: -1}
		if hasSlice {
			if d.Slice, err = strconv.Atoi(sliceText); err != nil || d.Slice < 0 {
				return nil, fmt.Errorf("%s=%q: MIG slice %q is not an index", AnnotationGPUDevices, s, sliceText)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// What `gpupack reclaim` reads and writes on workloads, pods and
// namespaces.
const (
	// LabelReclaim on a namespace with value ReclaimEnabled opts it in to
	// reclaim; on a namespace, owner or pod with value ReclaimNever it
	// exempts them.
	LabelReclaim   = "gpupack.io/reclaim"
	ReclaimEnabled = "enabled"
	ReclaimNever   = "never"
	// LabelWorkloadClass sets a workload's reclaim class (notebook,
	// inference or training) where its kind would say otherwise.
	LabelWorkloadClass = "gpupack.io/workload-class"
	// AnnotationReclaimNotice is the notice reclaim gives an owner before
	// acting (ReclaimNotice as JSON): the candidate's ID, its evidence and
	// the deadline after which it may act.
	AnnotationReclaimNotice = "gpupack.io/reclaim-notice"
	// AnnotationReclaimSnooze, set by the owner's team to an RFC 3339
	// time, keeps reclaim away until then.
	AnnotationReclaimSnooze = "gpupack.io/reclaim-snooze-until"
	// AnnotationReclaimed is the ledger record of the reclaim that paused
	// the owner (as JSON), so that restore finds what to put back even
	// without the ledger; restore removes it.
	AnnotationReclaimed = "gpupack.io/reclaimed"
)
