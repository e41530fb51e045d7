package kube

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/usage"
)

// ReasonPulled is the reason of the kubelet's events for an image it pulled
// for a container, or found present (pkg/kubelet/events.PulledImage).
const ReasonPulled = "Pulled"

// pulledSelector selects the kubelet's Pulled events about pods.
var pulledSelector = fields.Set{"reason": ReasonPulled, "involvedObject.kind": "Pod"}.AsSelector().String()

// The messages of the kubelet's Pulled events
// (pkg/kubelet/images/image_manager.go), after the quoted image:
//
//	Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.   (1.30 on)
//	Successfully pulled image %q in %v (%v including waiting)                          (1.28, 1.29)
//	Successfully pulled image %q in %v                                                 (before 1.28)
//	Container image %q already present on machine
//	Container image %q already present on machine and can be accessed by the pod      (1.33 on, KubeletEnsureSecretPulledImages)
const (
	pulledPrefix    = "Successfully pulled image "
	presentPrefix   = "Container image "
	presentSuffix   = " already present on machine"
	presentAccessed = presentSuffix + " and can be accessed by the pod"
	waitingSuffix   = " including waiting)"
	sizePrefix      = ". Image size: "
	sizeSuffix      = " bytes."
)

// ParsePulled reads the message of a kubelet's Pulled event: the image, and
// either the pull's times and the image's size or that the image was
// already present. The first duration is the pull without the wait in the
// kubelet's pull queue, the second includes it; kubelets before 1.28 state
// one duration, from the pull's request to its end, which counts as both.
// Kubelets before 1.30 state no size (SizeBytes 0). Container and At are
// the event's, not the message's: they are left zero. ok is false for any
// other message.
func ParsePulled(message string) (pull usage.ImagePull, ok bool) {
	if rest, found := strings.CutPrefix(message, presentPrefix); found {
		image, rest, found := cutQuoted(rest)
		if !found || rest != presentSuffix && rest != presentAccessed {
			return usage.ImagePull{}, false
		}
		return usage.ImagePull{Image: image, Present: true}, true
	}
	rest, found := strings.CutPrefix(message, pulledPrefix)
	if !found {
		return usage.ImagePull{}, false
	}
	image, rest, found := cutQuoted(rest)
	if !found {
		return usage.ImagePull{}, false
	}
	if rest, found = strings.CutPrefix(rest, " in "); !found {
		return usage.ImagePull{}, false
	}
	pull = usage.ImagePull{Image: image}
	pullText, rest, waited := strings.Cut(rest, " (")
	pullTime, found := parseSeconds(pullText)
	if !found {
		return usage.ImagePull{}, false
	}
	pull.PullSeconds, pull.WaitSeconds = pullTime, pullTime
	if !waited {
		return pull, true
	}
	waitText, rest, found := strings.Cut(rest, waitingSuffix)
	if !found {
		return usage.ImagePull{}, false
	}
	if pull.WaitSeconds, found = parseSeconds(waitText); !found {
		return usage.ImagePull{}, false
	}
	if rest == "" {
		return pull, true
	}
	sizeText, found := strings.CutPrefix(rest, sizePrefix)
	if !found {
		return usage.ImagePull{}, false
	}
	if sizeText, found = strings.CutSuffix(sizeText, sizeSuffix); !found {
		return usage.ImagePull{}, false
	}
	// The kubelet states a uint64; one beyond int64 is no real image.
	size, err := strconv.ParseUint(sizeText, 10, 64)
	if err != nil || size > math.MaxInt64 {
		return usage.ImagePull{}, false
	}
	pull.SizeBytes = int64(size)
	return pull, true
}

// cutQuoted cuts the Go-quoted string that s starts with, and returns it
// unquoted and what follows it.
func cutQuoted(s string) (unquoted, rest string, ok bool) {
	quoted, err := strconv.QuotedPrefix(s)
	if err != nil || !strings.HasPrefix(quoted, `"`) {
		return "", "", false
	}
	unquoted, err = strconv.Unquote(quoted)
	if err != nil {
		return "", "", false
	}
	return unquoted, s[len(quoted):], true
}

