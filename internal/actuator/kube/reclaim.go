package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/change"
	source "github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/reclaim"
)

// The neighbours' switches reclaim uses.
const (
	// KEDAPausedReplicas on a ScaledObject makes KEDA hold the target at
	// that many replicas (keda.sh/v1alpha1 PausedReplicasAnnotation).
	KEDAPausedReplicas = "autoscaling.keda.sh/paused-replicas"
	// NotebookStopped on a Kubeflow Notebook, an RFC 3339 time, makes the
	// notebook controller scale its StatefulSet to zero, keeping its PVCs.
	NotebookStopped = "kubeflow-resource-stopped"
)

// MaxLedgerRecords bounds the ledger ConfigMap (under its 1 MiB limit):
// beyond it the oldest records that are closed (restored, refused,
// failed) go first, then the oldest.
const MaxLedgerRecords = 300

// Reclaimer carries out reclaim's actions on a Kubernetes cluster
// (reclaim.Actuator). Its writes need exactly: patch on the owners'
// kinds (deployments, statefulsets, replicasets, jobs, notebooks,
// workloads, scaledobjects), update on their scale subresources, create
// on pods/eviction, events create, and get/create/update on its ledger
// ConfigMap.
type Reclaimer struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// LedgerNamespace and LedgerName name the ledger ConfigMap: a key per
	// record ID, the record as JSON.
	LedgerNamespace, LedgerName string
	Component                   string
	Now                         func() time.Time
}

var _ reclaim.Actuator = (*Reclaimer)(nil)

var gvrs = map[reclaim.Kind]schema.GroupVersionResource{
	reclaim.Deployment:   {Group: "apps", Version: "v1", Resource: "deployments"},
	reclaim.StatefulSet:  {Group: "apps", Version: "v1", Resource: "statefulsets"},
	reclaim.ReplicaSet:   {Group: "apps", Version: "v1", Resource: "replicasets"},
	reclaim.Job:          {Group: "batch", Version: "v1", Resource: "jobs"},
	reclaim.Pod:          {Version: "v1", Resource: "pods"},
	reclaim.Notebook:     source.NotebookResource,
	reclaim.Workload:     source.WorkloadResource,
	reclaim.ScaledObject: source.ScaledObjectResource,
}

func (a *Reclaimer) now() time.Time {
	if a.Now == nil {
		return time.Now()
	}
	return a.Now()
}

// patch sends a JSON merge patch to the object ref names, checking its UID
// first so that a recreated object of the same name is never touched.
func (a *Reclaimer) patch(ctx context.Context, ref reclaim.Ref, body map[string]any) (*unstructured.Unstructured, error) {
	gvr, ok := gvrs[ref.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: reclaim writes no %s", ref, ref.Kind)
	}
	if ref.UID != "" {
		body = withUID(body, ref.UID)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	u, err := a.Dynamic.Resource(gvr).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: a.Component})
	if err != nil {
		return nil, fmt.Errorf("patching %s: %w", ref, err)
	}
	return u, nil
}

// withUID adds metadata.uid to a merge patch: the apiserver refuses the
// patch (409) when the object's UID differs.
func withUID(body map[string]any, uid string) map[string]any {
	meta, _ := body["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		body["metadata"] = meta
	}
	meta["uid"] = uid
	return body
}

func (a *Reclaimer) get(ctx context.Context, ref reclaim.Ref) (*unstructured.Unstructured, error) {
	gvr, ok := gvrs[ref.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: reclaim reads no %s", ref, ref.Kind)
	}
	u, err := a.Dynamic.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	if ref.UID != "" && string(u.GetUID()) != ref.UID {
		return nil, fmt.Errorf("%s was recreated (UID %s, the record's %s): reclaim leaves the new one alone", ref, u.GetUID(), ref.UID)
	}
	return u, nil
}

func annotations(kv map[string]*string) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": kv}}
}

