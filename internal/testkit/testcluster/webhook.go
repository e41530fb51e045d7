package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Webhook says how StartWebhook runs and registers gpupack's mutating
// webhook. The names come from the caller (the webhook verb and package
// admission), since testcluster does not import gpupack's packages.
type Webhook struct {
	// Binary is the gpupack binary (BuildGpupack).
	Binary string
	// Args follow `gpupack webhook --listen ... --cert-dir ... --self-signed
	// 127.0.0.1`, e.g. --requests FILE.
	Args []string
	// Path is the URL path it serves pod admission on.
	Path string
	// NamespaceLabel is the label, with value "enabled", that opts a
	// namespace in.
	NamespaceLabel string
	// MatchConditions, when set, are the registration's CEL filters on
	// what the apiserver sends (the chart's).
	MatchConditions []admissionregistrationv1.MatchCondition
}

// StartWebhook runs `gpupack webhook` on loopback port 0 with a
// self-signed certificate, waits until it says where it serves, and
// registers it with the apiserver as deploy/webhook.yaml does: pod
// creation in opted-in namespaces, failurePolicy Ignore, a 2-second
// timeout. The apiserver may take a moment to start calling it; callers
// poll for the first mutated pod.
func (c *Cluster) StartWebhook(w Webhook) *Process {
	c.t.Helper()
	certDir := filepath.Join(c.t.TempDir(), "certs")
	args := append([]string{"webhook", "--listen", "127.0.0.1:0", "--cert-dir", certDir, "--self-signed", "127.0.0.1"}, w.Args...)
	hook := c.Run("gpupack-webhook", w.Binary, args...)
	// The webhook binds port 0 and says which port it got.
	addr := hook.LogAddress(regexp.MustCompile(`gpupack webhook: serving https://(\S+?)/`))
	caBundle, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		c.t.Fatalf("testcluster: gpupack webhook serves on %s but wrote no CA: %v", addr, err)
	}

	url := "https://" + addr + w.Path
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(2)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "gpupack"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pods.gpupack.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{w.NamespaceLabel: "enabled"}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         w.MatchConditions,
		}},
	}
	if _, err := c.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(c.t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("testcluster: register the gpupack webhook: %v", err)
	}
	return hook
}

// LabelNamespace sets a label on a namespace, e.g. the webhook's opt-in.
func (c *Cluster) LabelNamespace(name, key, value string) {
	c.t.Helper()
	ctx := c.t.Context()
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("testcluster: get namespace %q: %v", name, err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[key] = value
	if _, err := c.client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("testcluster: label namespace %q: %v", name, err)
	}
}

// BuildGpupack builds the gpupack command (cmd/gpupack of the repository
// that holds the working directory) into a temporary directory and returns
// its path.
func BuildGpupack(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gpupack")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/gpupack")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testcluster: go build ./cmd/gpupack in %s: %v\n%s", root, err, out)
	}
	return bin
}

// repoRoot is the first directory above the working directory that holds
// hack/k8s-bins.sh, so that tests of nested modules such as scheduler/
// find the repository too.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("the working directory is unknown: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hack", "k8s-bins.sh")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no hack/k8s-bins.sh lies above %s", wd)
		}
	}
}
