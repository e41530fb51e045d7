package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/internal/webhook/admission"
)

// TestWebhook registers `gpupack webhook` with the real apiserver: unchanged
// manifests in an opted-in namespace are rewritten per the plan and sent to
// gpupack-scheduler, the same manifests elsewhere are untouched, a
// contradictory request is rejected and the rejection logged, and killing the webhook while pods are
// created fails no creation (failurePolicy Ignore).
func TestWebhook(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cs := c.Client()
	ctx := t.Context()
	dir := t.TempDir()

	requests := filepath.Join(dir, "workload-requests.yaml")
	if err := os.WriteFile(requests, []byte(`workloads:
- workload: packed/ranker
  action: share
  before: 1 GPU
  after: {resource: nvidia.com/mig-1g.10gb, count: 1, gpuModel: H100-80GB, vramLimitMiB: 10240}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := c.StartWebhook(testcluster.Webhook{Binary: testcluster.BuildGpupack(t), Args: []string{"--requests", requests}, Path: admission.Path, NamespaceLabel: wellknown.LabelPack})

	c.CreateNamespace("packed")
	c.CreateNamespace("plain")
	c.LabelNamespace("packed", wellknown.LabelPack, wellknown.PackEnabled)

	ranker := func(namespace, name string) *corev1.Pod {
		p := makePod(namespace, name).gpus("nvidia.com/gpu", 1).obj()
		p.Labels = map[string]string{"app": "ranker"}
		return p
	}
	// The apiserver may take a moment to see the configuration: retry the
	// first opted-in pod until it comes back mutated.
	var packed *corev1.Pod
	poll(t, "the first opted-in pod to be mutated", func(ctx context.Context) (bool, string, error) {
		name := fmt.Sprintf("ranker-%d", time.Now().UnixNano())
		p, err := cs.CoreV1().Pods("packed").Create(ctx, ranker("packed", name), metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		packed = p
		return p.Spec.SchedulerName == admission.SchedulerName, "schedulerName " + p.Spec.SchedulerName, nil
	})
	limits := packed.Spec.Containers[0].Resources.Limits
	if q, ok := limits["nvidia.com/mig-1g.10gb"]; !ok || q.Value() != 1 || limits.Name("nvidia.com/gpu", "").Value() != 0 {
		t.Errorf("opted-in pod's limits = %v, want nvidia.com/mig-1g.10gb: 1 instead of nvidia.com/gpu", limits)
	}
	if got := packed.Annotations[wellknown.AnnotationAdmission]; !strings.Contains(got, `"before":{"nvidia.com/gpu":"1"}`) || !strings.Contains(got, `"after":{"nvidia.com/mig-1g.10gb":"1"}`) {
		t.Errorf("annotation %s = %s", wellknown.AnnotationAdmission, got)
	}

	plain, err := cs.CoreV1().Pods("plain").Create(ctx, ranker("plain", "ranker-0"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Spec.SchedulerName != corev1.DefaultSchedulerName || plain.Annotations[wellknown.AnnotationAdmission] != "" || plain.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", "").Value() != 1 {
		t.Errorf("pod of a namespace not opted in was changed: scheduler %q, annotations %v, limits %v", plain.Spec.SchedulerName, plain.Annotations, plain.Spec.Containers[0].Resources.Limits)
	}

	confused := makePod("packed", "confused").gpus("nvidia.com/gpu", 1).gpus("nvidia.com/mig-1g.10gb", 1).obj()
	_, err = cs.CoreV1().Pods("packed").Create(ctx, confused, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "asks for nvidia.com/gpu and nvidia.com/mig-1g.10gb together") {
		t.Errorf("contradictory pod: error %v, want the webhook's rejection", err)
	}
	// The webhook's log names the pod it denied.
	hook.LogAddress(regexp.MustCompile(`level=INFO msg="denied the pod" pod=(packed/confused) `))

	// Kill the webhook while pods are being created: none may fail.
	const storm = 60
	failures := make(chan error, storm)
	mutated := 0
	for i := range storm {
		if i == storm/3 {
			hook.Stop()
		}
		p, err := cs.CoreV1().Pods("packed").Create(ctx, ranker("packed", fmt.Sprintf("storm-%02d", i)), metav1.CreateOptions{})
		if err != nil {
			failures <- err
			continue
		}
		if p.Spec.SchedulerName == admission.SchedulerName {
			mutated++
		}
	}
	close(failures)
	for err := range failures {
		t.Errorf("pod creation failed while the webhook was down: %v", err)
	}
	t.Logf("%d of %d pods created while the webhook was killed after %d were mutated (the rest created unchanged)", storm, storm, mutated)
	if mutated == 0 || mutated == storm {
		t.Errorf("%d of %d pods mutated; want those before the kill only", mutated, storm)
	}
	if err := hook.Exited(); err == nil {
		t.Error("the webhook is still running after Stop")
	}
}