// Notify writes the notice on the owner and an Event.
func (a *Reclaimer) Notify(ctx context.Context, c reclaim.Candidate, n reclaim.Notice) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if _, err := a.patch(ctx, c.Owner, annotations(map[string]*string{wellknown.AnnotationReclaimNotice: ptrTo(string(b))})); err != nil {
		return err
	}
	a.event(ctx, c.Owner, true, "GPUPackReclaimNotice", fmt.Sprintf("%s; gpupack may %s it after %s unless it becomes active; set %s to a time to snooze, or label it %s=%s",
		n.Summary, c.Action, n.Deadline.UTC().Format(time.RFC3339), wellknown.AnnotationReclaimSnooze, wellknown.LabelReclaim, wellknown.ReclaimNever))
	return nil
}

// Pause carries out the candidate's action. The record, with what it
// replaces, is written on the owner in the same patch as the switch
// where the switch is on the owner, and just before it otherwise.
func (a *Reclaimer) Pause(ctx context.Context, c reclaim.Candidate, rec *reclaim.Record) error {
	var err error
	switch c.Action {
	case reclaim.ScaleToZero:
		err = a.scaleToZero(ctx, c, rec)
	case reclaim.PauseKEDA:
		err = a.pauseKEDA(ctx, c, rec)
	case reclaim.StopNotebook:
		err = a.onOwner(ctx, c, rec, func(u *unstructured.Unstructured) map[string]any {
			rec.Before.Annotations = map[string]*string{NotebookStopped: annotation(u, NotebookStopped)}
			return map[string]any{"metadata": map[string]any{"annotations": map[string]any{NotebookStopped: a.now().UTC().Format(time.RFC3339)}}}
		})
	case reclaim.SuspendJob:
		err = a.onOwner(ctx, c, rec, func(u *unstructured.Unstructured) map[string]any {
			old, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
			rec.Before.Suspend = &old
			return map[string]any{"spec": map[string]any{"suspend": true}}
		})
	case reclaim.DeactivateWorkload:
		err = a.onOwner(ctx, c, rec, func(u *unstructured.Unstructured) map[string]any {
			if old, found, _ := unstructured.NestedBool(u.Object, "spec", "active"); found {
				rec.Before.Active = &old
			}
			return map[string]any{"spec": map[string]any{"active": false}}
		})
	case reclaim.Evict:
		err = a.evict(ctx, c)
	default:
		err = fmt.Errorf("%s: unknown action %q", c.Owner, c.Action)
	}
	if err != nil {
		return err
	}
	a.event(ctx, c.Owner, false, "GPUPackReclaimed", fmt.Sprintf("%s (%s): %.2f GPUs idle-held, %.1f idle GPU-hours; approved by %s; record %s", c.Action, c.Class, rec.Predicted.GPUs, c.Evidence.IdleGPUHours, rec.ApprovedBy, rec.ID))
	return nil
}

// onOwner reads the owner, lets change fill rec.Before and give the
// switch, and patches switch and record together.
func (a *Reclaimer) onOwner(ctx context.Context, c reclaim.Candidate, rec *reclaim.Record, change func(*unstructured.Unstructured) map[string]any) error {
	u, err := a.get(ctx, c.Owner)
	if err != nil {
		return err
	}
	if _, ok := u.GetAnnotations()[wellknown.AnnotationReclaimed]; ok {
		return fmt.Errorf("%s is already reclaimed (%s)", c.Owner, wellknown.AnnotationReclaimed)
	}
	body := change(u)
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	meta, _ := body["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		body["metadata"] = meta
	}
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[wellknown.AnnotationReclaimed] = string(raw)
	_, err = a.patch(ctx, c.Owner, body)
	return err
}

