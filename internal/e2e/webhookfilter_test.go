package e2e_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/charts"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/internal/webhook/admission"
)

// chartMatchConditions are the matchConditions of the chart's webhook
// registration, as deploy/webhook.yaml holds them.
func chartMatchConditions(t *testing.T) []admissionregistrationv1.MatchCondition {
	t.Helper()
	docs, err := charts.Render(charts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := yaml.UnmarshalStrict([]byte(d.YAML), &mwc); err != nil {
			t.Fatal(err)
		}
		if len(mwc.Webhooks[0].MatchConditions) == 0 {
			t.Fatal("the chart's webhook has no matchConditions")
		}
		return mwc.Webhooks[0].MatchConditions
	}
	t.Fatal("the chart renders no MutatingWebhookConfiguration")
	return nil
}

// admissionRequests reads how many admission requests the webhook has
// served, from its /metrics (controller-runtime's
// controller_runtime_webhook_requests_total).
func admissionRequests(t *testing.T, addr string) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^controller_runtime_webhook_requests_total\{code="\d+",webhook="` + regexp.QuoteMeta(admission.Path) + `"\} (\d+)$`)
	total := 0
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}

// TestWebhookSeesOnlyGPUPods registers `gpupack webhook` with the chart's
// matchConditions on the real apiserver: pods of an opted-in namespace
// that ask for no GPU (none at all, CPU only, a GPU resource of another
// vendor) are never sent to it, while GPU pods (a whole GPU, a MIG slice,
// a shared GPU, a GPU asked for by an init container only) are.
func TestWebhookSeesOnlyGPUPods(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cs := c.Client()
	hook := c.StartWebhook(testcluster.Webhook{Binary: testcluster.BuildGpupack(t), Path: admission.Path, NamespaceLabel: wellknown.LabelPack,
		MatchConditions: chartMatchConditions(t)})
	addr := hook.LogAddress(regexp.MustCompile(`gpupack webhook: serving https://(\S+?)/`))
	c.CreateNamespace("packed")
	c.LabelNamespace("packed", wellknown.LabelPack, wellknown.PackEnabled)

	// The apiserver may take a moment to see the registration.
	poll(t, "the first GPU pod to be mutated", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods("packed").Create(ctx, makePod("packed", fmt.Sprintf("first-%d", time.Now().UnixNano())).gpus("nvidia.com/gpu", 1).obj(), metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.SchedulerName == admission.SchedulerName, "schedulerName " + p.Spec.SchedulerName, nil
	})
	before := admissionRequests(t, addr)

	bare := makePod("packed", "no-resources").obj()
	bare.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	plain := map[string]*corev1.Pod{
		"no-resources": bare,
		"cpu-only":     makePod("packed", "cpu-only").obj(),
		"other-vendor": makePod("packed", "other-vendor").gpus("amd.com/gpu", 1).obj(),
	}
	for name, p := range plain {
		got, err := cs.CoreV1().Pods("packed").Create(t.Context(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if got.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("pod %s without a GPU was changed: scheduler %q", name, got.Spec.SchedulerName)
		}
	}
	if got := admissionRequests(t, addr); got != before {
		t.Errorf("the webhook served %d admissions for %d pods without a GPU; want none sent", got-before, len(plain))
	}

	initOnly := makePod("packed", "init-only").obj()
	initOnly.Spec.InitContainers = []corev1.Container{{Name: "warm", Image: "example.invalid/warm:1",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
	gpuPods := []*corev1.Pod{
		makePod("packed", "whole").gpus("nvidia.com/gpu", 1).obj(),
		makePod("packed", "mig").gpus("nvidia.com/mig-1g.10gb", 1).obj(),
		makePod("packed", "shared").gpus("nvidia.com/gpu.shared", 1).obj(),
		initOnly,
	}
	for _, p := range gpuPods {
		got, err := cs.CoreV1().Pods("packed").Create(t.Context(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if got.Spec.SchedulerName != admission.SchedulerName {
			t.Errorf("GPU pod %s: scheduler %q, want %q (sent to the webhook)", p.Name, got.Spec.SchedulerName, admission.SchedulerName)
		}
	}
	if got := admissionRequests(t, addr) - before; got != len(gpuPods) {
		t.Errorf("the webhook served %d admissions for %d GPU pods", got, len(gpuPods))
	}
}
