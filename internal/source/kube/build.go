package kube

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// ReasonFailedScheduling is the reason of the kube-scheduler's events for a
// pod it could not place.
const ReasonFailedScheduling = "FailedScheduling"

// State is a cluster as read from Kubernetes.
type State struct {
	Snapshot *cluster.Snapshot
	// SchedulingFailures holds, by pod key ("namespace/name"), the
	// kube-scheduler's latest word on each pending pod it could not place.
	SchedulingFailures map[string]SchedulingFailure
	// Created holds, by pod key, when each pending pod was created, so
	// that an edge can say how long it has waited.
	Created map[string]time.Time
	// Warnings say what of the objects could not be represented, one line
	// each, naming the object.
	Warnings []string
}

// SchedulingFailure is the kube-scheduler's message for a pod it could not
// place, e.g. "0/12 nodes are available: 12 Insufficient nvidia.com/gpu.
// preemption: ...", from its FailedScheduling event or, when the event has
// expired, the pod's PodScheduled condition.
type SchedulingFailure struct {
	Message string
	Time    time.Time
}

// Build converts Kubernetes objects into a State. Pods that have finished
// are skipped, and pods bound to a node that is not listed are left out with
// a warning. events may hold any events; only FailedScheduling events of
// pending pods are used.
func Build(c *gpu.Catalogue, nodes []*corev1.Node, pods []*corev1.Pod, events []*corev1.Event) (*State, error) {
	return BuildDRA(c, nodes, pods, events, nil)
}

// BuildDRA is Build with the cluster's Dynamic Resource Allocation objects
// (nil: none): the GPUs that ResourceSlices offer join their nodes' GPUs,
// after the device plugin's, and pods get their claims, the GPU request the
// claims stand for and, once allocated, the devices they hold.
func BuildDRA(c *gpu.Catalogue, nodes []*corev1.Node, pods []*corev1.Pod, events []*corev1.Event, dra *DRAObjects) (*State, error) {
	st := &State{SchedulingFailures: map[string]SchedulingFailure{}, Created: map[string]time.Time{}}
	snapNodes := make([]*cluster.Node, 0, len(nodes))
	names := make(map[string]bool, len(nodes))
	pluginGPUs := make(map[string]int, len(nodes))
	for _, n := range nodes {
		sn, warnings := convertNode(n, c)
		snapNodes = append(snapNodes, sn)
		names[n.Name] = true
		pluginGPUs[n.Name] = len(sn.GPUs)
		st.Warnings = append(st.Warnings, warnings...)
	}
	view := readDRA(c, dra, pluginGPUs)
	st.Warnings = append(st.Warnings, view.warnings...)
	for _, sn := range snapNodes {
		if extra := view.gpus[sn.Name]; len(extra) > 0 {
			if len(sn.GPUs) > 0 {
				st.Warnings = append(st.Warnings, fmt.Sprintf("node %s: offers %d GPUs through the device plugin and %d through DRA ResourceSlices; gpupack counts both, which is right only if they are different GPUs", sn.Name, len(sn.GPUs), len(extra)))
			}
			sn.GPUs = append(sn.GPUs, extra...)
			for i := range sn.GPUs {
				sn.GPUs[i].Index = i
			}
		}
	}
	templates := map[string]*resourcev1.ResourceClaimTemplate{}
	if dra != nil {
		for _, t := range dra.Templates {
			templates[t.Namespace+"/"+t.Name] = t
		}
	}
	snapPods := make([]*cluster.Pod, 0, len(pods))
	pending := map[string]*corev1.Pod{}
	var failures []cluster.PodFailure
	for _, p := range pods {
		if f, ok := podFailure(p); ok && names[f.Node] {
			failures = append(failures, f)
		}
		if !holdsResources(p) {
			continue
		}
		if p.Spec.NodeName != "" && !names[p.Spec.NodeName] {
			st.Warnings = append(st.Warnings, fmt.Sprintf("pod %s/%s: bound to node %s, which was not listed; left out", p.Namespace, p.Name, p.Spec.NodeName))
			continue
		}
		sp, warnings := convertPod(p)
		warnings = append(warnings, view.podClaims(p, sp, templates)...)
		snapPods = append(snapPods, sp)
		st.Warnings = append(st.Warnings, warnings...)
		if p.Spec.NodeName == "" {
			pending[sp.Key()] = p
			st.Created[sp.Key()] = p.CreationTimestamp.UTC()
			if cond := scheduledCondition(p); cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				st.SchedulingFailures[sp.Key()] = SchedulingFailure{Message: cond.Message, Time: cond.LastTransitionTime.Time}
			}
		}
	}
	for _, e := range events {
		if e.Reason != ReasonFailedScheduling || e.InvolvedObject.Kind != "Pod" {
			continue
		}
		key := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		p, ok := pending[key]
		if !ok || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != p.UID) {
			continue
		}
		at := eventTime(e)
		if cur, ok := st.SchedulingFailures[key]; !ok || at.After(cur.Time) {
			st.SchedulingFailures[key] = SchedulingFailure{Message: e.Message, Time: at}
		}
	}
	snap, err := cluster.NewSnapshot(c, snapNodes, snapPods)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(failures, func(a, b cluster.PodFailure) int { return strings.Compare(a.Key(), b.Key()) })
	snap.Failures = failures
	st.Snapshot = snap
	return st, nil
}

// eventTime is when the event was last seen, whichever API wrote it.
func eventTime(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	for _, candidate := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if candidate.After(t) {
			t = candidate
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// ConvertNode converts one node, as Build does; the warnings say what of its
// GPUs could not be represented. For edges that hold one object at a time,
// such as the scheduler plugin's per-node state.
func ConvertNode(n *corev1.Node, c *gpu.Catalogue) (*cluster.Node, []string) {
	return convertNode(n, c)
}

// ConvertPod converts one pod's request, as Build does; the warnings say what
// of it could not be represented.
func ConvertPod(p *corev1.Pod) (*cluster.Pod, []string) {
	return convertPod(p)
}