// scaleToZero records the replicas on the owner, then scales it through
// the scale subresource with the read resourceVersion (a concurrent
// scale fails it); a failed scale takes the record off again.
func (a *Reclaimer) scaleToZero(ctx context.Context, c reclaim.Candidate, rec *reclaim.Record) error {
	sc, err := a.getScale(ctx, c.Owner)
	if err != nil {
		return err
	}
	if sc.Spec.Replicas == 0 {
		return fmt.Errorf("%s is already at 0 replicas", c.Owner)
	}
	rec.Before.Replicas = ptrTo(sc.Spec.Replicas)
	if err := a.onOwner(ctx, c, rec, func(*unstructured.Unstructured) map[string]any { return map[string]any{} }); err != nil {
		return err
	}
	if err := a.rescale(ctx, c.Owner, *rec.Before.Replicas, 0); err != nil {
		_, _ = a.patch(context.WithoutCancel(ctx), c.Owner, annotations(map[string]*string{wellknown.AnnotationReclaimed: nil}))
		return err
	}
	return nil
}

// pauseKEDA records on the owner, then sets the ScaledObject's
// paused-replicas to 0, remembering its old value.
func (a *Reclaimer) pauseKEDA(ctx context.Context, c reclaim.Candidate, rec *reclaim.Record) error {
	if c.Scaler == nil {
		return fmt.Errorf("%s: no ScaledObject to pause", c.Owner)
	}
	so, err := a.get(ctx, *c.Scaler)
	if err != nil {
		return err
	}
	rec.Before.Annotations = map[string]*string{KEDAPausedReplicas: annotation(so, KEDAPausedReplicas)}
	if err := a.onOwner(ctx, c, rec, func(*unstructured.Unstructured) map[string]any { return map[string]any{} }); err != nil {
		return err
	}
	if _, err := a.patch(ctx, *c.Scaler, annotations(map[string]*string{KEDAPausedReplicas: ptrTo("0")})); err != nil {
		_, _ = a.patch(context.WithoutCancel(ctx), c.Owner, annotations(map[string]*string{wellknown.AnnotationReclaimed: nil}))
		return err
	}
	return nil
}

// evict evicts each pod of a bare-pod candidate through the Eviction API.
func (a *Reclaimer) evict(ctx context.Context, c reclaim.Candidate) error {
	for _, p := range c.Pods {
		uid := types.UID(p.UID)
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
		err := a.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			return fmt.Errorf("evicting %s: %w: %v", p.Key(), change.ErrBudget, err)
		default:
			return fmt.Errorf("evicting %s: %w", p.Key(), err)
		}
	}
	return nil
}

// Restore puts back what the record replaced. A scaled owner that someone
// has scaled since is left as it is (an error says so), so that restore
// never overrides a person.
func (a *Reclaimer) Restore(ctx context.Context, rec reclaim.Record, cooldown *int32) error {
	if !rec.Restorable {
		return fmt.Errorf("%s: %s: %w (nothing recreates an evicted bare pod)", rec.ID, rec.Action, reclaim.ErrNotRestorable)
	}
	owner, err := a.get(ctx, rec.Owner)
	if err != nil {
		return err
	}
	if raw, ok := owner.GetAnnotations()[wellknown.AnnotationReclaimed]; !ok || !sameID(raw, rec.ID) {
		return fmt.Errorf("%s carries no record %s (restored already, or by hand): %w", rec.Owner, rec.ID, reclaim.ErrNotRestorable)
	}
	unmark := map[string]any{wellknown.AnnotationReclaimed: nil, wellknown.AnnotationReclaimNotice: nil}
	body := map[string]any{"metadata": map[string]any{"annotations": unmark}}
	switch rec.Action {
	case reclaim.ScaleToZero:
		if err := a.scaleBack(ctx, rec); err != nil {
			return err
		}
	case reclaim.PauseKEDA:
		if err := a.resumeKEDA(ctx, rec, cooldown); err != nil {
			return err
		}
	case reclaim.StopNotebook:
		unmark[NotebookStopped] = rec.Before.Annotations[NotebookStopped]
	case reclaim.SuspendJob:
		body["spec"] = map[string]any{"suspend": rec.Before.Suspend != nil && *rec.Before.Suspend}
	case reclaim.DeactivateWorkload:
		var active any // unset: Kueue's default, active
		if rec.Before.Active != nil {
			active = *rec.Before.Active
		}
		body["spec"] = map[string]any{"active": active}
	}
	if _, err := a.patch(ctx, rec.Owner, body); err != nil {
		return err
	}
	a.event(ctx, rec.Owner, false, "GPUPackRestored", fmt.Sprintf("record %s restored: %s undone", rec.ID, rec.Action))
	return nil
}

