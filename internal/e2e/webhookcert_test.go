package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/internal/webhook/admission"
	"github.com/gpupack/gpupack/internal/webhook/webhookcert"
)

// TestWebhookManagesItsCertificate runs two `gpupack webhook --cert-secret`
// replicas against one empty Secret, as the Helm chart does without
// cert-manager, each with only the RBAC that package webhookcert documents
// (a user impersonated, bound to that Role and ClusterRole). Behind a TCP
// proxy that stands for the Service, they must converge on one certificate,
// set the caBundle of the MutatingWebhookConfiguration (failurePolicy Fail,
// so an untrusted certificate fails pod creation) and nothing else of it,
// and mutate pods created through the real apiserver; with --cert-validity
// 30s they renew the certificate, and every pod created meanwhile is
// admitted and mutated. A missing Secret stops the webhook with an error
// that says to create it.
func TestWebhookManagesItsCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a 30-second certificate to be renewed")
	}
	c := testcluster.Start(t, testcluster.Options{})
	cs := c.Client()
	ctx := t.Context()
	bin := testcluster.BuildGpupack(t)
	const system, secretName, configName, user = "gpupack-system", "gpupack-webhook-tls", "gpupack", "gpupack-webhook"
	c.CreateNamespace(system)

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: secretName},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil},
	}
	if _, err := cs.CoreV1().Secrets(system).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t)
	// registered is as the apiserver stored it, defaults included.
	registered, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhookConfigurationFor(configName, "https://"+proxy.addr()+admission.Path), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grantWebhookCertRBAC(t, cs, system, secretName, configName, user)
	kubeconfig := impersonatingKubeconfig(t, c.Kubeconfig(), user)

	t.Run("a missing Secret is a clear error", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, bin, "webhook", "--listen=127.0.0.1:0", "--cert-secret="+system+"/absent",
			"--cert-dns-names=127.0.0.1", "--ca-bundle-of="+configName, "--kubeconfig="+c.Kubeconfig()).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Secret "+system+"/absent does not exist: create it") {
			t.Errorf("webhook with a missing Secret: %v, output:\n%s", err, out)
		}
	})

	args := []string{"webhook", "--listen=127.0.0.1:0", "--cert-secret=" + system + "/" + secretName, "--cert-dns-names=127.0.0.1",
		"--ca-bundle-of=" + configName, "--kubeconfig=" + kubeconfig, "--cert-validity=30s"}
	serving := regexp.MustCompile(`gpupack webhook: serving https://(\S+?)/`)
	var replicas []*testcluster.Process
	var addrs []string
	for _, name := range []string{"gpupack-webhook-a", "gpupack-webhook-b"} {
		replicas = append(replicas, c.Run(name, bin, args...))
	}
	for _, r := range replicas {
		addrs = append(addrs, r.LogAddress(serving))
	}
	proxy.setTargets(addrs)

	c.CreateNamespace("packed")
	c.LabelNamespace("packed", wellknown.LabelPack, wellknown.PackEnabled)

	// converged waits until the Secret, the configuration's caBundle and
	// both replicas agree on one certificate that the caBundle trusts,
	// other than not (nil: any), and returns it.
	converged := func(what string, not []byte) []byte {
		var leaf []byte
		poll(t, what, func(ctx context.Context) (bool, string, error) {
			s, err := cs.CoreV1().Secrets(system).Get(ctx, secretName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			bundle := cfg.Webhooks[0].ClientConfig.CABundle
			if len(bundle) == 0 || !bytes.Equal(bundle, s.Data[webhookcert.KeyCABundle]) {
				return false, "the caBundle is not the Secret's ca.crt", nil
			}
			block := pemCertificate(s.Data[corev1.TLSCertKey])
			if block == nil || bytes.Equal(block, not) {
				return false, "the Secret holds no new serving certificate", nil
			}
			for _, addr := range addrs {
				served, err := servedCertificate(addr, bundle)
				if err != nil {
					return false, fmt.Sprintf("replica %s: %v", addr, err), nil
				}
				if !bytes.Equal(served, block) {
					return false, "replica " + addr + " serves another certificate than the Secret's", nil
				}
			}
			leaf = block
			return true, "", nil
		})
		return leaf
	}
	first := converged("both replicas to serve one certificate that the caBundle trusts", nil)

	create := func(ctx context.Context, name string) (*corev1.Pod, error) {
		return cs.CoreV1().Pods("packed").Create(ctx, makePod("packed", name).gpus("nvidia.com/gpu", 1).obj(), metav1.CreateOptions{})
	}
	poll(t, "the first pod to be mutated", func(ctx context.Context) (bool, string, error) {
		p, err := create(ctx, fmt.Sprintf("first-%d", time.Now().UnixNano()))
		if err != nil {
			return false, err.Error(), nil // the apiserver may not have the caBundle yet
		}
		return p.Spec.SchedulerName == admission.SchedulerName, "schedulerName " + p.Spec.SchedulerName, nil
	})

	// Admit pods while the certificate is renewed: every one must pass.
	type admissions struct {
		n   int
		err error
	}
	stop := make(chan struct{})
	during := make(chan admissions, 1)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				during <- admissions{n: n}
				return
			case <-time.After(300 * time.Millisecond):
			}
			p, err := create(ctx, fmt.Sprintf("during-%03d", n))
			if err == nil && p.Spec.SchedulerName != admission.SchedulerName {
				err = fmt.Errorf("pod %s not mutated: schedulerName %s", p.Name, p.Spec.SchedulerName)
			}
			if err != nil {
				during <- admissions{n: n, err: err}
				return
			}
		}
	}()
	converged("both replicas to serve a renewed certificate", first)
	close(stop)
	if got := <-during; got.err != nil || got.n == 0 {
		t.Errorf("admission during the renewal: %d pods admitted, then %v", got.n, got.err)
	} else {
		t.Logf("%d pods admitted and mutated while the certificate was renewed", got.n)
	}
	if p, err := create(ctx, "after"); err != nil || p.Spec.SchedulerName != admission.SchedulerName {
		t.Errorf("pod created after the renewal: %v", err)
	}

	got, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Webhooks {
		got.Webhooks[i].ClientConfig.CABundle = nil
	}
	if diff := cmp.Diff(registered.Webhooks, got.Webhooks); diff != "" {
		t.Errorf("the webhook changed more than the caBundle (-registered +now):\n%s", diff)
	}
	for _, r := range replicas {
		if err := r.Exited(); err != nil {
			t.Error(err)
		}
	}
}

