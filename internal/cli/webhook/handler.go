package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	evanphx "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	admissionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/admission/metrics"

	"github.com/gpupack/gpupack/internal/webhook/admission"
	"github.com/gpupack/gpupack/plan"
)

// stage is what failed when the webhook admits a pod unchanged.
type stage string

const (
	stageDecode stage = "decode" // the pod in the request did not decode
	stageMutate stage = "mutate" // admission.Mutate failed
	stagePatch  stage = "patch"  // the patch could not be made, or does not apply to the pod as sent
	stagePanic  stage = "panic"  // the handler panicked
)

// failures counts the pods admitted unchanged because the webhook failed:
// the apiserver sees them allowed, so only this and the log tell.
var failures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gpupack_webhook_failures_total",
	Help: "Pods that the webhook admitted unchanged, with a warning, because it failed; by the stage that failed (decode, mutate, patch, panic).",
}, []string{"stage"})

func init() {
	ctrlmetrics.Registry.MustRegister(failures)
	for _, s := range []stage{stageDecode, stageMutate, stagePatch, stagePanic} {
		failures.WithLabelValues(string(s))
	}
}

// handler adapts admission.Mutate to controller-runtime's admission.Handler.
type handler struct {
	decoder  ctrladmission.Decoder
	requests func() map[string]plan.WorkloadRequest
	log      logr.Logger
}

// newHandler returns the pod admission handler; requests returns the
// planned requests for each admission (nil: only the scheduler name is
// set); denials and failures are logged to log.
func newHandler(requests func() map[string]plan.WorkloadRequest, log logr.Logger) *handler {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return &handler{decoder: ctrladmission.NewDecoder(scheme), requests: requests, log: log}
}

// Handle decodes the pod and patches it with what admission.Mutate changed.
//
// It denies only a pod that contradicts itself
// (admission.ContradictionError), which its owner must fix. Any failure of
// the webhook's own (a pod it cannot decode, an error, a panic) admits the
// pod unchanged with a warning: the apiserver obeys allowed: false whatever
// the failurePolicy, and the webhook must never be the reason a pod is
// refused.
func (h *handler) Handle(_ context.Context, req ctrladmission.Request) (resp ctrladmission.Response) {
	defer func() {
		if r := recover(); r != nil {
			admissionmetrics.WebhookPanics.WithLabelValues().Inc()
			resp = h.unchanged(req, stagePanic, fmt.Errorf("panic: %v", r), "stack", string(debug.Stack()))
		}
	}()
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return h.unchanged(req, stageDecode, fmt.Errorf("decoding the pod: %w", err))
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	before := pod.DeepCopy()
	changes, err := admission.Mutate(pod, h.requests())
	var contradiction *admission.ContradictionError
	switch {
	case errors.As(err, &contradiction):
		h.log.Info("denied the pod", "pod", podName(req), "reason", err.Error())
		return ctrladmission.Denied(err.Error())
	case err != nil:
		return h.unchanged(req, stageMutate, err)
	case changes == nil:
		return ctrladmission.Allowed("no GPU request")
	}
	patch, err := rawPatch(req.Object.Raw, before, pod)
	if err != nil {
		return h.unchanged(req, stagePatch, err)
	}
	return ctrladmission.Patched("", patch...)
}

// unchanged admits the pod of req as it came, with a warning that its
// creator sees (kubectl prints it), and logs and counts why.
func (h *handler) unchanged(req ctrladmission.Request, s stage, err error, logValues ...any) ctrladmission.Response {
	name := podName(req)
	failures.WithLabelValues(string(s)).Inc()
	h.log.Error(err, "admitted the pod unchanged", append([]any{"pod", name, "stage", s}, logValues...)...)
	return ctrladmission.Allowed("").WithWarnings(fmt.Sprintf(
		"gpupack webhook failed and admitted pod %s unchanged (not sent to gpupack-scheduler, GPU request not rewritten): %v", name, err))
}

// podName names the pod of req for logs and warnings. It reads only the
// metadata, so it names a pod that does not decode as a whole too; the
// request's namespace and name stand in for what it cannot read.
func podName(req ctrladmission.Request) string {
	var obj struct {
		Metadata struct {
			Namespace    string `json:"namespace"`
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(req.Object.Raw, &obj) // best effort: a field that does not decode stays empty
	meta := metav1.ObjectMeta{Namespace: obj.Metadata.Namespace, Name: obj.Metadata.Name, GenerateName: obj.Metadata.GenerateName}
	if meta.Namespace == "" {
		meta.Namespace = req.Namespace
	}
	if meta.Name == "" && meta.GenerateName == "" {
		meta.Name = req.Name
	}
	return admission.PodName(&corev1.Pod{ObjectMeta: meta})
}

// rawPatch returns the JSON patch that turns raw, the pod as the apiserver
// sent it, into the pod that admission.Mutate made of before (after), and
// changes nothing else. It is the difference between before and after,
// both marshalled by this build: a field that this build's k8s.io/api does
// not know (one that a newer apiserver sends) is in neither, so no
// operation touches it, where a patch from raw to the re-marshalled pod
// would remove it. The patch is applied to raw here first, with the
// library the apiserver applies it with, because the apiserver refuses a
// pod whose patch does not apply whatever the failurePolicy.
func rawPatch(raw []byte, before, after *corev1.Pod) ([]jsonpatch.Operation, error) {
	b, err := json.Marshal(before)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod: %w", err)
	}
	a, err := json.Marshal(after)
	if err != nil {
		return nil, fmt.Errorf("encoding the mutated pod: %w", err)
	}
	ops, err := jsonpatch.CreatePatch(b, a)
	if err != nil {
		return nil, fmt.Errorf("making the patch: %w", err)
	}
	doc, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	patch, err := evanphx.DecodePatch(doc)
	if err != nil {
		return nil, fmt.Errorf("decoding the patch: %w", err)
	}
	if _, err := patch.Apply(raw); err != nil {
		return nil, fmt.Errorf("the patch does not apply to the pod as sent: %w", err)
	}
	return ops, nil
}
