// Package webhook is the `gpupack webhook` verb: the mutating admission
// webhook that lets users keep their manifests unchanged. It serves
// package admission's decision with controller-runtime's admission handler
// and certificate watcher over TLS; the MutatingWebhookConfiguration (deploy/webhook.yaml) sends it
// the pods of namespaces labelled gpupack.io/pack=enabled, with
// failurePolicy Ignore, so pods are created unchanged while it is down.
package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpupack/gpupack/internal/admission"
	"github.com/gpupack/gpupack/internal/wellknown"
	"github.com/gpupack/gpupack/plan"
)

// Path is where the webhook serves pod admission.
const Path = admission.Path

type options struct {
	listen     string
	certDir    string
	selfSigned string
	requests   string
	// reloadEvery is how often the requests file is read again: a
	// ConfigMap volume changes it in place (by swapping a symlink), with
	// no event the webhook could wait for short of polling.
	reloadEvery time.Duration
}

// NewCommand returns the webhook command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{reloadEvery: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the mutating admission webhook that sends GPU pods to gpupack-scheduler and rewrites their requests per the plan",
		Long: `webhook serves ` + Path + ` over TLS for a MutatingWebhookConfiguration
(deploy/webhook.yaml). For each pod with a GPU request it:
  - sets schedulerName: ` + admission.SchedulerName + `;
  - rewrites the request of a workload named in --requests (the plan's
    workload-requests.yaml) from what it asked ("before") to the planned
    resource, e.g. nvidia.com/gpu: 1 to nvidia.com/mig-2g.20gb: 1;
  - records both in the annotation ` + wellknown.AnnotationAdmission + `;
  - rejects a pod that asks for whole GPUs and MIG slices at once.
Pods without a GPU request are allowed unchanged.

The --requests file is read again every 10 seconds (a mounted ConfigMap
changes in place). While it does not exist the webhook rewrites no request
and says so; a new version that does not parse is refused with an error on
stderr, and the last good one stays in use. --listen may name port 0; the
first line on stderr says which address was bound.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(ctx, o, cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", ":9443", "address to serve TLS on (port 0: any free port, printed on stderr)")
	f.StringVar(&o.certDir, "cert-dir", "/etc/gpupack/webhook-tls", "directory holding tls.crt and tls.key (cert-manager's Secret, mounted)")
	f.StringVar(&o.selfSigned, "self-signed", "", "write a self-signed certificate for this host (IP or DNS name) to --cert-dir first, with ca.crt beside it for the caBundle; for tests and trials")
	f.StringVar(&o.requests, "requests", "", "the plan's workload-requests.yaml, reloaded when it changes; without it, or while it is missing, only the scheduler name is set")
	return cmd
}

func run(ctx context.Context, o *options, cmd *cobra.Command) error {
	stderr := cmd.ErrOrStderr()
	var requests *requestsFile
	if o.requests != "" {
		requests = &requestsFile{path: o.requests, log: stderr}
		requests.load()
		go requests.watch(ctx, o.reloadEvery)
	}
	if o.selfSigned != "" {
		if err := writeSelfSigned(o.certDir, o.selfSigned); err != nil {
			return fmt.Errorf("--self-signed %s: %w", o.selfSigned, err)
		}
	}
	certs, err := certwatcher.New(filepath.Join(o.certDir, "tls.crt"), filepath.Join(o.certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("--cert-dir %s: %w", o.certDir, err)
	}
	go func() {
		if err := certs.Start(ctx); err != nil {
			fmt.Fprintf(stderr, "gpupack webhook: watching the certificates in %s: %v\n", o.certDir, err)
		}
	}()
	// The webhook binds the address itself (port 0 included) and says
	// which it got, so that tests and probes need not guess a free port.
	ln, err := tls.Listen("tcp", o.listen, &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, &ctrlwebhook.Admission{Handler: NewHandler(requests.current)})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "gpupack webhook: serving https://%s%s (certificates in %s)\n", ln.Addr(), Path, o.certDir)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// handler adapts admission.Mutate to controller-runtime's admission.Handler.
type handler struct {
	decoder  ctrladmission.Decoder
	requests func() map[string]plan.WorkloadRequest
}

// NewHandler returns the pod admission handler; requests returns the
// planned requests for each admission (nil: only the scheduler name is
// set).
func NewHandler(requests func() map[string]plan.WorkloadRequest) ctrladmission.Handler {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return &handler{decoder: ctrladmission.NewDecoder(scheme), requests: requests}
}

// Handle decodes the pod and patches it with what admission.Mutate changed.
func (h *handler) Handle(_ context.Context, req ctrladmission.Request) ctrladmission.Response {
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	changes, err := admission.Mutate(pod, h.requests())
	var contradiction *admission.ContradictionError
	switch {
	case errors.As(err, &contradiction):
		return ctrladmission.Denied(err.Error())
	case err != nil:
		return ctrladmission.Errored(http.StatusInternalServerError, err)
	case changes == nil:
		return ctrladmission.Allowed("no GPU request")
	}
	mutated, err := json.Marshal(pod)
	if err != nil {
		return ctrladmission.Errored(http.StatusInternalServerError, err)
	}
	return ctrladmission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// writeSelfSigned writes tls.crt, tls.key and ca.crt (the certificate
// itself) for host to dir, valid for a year.
func writeSelfSigned(dir, host string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, data := range map[string][]byte{
		"tls.crt": certPEM,
		"ca.crt":  certPEM,
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
