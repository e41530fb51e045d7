// Package kube is the actuator that applies change sets to a Kubernetes
// cluster (change.Actuator): it reads nodes and their pods, patches node
// labels, annotations and spec.unschedulable, evicts pods through the
// Eviction API only (never a delete), merges configs into the ConfigMaps
// that mig-manager and the device plugin read, taints DRA devices with
// DeviceTaintRules, and records Events on nodes.
//
// Its writes need exactly these permissions (the chart's apply role):
// nodes get/list/patch, pods list, pods/eviction create,
// poddisruptionbudgets list, configmaps get/create/update in the GPU
// operator's namespace, devicetaintrules create/list/delete, events
// create.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	source "github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/plan"
)

// ConfigMapRef names a ConfigMap and the key of its data a config file
// lives in.
type ConfigMapRef struct {
	Namespace, Name, Key string
}

// Actuator applies change sets through a clientset.
type Actuator struct {
	Client    kubernetes.Interface
	Catalogue *gpu.Catalogue
	// MIGParted is the ConfigMap mig-manager reads its configs from (the
	// GPU operator's migManager.config.name) and its key.
	MIGParted ConfigMapRef
	// DevicePlugin is the ConfigMap the device plugin reads its named
	// configs from (devicePlugin.config.name), a key per config.
	DevicePlugin ConfigMapRef
	// Component names the Events' source.
	Component string
}

var _ change.Actuator = (*Actuator)(nil)

// Node reads the node and the unfinished pods bound to it.
func (a *Actuator) Node(ctx context.Context, name string) (change.NodeNow, error) {
	n, err := a.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return change.NodeNow{}, fmt.Errorf("reading node %s: %w", name, err)
	}
	pods, err := a.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return change.NodeNow{}, fmt.Errorf("listing the pods of node %s: %w", name, err)
	}
	now := change.NodeNow{Labels: n.Labels, Annotations: n.Annotations, Unschedulable: n.Spec.Unschedulable, Allocatable: map[string]int64{}}
	for r, q := range n.Status.Allocatable {
		now.Allocatable[string(r)] = q.Value()
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		pn := change.PodNow{Key: cluster.PodKey{Namespace: p.Namespace, Name: p.Name}, UID: string(p.UID), Deleting: p.DeletionTimestamp != nil}
		if cp, _ := source.ConvertPod(p); cp != nil {
			pn.Resource, pn.Count = change.Resource(cp)
		}
		now.Pods = append(now.Pods, pn)
	}
	return now, nil
}

// PatchNode sends one JSON merge patch: null removes a label or
// annotation.
func (a *Actuator) PatchNode(ctx context.Context, name string, p change.NodePatch) error {
	meta := map[string]any{}
	if p.Labels != nil {
		meta["labels"] = p.Labels
	}
	if p.Annotations != nil {
		meta["annotations"] = p.Annotations
	}
	patch := map[string]any{"metadata": meta}
	if p.Unschedulable != nil {
		patch["spec"] = map[string]any{"unschedulable": *p.Unschedulable}
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := a.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: a.Component}); err != nil {
		return fmt.Errorf("patching node %s: %w", name, err)
	}
	return nil
}

// Evict creates an Eviction for the pod with this UID: the apiserver
// checks its PodDisruptionBudgets and refuses with 429 when they do not
// allow it now (change.ErrBudget). A pod already gone is no error.
func (a *Actuator) Evict(ctx context.Context, pod cluster.PodKey, uid string) error {
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: (*types.UID)(&uid)}},
	}
	err := a.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err) && uid != "":
		// A conflict on the UID precondition: the pod of that name is a
		// new one, so the one to stop is gone.
		return nil
	case apierrors.IsTooManyRequests(err):
		return fmt.Errorf("evicting %s: %w: %v", pod, change.ErrBudget, err)
	}
	return fmt.Errorf("evicting %s: %w", pod, err)
}

// Event records an Event on the node; an Event that cannot be written is
// not a reason to stop a change (the audit log has the record).
func (a *Actuator) Event(ctx context.Context, node string, warning bool, reason, message string) {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node), APIVersion: "v1"},
		Reason:         reason, Message: message, Type: typ,
		Source:         corev1.EventSource{Component: a.Component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "gpupack.io/apply", ReportingInstance: a.Component,
	}
	_, _ = a.Client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
}

// Snapshot reads the whole cluster.
func (a *Actuator) Snapshot(ctx context.Context) (*cluster.Snapshot, error) {
	st, err := source.Load(ctx, a.Client, a.Catalogue)
	if err != nil {
		return nil, err
	}
	return st.Snapshot, nil
}

// TaintDevices creates one DeviceTaintRule (NoSchedule, the apply taint
// with the hash as value) per device, labelled with the hash and node so
// that UntaintDevices finds them.
func (a *Actuator) TaintDevices(ctx context.Context, hash, node string, devices []cluster.DRADeviceID) error {
	for i, d := range devices {
		rule := &resourcev1.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpupack-change-%s-%s-%d", hash, node, i),
				Labels: map[string]string{wellknown.TaintApply: hash, "gpupack.io/node": node}},
			Spec: resourcev1.DeviceTaintRuleSpec{
				DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(d.Driver()), Pool: ptr.To(d.Pool()), Device: ptr.To(d.Device())},
				Taint:          resourcev1.DeviceTaint{Key: wellknown.TaintApply, Value: hash, Effect: resourcev1.DeviceTaintEffectNoSchedule},
			},
		}
		_, err := a.Client.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{FieldManager: a.Component})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("tainting DRA device %s: %w", d, err)
		}
	}
	return nil
}

// UntaintDevices deletes the DeviceTaintRules TaintDevices made.
func (a *Actuator) UntaintDevices(ctx context.Context, hash, node string) error {
	rules := a.Client.ResourceV1().DeviceTaintRules()
	list, err := rules.List(ctx, metav1.ListOptions{LabelSelector: wellknown.TaintApply + "=" + hash + ",gpupack.io/node=" + node})
	if err != nil {
		return fmt.Errorf("listing the DeviceTaintRules of change set %s: %w", hash, err)
	}
	var errs []error
	for _, r := range list.Items {
		if err := rules.Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// EnsureTaintRule creates the plan's DeviceTaintRule: a NoSchedule taint
// gpupack.io/xid=<XID> on one device. One of the same name and spec is
// left; one of the same name and another spec is an error.
func (a *Actuator) EnsureTaintRule(ctx context.Context, r plan.DeviceTaintRule) error {
	want := resourcev1.DeviceTaintRuleSpec{
		DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(r.Driver), Pool: ptr.To(r.Pool), Device: ptr.To(r.Device)},
		Taint:          resourcev1.DeviceTaint{Key: wellknown.TaintXID, Value: strconv.Itoa(r.XID), Effect: resourcev1.DeviceTaintEffectNoSchedule},
	}
	rules := a.Client.ResourceV1().DeviceTaintRules()
	_, err := rules.Create(ctx, &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Spec: want}, metav1.CreateOptions{FieldManager: a.Component})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := rules.Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !equality.Semantic.DeepEqual(old.Spec.DeviceSelector, want.DeviceSelector) || old.Spec.Taint.Key != want.Taint.Key || old.Spec.Taint.Value != want.Taint.Value || old.Spec.Taint.Effect != want.Taint.Effect {
		return fmt.Errorf("DeviceTaintRule %s exists with another selector or taint; gpupack never overwrites it: delete it or rename", r.Name)
	}
	return nil
}