// parseSeconds reads a Go duration as the kubelet prints it ("1m2.5s",
// "850ms") in seconds; negative durations are refused.
func parseSeconds(s string) (float64, bool) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return d.Seconds(), true
}

// StorageSpec is what usage.ClassifyModelStorage reads of the pod: its
// volumes, and its containers and init containers with their mounts and
// whether they ask for a GPU (an NVIDIA GPU resource, IsGPUResource, or a
// resource claim). claimClass gives the storage class of a
// PersistentVolumeClaim of the pod's namespace by name ("" when not known);
// nil knows none. A generic ephemeral volume's class is its claim
// template's, else that of the claim made from the template.
func StorageSpec(pod *corev1.Pod, claimClass func(claim string) string) usage.PodStorageSpec {
	class := func(claim string) string {
		if claimClass == nil {
			return ""
		}
		return claimClass(claim)
	}
	var spec usage.PodStorageSpec
	for _, v := range pod.Spec.Volumes {
		pv := usage.PodVolume{Name: v.Name, Source: usage.VolumeOther}
		switch s := v.VolumeSource; {
		case s.EmptyDir != nil:
			pv.Source = usage.VolumeEmptyDir
			pv.Memory = s.EmptyDir.Medium == corev1.StorageMediumMemory
		case s.PersistentVolumeClaim != nil:
			pv.Source, pv.Detail = usage.VolumePVC, class(s.PersistentVolumeClaim.ClaimName)
		case s.Ephemeral != nil:
			pv.Source = usage.VolumeEphemeral
			if t := s.Ephemeral.VolumeClaimTemplate; t != nil && t.Spec.StorageClassName != nil {
				pv.Detail = *t.Spec.StorageClassName
			} else {
				// The claim's name is the pod's and the volume's
				// (k8s.io/component-helpers/storage/ephemeral).
				pv.Detail = class(pod.Name + "-" + v.Name)
			}
		case s.HostPath != nil:
			pv.Source, pv.Detail = usage.VolumeHostPath, s.HostPath.Path
		case s.Image != nil:
			pv.Source, pv.Detail = usage.VolumeImage, s.Image.Reference
		case s.CSI != nil:
			pv.Source, pv.Detail = usage.VolumeCSI, s.CSI.Driver
		}
		spec.Volumes = append(spec.Volumes, pv)
	}
	for _, group := range []struct {
		init       bool
		containers []corev1.Container
	}{{true, pod.Spec.InitContainers}, {false, pod.Spec.Containers}} {
		for i := range group.containers {
			c := &group.containers[i]
			cm := usage.ContainerMounts{Name: c.Name, Init: group.init, GPU: wantsGPU(c)}
			for _, m := range c.VolumeMounts {
				cm.Mounts = append(cm.Mounts, usage.Mount{Volume: m.Name, Path: m.MountPath, ReadOnly: m.ReadOnly})
			}
			spec.Containers = append(spec.Containers, cm)
		}
	}
	return spec
}

// wantsGPU reports whether the container asks for a GPU: a positive NVIDIA
// GPU resource in its requests or limits, or a resource claim.
func wantsGPU(c *corev1.Container) bool {
	if len(c.Resources.Claims) > 0 {
		return true
	}
	for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		for name, q := range list {
			if IsGPUResource(name) && q.Sign() > 0 {
				return true
			}
		}
	}
	return false
}

// podWantsGPU reports whether any container or init container of the pod
// asks for a GPU.
func podWantsGPU(p *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if wantsGPU(&cs[i]) {
				return true
			}
		}
	}
	return false
}