// webhookConfigurationFor registers the webhook at url as the chart does,
// but with failurePolicy Fail, so that a certificate the apiserver does
// not trust fails pod creation instead of skipping the webhook.
func webhookConfigurationFor(name, url string) *admissionregistrationv1.MutatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "pods.gpupack.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{wellknown.LabelPack: wellknown.PackEnabled}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// grantWebhookCertRBAC binds user to exactly the Role and ClusterRole that
// package webhookcert documents.
func grantWebhookCertRBAC(t *testing.T, cs kubernetes.Interface, namespace, secret, config, user string) {
	t.Helper()
	ctx := t.Context()
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "gpupack-webhook-cert"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get", "update"}}},
	}
	clusterRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "gpupack-webhook-cert"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{admissionregistrationv1.GroupName}, Resources: []string{"mutatingwebhookconfigurations"},
			ResourceNames: []string{config}, Verbs: []string{"get", "patch"}}},
	}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: role.ObjectMeta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, clusterRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: clusterRole.ObjectMeta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// impersonatingKubeconfig writes a copy of the admin's kubeconfig that
// acts as user.
func impersonatingKubeconfig(t *testing.T, admin, user string) string {
	t.Helper()
	config, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range config.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+user)
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// servedCertificate is the DER of the certificate served at addr, which
// must verify against the CA bundle.
func servedCertificate(addr string, bundle []byte) ([]byte, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("the caBundle holds no certificate")
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// pemCertificate is the DER of the first certificate of a PEM file, nil
// if it holds none.
func pemCertificate(data []byte) []byte {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil
	}
	return block.Bytes
}

// tcpProxy forwards each connection to the next of its targets, as a
// Service would to the webhook's replicas; the apiserver cannot resolve a
// Service here.
type tcpProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	targets []string
	next    int
}

func startProxy(t *testing.T) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(conn)
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) setTargets(targets []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = targets
}

func (p *tcpProxy) forward(conn net.Conn) {
	defer conn.Close()
	p.mu.Lock()
	if len(p.targets) == 0 {
		p.mu.Unlock()
		return
	}
	target := p.targets[p.next%len(p.targets)]
	p.next++
	p.mu.Unlock()
	upstream, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}
