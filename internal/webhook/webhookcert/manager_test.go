package webhookcert

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func webhookConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	url := "https://127.0.0.1:9443/mutate"
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "gpupack", Labels: map[string]string{"app": "gpupack"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "pods.gpupack.io", FailurePolicy: &fail, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}},
			{Name: "other.gpupack.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: []byte("stale")}},
		},
	}
}

// TestManagerSync fills an empty Secret, sets the caBundle of every
// webhook and nothing else, serves the Secret's certificate, and on the
// next sync changes nothing.
func TestManagerSync(t *testing.T) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gpupack-system", Name: "gpupack-webhook-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": nil, "tls.key": nil, "other": []byte("kept")},
	}
	client := fake.NewClientset(secret, webhookConfiguration())
	var log bytes.Buffer
	m := New(Config{Client: client, Namespace: "gpupack-system", Name: "gpupack-webhook-tls", WebhookConfiguration: "gpupack",
		Policy: testPolicy(), Log: &log, Now: func() time.Time { return t0 }})
	if _, err := m.GetCertificate(nil); err == nil {
		t.Error("GetCertificate before the first sync returned a certificate")
	}
	next, err := m.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(testPolicy().Validity * 2 / 3); !next.Equal(want) {
		t.Errorf("next sync %s, want the renewal at %s", next, want)
	}
	got, err := client.CoreV1().Secrets("gpupack-system").Get(t.Context(), "gpupack-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data["other"]) != "kept" {
		t.Errorf("the Secret's other key became %q", got.Data["other"])
	}
	stored := FromData(got.Data)
	if err := verifies(t, testPolicy(), stored, stored, t0); err != nil {
		t.Errorf("the Secret's certificate: %v", err)
	}
	served, err := m.GetCertificate(nil)
	if err != nil || !bytes.Equal(served.Leaf.Raw, leafOf(t, stored).Raw) {
		t.Errorf("GetCertificate = %v, %v; want the Secret's certificate", served, err)
	}

	cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), "gpupack", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := webhookConfiguration()
	for i := range want.Webhooks {
		want.Webhooks[i].ClientConfig.CABundle = stored.CABundle
	}
	if diff := cmp.Diff(want.Webhooks, cfg.Webhooks); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
	if cfg.Labels["app"] != "gpupack" {
		t.Errorf("labels became %v", cfg.Labels)
	}
	for _, secretPart := range []string{"PRIVATE KEY", string(stored.Key), string(stored.CAKey)} {
		if strings.Contains(log.String(), secretPart) {
			t.Errorf("the log holds key material:\n%s", log.String())
		}
	}

	version := got.ResourceVersion
	if _, err := m.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	again, err := client.CoreV1().Secrets("gpupack-system").Get(t.Context(), "gpupack-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != version {
		t.Errorf("a second sync of fresh material wrote the Secret (resourceVersion %s -> %s)", version, again.ResourceVersion)
	}
}

func TestManagerSyncMissing(t *testing.T) {
	var log bytes.Buffer
	m := New(Config{Client: fake.NewClientset(), Namespace: "gpupack-system", Name: "gpupack-webhook-tls", WebhookConfiguration: "gpupack",
		Policy: testPolicy(), Log: &log, Now: func() time.Time { return t0 }})
	_, err := m.Sync(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Secret gpupack-system/gpupack-webhook-tls does not exist: create it") {
		t.Errorf("missing Secret: error %v, want one that says to create it", err)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpupack-system", Name: "gpupack-webhook-tls"}, Type: corev1.SecretTypeTLS}
	m = New(Config{Client: fake.NewClientset(secret), Namespace: "gpupack-system", Name: "gpupack-webhook-tls", WebhookConfiguration: "gpupack",
		Policy: testPolicy(), Log: &log, Now: func() time.Time { return t0 }})
	next, err := m.Sync(t.Context())
	if err != nil {
		t.Fatalf("a missing webhook configuration failed the sync: %v", err)
	}
	if want := t0.Add(retrySoon); !next.Equal(want) {
		t.Errorf("next sync %s, want a retry at %s", next, want)
	}
	if !strings.Contains(log.String(), `MutatingWebhookConfiguration "gpupack" does not exist`) {
		t.Errorf("the log does not name the missing configuration:\n%s", log.String())
	}
}