// PodStartup reads the pod's start-up from the pod and the kubelet's Pulled
// events about it: created (creationTimestamp), scheduled (the PodScheduled
// condition's last transition to True), containers started (the latest
// start of its app containers; zero while one has not started),
// containers ready and ready (those conditions' transitions to True), the
// image pulls (events whose message ParsePulled does not read are
// skipped), and where its model weights come from (usage.ClassifyModelStorage
// of StorageSpec). Workload is the pod's owner as plan.WorkloadKey names it.
func PodStartup(pod *corev1.Pod, pulled []corev1.Event, claimClass func(claim string) string) usage.PodEvents {
	key := plan.WorkloadKey(&cluster.Pod{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels})
	out := usage.PodEvents{
		Namespace: pod.Namespace,
		Pod:       pod.Name,
		Workload:  strings.TrimPrefix(key, pod.Namespace+"/"),
		Created:   pod.CreationTimestamp.Time,
		Storage:   usage.ClassifyModelStorage(StorageSpec(pod, claimClass)),
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodScheduled:
			out.Scheduled = c.LastTransitionTime.Time
		case corev1.ContainersReady:
			out.ContainersReady = c.LastTransitionTime.Time
		case corev1.PodReady:
			out.Ready = c.LastTransitionTime.Time
		}
	}
	out.ContainersStarted = containersStarted(pod)
	for i := range pulled {
		e := &pulled[i]
		pull, ok := ParsePulled(e.Message)
		if !ok {
			continue
		}
		pull.Container = containerOf(e.InvolvedObject.FieldPath)
		pull.At = pulledAt(e)
		out.ImagePulls = append(out.ImagePulls, pull)
	}
	slices.SortStableFunc(out.ImagePulls, func(a, b usage.ImagePull) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Container, b.Container)
	})
	return out
}

// containersStarted is when the last of the pod's app containers started
// (running, else terminated), or zero while one has not, or when one has
// restarted (the kubelet states only a container's latest start).
func containersStarted(pod *corev1.Pod) time.Time {
	started := map[string]time.Time{}
	for _, s := range pod.Status.ContainerStatuses {
		if s.RestartCount > 0 {
			// The kubelet keeps only the latest start; the first is
			// lost, and the first GPU sample stands in for it.
			return time.Time{}
		}
		switch {
		case s.State.Running != nil:
			started[s.Name] = s.State.Running.StartedAt.Time
		case s.State.Terminated != nil:
			started[s.Name] = s.State.Terminated.StartedAt.Time
		}
	}
	var last time.Time
	for _, c := range pod.Spec.Containers {
		t := started[c.Name]
		if t.IsZero() {
			return time.Time{}
		}
		if t.After(last) {
			last = t
		}
	}
	return last
}

// containerOf is the container that an event's involvedObject.fieldPath
// names, spec.containers{NAME} or spec.initContainers{NAME}; "" for any
// other.
func containerOf(fieldPath string) string {
	for _, prefix := range []string{"spec.containers{", "spec.initContainers{"} {
		if name, ok := strings.CutPrefix(fieldPath, prefix); ok {
			if name, ok = strings.CutSuffix(name, "}"); ok {
				return name
			}
		}
	}
	return ""
}