func sameID(raw, id string) bool {
	var r reclaim.Record
	return json.Unmarshal([]byte(raw), &r) == nil && r.ID == id
}

func (a *Reclaimer) scaleBack(ctx context.Context, rec reclaim.Record) error {
	if rec.Before.Replicas == nil {
		return fmt.Errorf("record %s has no replicas to put back", rec.ID)
	}
	return a.rescale(ctx, rec.Owner, 0, *rec.Before.Replicas)
}

// rescale sets the owner's replicas from one count to another through the
// scale subresource, read and written with its resourceVersion; a
// conflict (a controller updating the object) reads it again, and a
// count other than from (a person or an autoscaler scaled it) stops it:
// reclaim never overrides a change it did not make.
func (a *Reclaimer) rescale(ctx context.Context, ref reclaim.Ref, from, to int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := a.getScale(ctx, ref)
		if err != nil {
			return err
		}
		if sc.Spec.Replicas != from {
			return fmt.Errorf("%s is at %d replicas, not the %d reclaim expects: someone scaled it; reclaim leaves it as it is", ref, sc.Spec.Replicas, from)
		}
		sc.Spec.Replicas = to
		return a.updateScale(ctx, ref, sc)
	})
}

// resumeKEDA puts the ScaledObject's paused-replicas back and raises its
// initialCooldownPeriod to cooldown when that is longer.
func (a *Reclaimer) resumeKEDA(ctx context.Context, rec reclaim.Record, cooldown *int32) error {
	if rec.Scaler == nil {
		return fmt.Errorf("record %s names no ScaledObject", rec.ID)
	}
	body := annotations(map[string]*string{KEDAPausedReplicas: rec.Before.Annotations[KEDAPausedReplicas]})
	if cooldown != nil {
		so, err := a.get(ctx, *rec.Scaler)
		if err != nil {
			return err
		}
		old, _, _ := unstructured.NestedInt64(so.Object, "spec", "initialCooldownPeriod")
		if int64(*cooldown) > old {
			body["spec"] = map[string]any{"initialCooldownPeriod": *cooldown}
		}
	}
	_, err := a.patch(ctx, *rec.Scaler, body)
	return err
}

