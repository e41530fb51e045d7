package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// syncBuffer is the webhook's stderr, read by the test while the webhook
// writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const rankerRequests = `workloads:
- workload: packed/ranker
  action: share
  before: 1 GPU
  after: {resource: nvidia.com/mig-1g.10gb, count: 1, gpuModel: H100-80GB, vramLimitMiB: 10240}
`

// TestRequestsFileReloaded runs the webhook over a real TLS socket with a
// requests file that does not exist yet, as the Deployment's optional
// ConfigMap may leave it: it must serve and rewrite nothing; once the file
// is written it rewrites the planned workload; a broken new version keeps
// the last good rules; a removed file rewrites nothing again.
func TestRequestsFileReloaded(t *testing.T) {
	dir := t.TempDir()
	requests := filepath.Join(dir, "requests", "workload-requests.yaml")
	if err := os.Mkdir(filepath.Dir(requests), 0o700); err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	ctx, cancel := context.WithCancel(t.Context())
	stderr := &syncBuffer{}
	cmd := &cobra.Command{}
	cmd.SetErr(stderr)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, &options{listen: "127.0.0.1:0", certDir: certDir, selfSigned: "127.0.0.1", requests: requests, reloadEvery: 10 * time.Millisecond}, cmd)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook: %v", err)
		}
	})

	serving := regexp.MustCompile(`serving https://(\S+)` + Path)
	var addr string
	waitFor(t, "the webhook to say where it serves", stderr, func() bool {
		m := serving.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	// controller-runtime's packages (its certificate watcher) log through
	// its global logger, which discards everything until it is set.
	if !ctrllog.Log.Enabled() {
		t.Error("run did not set controller-runtime's logger: its packages' logs are discarded")
	}
	if !strings.Contains(stderr.String(), "does not exist: no request is rewritten") {
		t.Errorf("stderr does not say that the missing file rewrites nothing:\n%s", stderr)
	}
	client := tlsClient(t, filepath.Join(certDir, "ca.crt"))
	admit := func() string { return admitRanker(t, client, "https://"+addr+Path) }

	if got := admit(); strings.Contains(got, "mig-1g.10gb") || !strings.Contains(got, "schedulerName") {
		t.Errorf("without the file: patch %s, want the scheduler name only", got)
	}

	writeAtomically(t, requests, rankerRequests)
	waitFor(t, "the written file to be applied", stderr, func() bool { return strings.Contains(admit(), "mig-1g.10gb") })

	writeAtomically(t, requests, "workloads: [this is not a plan")
	waitFor(t, "the broken file to be refused", stderr, func() bool {
		return strings.Contains(stderr.String(), "error: --requests "+requests) && strings.Contains(stderr.String(), "keeping the last good requests (1 planned workloads)")
	})
	if got := admit(); !strings.Contains(got, "mig-1g.10gb") {
		t.Errorf("after a broken file: patch %s, want the last good rules still applied", got)
	}

	if err := os.Remove(requests); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed file to drop the rules", stderr, func() bool { return !strings.Contains(admit(), "mig-1g.10gb") })
}

// writeAtomically replaces path as the kubelet updates a ConfigMap
// volume: a new file renamed over the old.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, stderr *syncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // bounds a hang; not a speed expectation
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s; webhook stderr:\n%s", what, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tlsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// admitRanker sends the apiserver's AdmissionReview for a new pod of
// workload packed/ranker asking for one GPU, and returns the JSON patch.
func admitRanker(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "packed", Name: "ranker-0", Labels: map[string]string{"app": "ranker"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
		}}}},
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	answer := admit(t, client, url, "packed", "ranker-0", raw)
	if !answer.Allowed {
		t.Fatalf("review answered %+v, want allowed", answer)
	}
	return string(answer.Patch)
}

// admit sends the apiserver's AdmissionReview for creating the pod raw in
// namespace (the request names it name) and returns the response, whose
// UID it checks: the apiserver ignores an answer to another request.
func admit(t *testing.T, client *http.Client, url, namespace, name string, raw []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("review-1"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: namespace, Name: name,
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatal(err)
	}
	if answer.Response == nil || answer.Response.UID != review.Request.UID {
		t.Fatalf("review answered %+v, want the response to %s", answer.Response, review.Request.UID)
	}
	return answer.Response
}

// TestCertificateFlags checks that contradictory or incomplete
// certificate flags are refused before anything starts, naming the flags.
func TestCertificateFlags(t *testing.T) {
	secret := []string{"--cert-secret=gpupack-system/gpupack-webhook-tls", "--cert-dns-names=gpupack-webhook.gpupack-system.svc", "--ca-bundle-of=gpupack"}
	cases := map[string]struct {
		args []string
		err  string
	}{
		"--cert-dir too":            {args: append(secret, "--cert-dir=/tmp/x"), err: "--cert-secret and --cert-dir both say where the certificate comes from"},
		"--self-signed too":         {args: append(secret, "--self-signed=127.0.0.1"), err: "--cert-secret and --self-signed both say"},
		"names without secret":      {args: []string{"--cert-dns-names=a.svc"}, err: "--cert-dns-names applies to --cert-secret only"},
		"kubeconfig without secret": {args: []string{"--kubeconfig=/dev/null"}, err: "--kubeconfig applies to --cert-secret only"},
		"secret without namespace":  {args: []string{"--cert-secret=gpupack-webhook-tls", "--cert-dns-names=a.svc", "--ca-bundle-of=gpupack"}, err: `--cert-secret "gpupack-webhook-tls": want NAMESPACE/NAME`},
		"no names":                  {args: secret[:1], err: "--cert-dns-names: no DNS name or IP address given"},
		"bad name":                  {args: []string{secret[0], "--cert-dns-names=Webhook_1", secret[2]}, err: `--cert-dns-names: "Webhook_1" is neither an IP address nor a DNS name`},
		"no configuration":          {args: secret[:2], err: "--cert-secret needs --ca-bundle-of"},
		"validity too short":        {args: append(secret, "--cert-validity=1s"), err: "--cert-validity 1s: want between 10s and"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand(t.Context())
			cmd.SetArgs(append([]string{"--listen=127.0.0.1:0"}, tc.args...))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			cmd.SilenceUsage = true
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
		})
	}
}