// pulledAt is when the kubelet says a Pulled event last happened: its
// lastTimestamp, else its eventTime (events.k8s.io writers), else its
// firstTimestamp. Unlike eventTime it never takes the creationTimestamp,
// which is when the event reached the apiserver, after the recorder's
// batching.
func pulledAt(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// LoadStartup reads the start-up of the cluster's bound GPU pods (PodStartup
// of each): it lists the pods, the kubelet's Pulled events and the
// PersistentVolumeClaims (for their storage classes), in pages, and keeps
// only the GPU pods and their events. A reader that may not list events or
// claims gets the start-ups without image pulls or storage classes, and a
// warning naming the permission to grant; one that may not list pods, an
// error that says so. The result is sorted by namespace and pod.
func LoadStartup(ctx context.Context, client kubernetes.Interface) ([]usage.PodEvents, []string, error) {
	core := client.CoreV1()
	type claimsResult struct {
		classes map[string]string // namespace/name -> storage class
		err     error
	}
	claimsDone := make(chan claimsResult, 1)
	go func() {
		classes := map[string]string{}
		err := listEach(ctx, "persistentvolumeclaims", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return core.PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
		}, metav1.ListOptions{}, func(c *corev1.PersistentVolumeClaim) {
			classes[c.Namespace+"/"+c.Name] = storageClass(c)
		})
		claimsDone <- claimsResult{classes, err}
	}()

	// A pod is kept by key with its UID, so that the events of an earlier
	// pod of the same name are not taken for its own.
	pods := map[string]*corev1.Pod{}
	err := listEach(ctx, "pods", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return core.Pods(metav1.NamespaceAll).List(ctx, opts)
	}, metav1.ListOptions{}, func(p *corev1.Pod) {
		if p.Spec.NodeName != "" && podWantsGPU(p) {
			kept := *p // not the page it came in
			pods[p.Namespace+"/"+p.Name] = &kept
		}
	})
	if err != nil {
		<-claimsDone
		return nil, nil, explain(err, server(client))
	}

	var warnings []string
	events := map[string][]corev1.Event{}
	err = listEach(ctx, "events", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return core.Events(metav1.NamespaceAll).List(ctx, opts)
	}, metav1.ListOptions{FieldSelector: pulledSelector}, func(e *corev1.Event) {
		key := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if pulledOf(e, pods[key]) {
			events[key] = append(events[key], *e)
		}
	})
	if w, err := startupListWarning(err, "events", "image pulls are left out of the start-up phases"); err != nil {
		<-claimsDone
		return nil, nil, explain(err, server(client))
	} else if w != "" {
		warnings = append(warnings, w)
	}

	claims := <-claimsDone
	if w, err := startupListWarning(claims.err, "persistentvolumeclaims", "the storage classes of claims that hold model weights are not known"); err != nil {
		return nil, nil, explain(err, server(client))
	} else if w != "" {
		warnings = append(warnings, w)
	}

	return startups(pods, events, func(namespace, claim string) string { return claims.classes[namespace+"/"+claim] }), warnings, nil
}

// startups is PodStartup of each pod (by key), with its Pulled events (by
// the pod's key) and the storage classes of claims by namespace and name,
// sorted by namespace and pod.
func startups(pods map[string]*corev1.Pod, events map[string][]corev1.Event, class func(namespace, claim string) string) []usage.PodEvents {
	keys := make([]string, 0, len(pods))
	for key := range pods {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	out := make([]usage.PodEvents, 0, len(keys))
	for _, key := range keys {
		p := pods[key]
		out = append(out, PodStartup(p, events[key], func(claim string) string { return class(p.Namespace, claim) }))
	}
	return out
}

// pulledOf reports whether e is a Pulled event of pod p (by UID where the
// event names one, so that an earlier pod of the same name lends none).
func pulledOf(e *corev1.Event, p *corev1.Pod) bool {
	return p != nil && e.Reason == ReasonPulled && (e.InvolvedObject.UID == "" || e.InvolvedObject.UID == p.UID)
}

// startupListWarning turns a forbidden list of an optional resource into a
// warning naming the permission to grant and what is missing without it;
// any other error is returned.
func startupListWarning(err error, resource, without string) (string, error) {
	if err == nil {
		return "", nil
	}
	if !apierrors.IsForbidden(err) {
		return "", err
	}
	return fmt.Sprintf("cannot list %s, so %s: grant verb \"list\" on resource %q (API group \"\", cluster scope), as deploy/rbac.yaml does: %v", resource, without, resource, err), nil
}

// storageClass is the claim's storage class: spec.storageClassName, else
// the beta annotation that older claims carry.
func storageClass(c *corev1.PersistentVolumeClaim) string {
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return c.Annotations[corev1.BetaStorageClassAnnotation]
}