func (a *Reclaimer) getScale(ctx context.Context, ref reclaim.Ref) (*autoscalingv1.Scale, error) {
	var sc *autoscalingv1.Scale
	var err error
	apps := a.Client.AppsV1()
	switch ref.Kind {
	case reclaim.Deployment:
		sc, err = apps.Deployments(ref.Namespace).GetScale(ctx, ref.Name, metav1.GetOptions{})
	case reclaim.StatefulSet:
		sc, err = apps.StatefulSets(ref.Namespace).GetScale(ctx, ref.Name, metav1.GetOptions{})
	case reclaim.ReplicaSet:
		sc, err = apps.ReplicaSets(ref.Namespace).GetScale(ctx, ref.Name, metav1.GetOptions{})
	default:
		return nil, fmt.Errorf("%s has no scale subresource that reclaim uses", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the scale of %s: %w", ref, err)
	}
	if ref.UID != "" && string(sc.UID) != ref.UID {
		return nil, fmt.Errorf("%s was recreated (UID %s, the record's %s): reclaim leaves the new one alone", ref, sc.UID, ref.UID)
	}
	return sc, nil
}

func (a *Reclaimer) updateScale(ctx context.Context, ref reclaim.Ref, sc *autoscalingv1.Scale) error {
	var err error
	apps := a.Client.AppsV1()
	opts := metav1.UpdateOptions{FieldManager: a.Component}
	switch ref.Kind {
	case reclaim.Deployment:
		_, err = apps.Deployments(ref.Namespace).UpdateScale(ctx, ref.Name, sc, opts)
	case reclaim.StatefulSet:
		_, err = apps.StatefulSets(ref.Namespace).UpdateScale(ctx, ref.Name, sc, opts)
	case reclaim.ReplicaSet:
		_, err = apps.ReplicaSets(ref.Namespace).UpdateScale(ctx, ref.Name, sc, opts)
	}
	if err != nil {
		return fmt.Errorf("scaling %s to %d: %w", ref, sc.Spec.Replicas, err)
	}
	return nil
}

// event records an Event on the object; one that cannot be written is
// not a reason to stop (the ledger has the record).
func (a *Reclaimer) event(ctx context.Context, ref reclaim.Ref, warning bool, reason, message string) {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	now := metav1.NewTime(a.now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: ref.Name + ".", Namespace: ref.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: string(ref.Kind), APIVersion: ref.APIVersion, Namespace: ref.Namespace, Name: ref.Name, UID: types.UID(ref.UID)},
		Reason:         reason, Message: message, Type: typ,
		Source:         corev1.EventSource{Component: a.Component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "gpupack.io/reclaim", ReportingInstance: a.Component,
	}
	_, _ = a.Client.CoreV1().Events(ref.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

// Records reads the ledger, oldest first.
func (a *Reclaimer) Records(ctx context.Context) ([]reclaim.Record, error) {
	cm, err := a.Client.CoreV1().ConfigMaps(a.LedgerNamespace).Get(ctx, a.LedgerName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the reclaim ledger ConfigMap %s/%s: %w", a.LedgerNamespace, a.LedgerName, err)
	}
	return decodeLedger(cm)
}

func decodeLedger(cm *corev1.ConfigMap) ([]reclaim.Record, error) {
	out := make([]reclaim.Record, 0, len(cm.Data))
	for key, raw := range cm.Data {
		var r reclaim.Record
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return nil, fmt.Errorf("reclaim ledger ConfigMap %s/%s, key %s: %v; fix or delete that key", cm.Namespace, cm.Name, key, err)
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].At.Before(out[j].At) || out[i].At.Equal(out[j].At) && out[i].ID < out[j].ID
	})
	return out, nil
}

// Save adds or replaces the record of its ID, creating the ConfigMap
// when it is missing and dropping the oldest records beyond
// MaxLedgerRecords.
func (a *Reclaimer) Save(ctx context.Context, rec reclaim.Record) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	cms := a.Client.CoreV1().ConfigMaps(a.LedgerNamespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, a.LedgerName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a.LedgerNamespace, Name: a.LedgerName,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "gpupack"}}, Data: map[string]string{rec.ID: string(raw)}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: a.Component})
			if apierrors.IsAlreadyExists(err) {
				return &apierrors.StatusError{ErrStatus: metav1.Status{Reason: metav1.StatusReasonConflict, Code: 409}}
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("reading the reclaim ledger: %w", err)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[rec.ID] = string(raw)
		if err := trimLedger(cm); err != nil {
			return err
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: a.Component})
		return err
	})
}

// trimLedger drops the oldest closed records, then the oldest, beyond
// MaxLedgerRecords.
func trimLedger(cm *corev1.ConfigMap) error {
	if len(cm.Data) <= MaxLedgerRecords {
		return nil
	}
	recs, err := decodeLedger(cm)
	if err != nil {
		return err
	}
	open := func(r reclaim.Record) bool { return r.Outcome == reclaim.OutcomeReclaimed }
	for _, keepOpen := range []bool{true, false} {
		for _, r := range recs {
			if len(cm.Data) <= MaxLedgerRecords {
				return nil
			}
			if keepOpen && open(r) {
				continue
			}
			delete(cm.Data, r.ID)
		}
	}
	return nil
}

func annotation(u *unstructured.Unstructured, key string) *string {
	if v, ok := u.GetAnnotations()[key]; ok {
		return &v
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
