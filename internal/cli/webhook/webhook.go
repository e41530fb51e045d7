// Package webhook is the `gpupack webhook` verb: the mutating admission
// webhook that lets users keep their manifests unchanged. It serves
// package admission's decision with controller-runtime's admission handler
// over TLS; the MutatingWebhookConfiguration (deploy/webhook.yaml) sends it
// the pods of namespaces labelled gpupack.io/pack=enabled, with
// failurePolicy Ignore, so pods are created unchanged while it is down.
// It denies only a pod that contradicts itself: any failure of its own
// admits the pod unchanged with a warning (handler.Handle), since the
// apiserver obeys a denial whatever the failurePolicy.
//
// Its certificate comes either from --cert-dir (cert-manager's Secret,
// mounted, watched by controller-runtime's certwatcher) or, with
// --cert-secret, from a Secret that the webhook manages and rotates itself
// (package webhookcert), setting the configuration's caBundle too. That
// mode needs this RBAC and no more: a Role in the Secret's namespace with
// get and update on secrets, resourceNames the Secret; a ClusterRole with
// get and patch on admissionregistration.k8s.io
// mutatingwebhookconfigurations, resourceNames the configuration.
package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/webhook/admission"
	"github.com/gpupack/gpupack/internal/webhook/webhookcert"
	"github.com/gpupack/gpupack/plan"
)

// Path is where the webhook serves pod admission.
const Path = admission.Path

type options struct {
	listen     string
	certDir    string
	selfSigned string
	requests   string
	// The self-managed certificate: a Secret NAMESPACE/NAME, the names
	// it must hold, the webhook configuration that gets its CA.
	certSecret   string
	certHosts    []string
	caBundleOf   string
	certValidity time.Duration
	kubeconfig   string
	// reloadEvery is how often the requests file is read again: a
	// ConfigMap volume changes it in place (by swapping a symlink), with
	// no event the webhook could wait for short of polling.
	reloadEvery time.Duration
}

// NewCommand returns the webhook command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{reloadEvery: 10 * time.Second, certValidity: 365 * 24 * time.Hour}
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
line "serving https://ADDR/..." on stderr says which address was bound.
It binds only once it holds a certificate, so a tcpSocket readiness probe
(or GET /readyz) tells when it serves.

The certificate comes from one of:
  --cert-dir DIR      tls.crt and tls.key, e.g. cert-manager's Secret mounted
                      (reloaded when they change); the default;
  --cert-secret NS/NAME --cert-dns-names ... --ca-bundle-of CONFIG
                      without cert-manager: the webhook keeps its own CA and
                      serving certificate in that Secret (type
                      kubernetes.io/tls, created beforehand, may be empty;
                      keys ca.crt, ca.key, tls.crt, tls.key), shared by all
                      replicas: one generates what is missing or due (a
                      10-year ECDSA P-256 CA; a serving certificate for the
                      DNS names and IPs, --cert-validity), the others read
                      it. Each is renewed at 2/3 of its validity; an old CA
                      stays trusted until nothing it signed is served. It
                      sets clientConfig.caBundle of every webhook of the
                      MutatingWebhookConfiguration CONFIG and changes nothing
                      else, and rereads the Secret every 30 seconds. It needs
                      a Role with get, update on secrets (resourceNames: the
                      Secret) and a ClusterRole with get, patch on
                      admissionregistration.k8s.io mutatingwebhookconfigurations
                      (resourceNames: CONFIG); nothing else;
  --self-signed HOST  a one-off self-signed certificate written to --cert-dir;
                      for tests and trials.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(ctx, o, cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", ":9443", "address to serve TLS on (port 0: any free port, printed on stderr)")
	f.StringVar(&o.certDir, "cert-dir", "/etc/gpupack/webhook-tls", "directory holding tls.crt and tls.key (cert-manager's Secret, mounted)")
	f.StringVar(&o.selfSigned, "self-signed", "", "write a self-signed certificate for this host (IP or DNS name) to --cert-dir first, with ca.crt beside it for the caBundle; for tests and trials")
	f.StringVar(&o.requests, "requests", "", "the plan's workload-requests.yaml, reloaded when it changes; without it, or while it is missing, only the scheduler name is set")
	f.StringVar(&o.certSecret, "cert-secret", "", "NAMESPACE/NAME of the Secret in which the webhook keeps and rotates its own certificate (without cert-manager); instead of --cert-dir")
	f.StringSliceVar(&o.certHosts, "cert-dns-names", nil, "with --cert-secret: the DNS names (and IP addresses) of the serving certificate, comma-separated, e.g. the Service's gpupack-webhook.gpupack-system.svc")
	f.StringVar(&o.caBundleOf, "ca-bundle-of", "", "with --cert-secret: the MutatingWebhookConfiguration whose webhooks get the CA bundle")
	f.DurationVar(&o.certValidity, "cert-validity", o.certValidity, "with --cert-secret: how long a serving certificate is valid; renewed at 2/3 of it")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --cert-secret: "+clio.KubeconfigUsage)
	return cmd
}

// minCertValidity leaves the renewal loop time to act.
const minCertValidity = 10 * time.Second

// checkCertFlags refuses contradictory certificate flags; changed says
// whether a flag was given.
func (o *options) checkCertFlags(changed func(name string) bool) error {
	if o.certSecret == "" {
		for _, name := range []string{"cert-dns-names", "ca-bundle-of", "cert-validity", "kubeconfig"} {
			if changed(name) {
				return fmt.Errorf("--%s applies to --cert-secret only: add --cert-secret NAMESPACE/NAME, or drop --%s", name, name)
			}
		}
		return nil
	}
	switch {
	case changed("cert-dir"):
		return errors.New("--cert-secret and --cert-dir both say where the certificate comes from: give --cert-secret to have the webhook manage it, --cert-dir for cert-manager's")
	case o.selfSigned != "":
		return errors.New("--cert-secret and --self-signed both say where the certificate comes from: give one")
	}
	if ns, name, ok := strings.Cut(o.certSecret, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("--cert-secret %q: want NAMESPACE/NAME, e.g. gpupack-system/gpupack-webhook-tls", o.certSecret)
	}
	if err := webhookcert.ValidateHosts(o.certHosts); err != nil {
		return fmt.Errorf("--cert-dns-names: %w; name the webhook's Service, e.g. gpupack-webhook.gpupack-system.svc", err)
	}
	if o.caBundleOf == "" {
		return errors.New("--cert-secret needs --ca-bundle-of: the MutatingWebhookConfiguration that must trust the webhook's CA")
	}
	if o.certValidity < minCertValidity || o.certValidity > webhookcert.DefaultCAValidity {
		return fmt.Errorf("--cert-validity %s: want between %s and %s (the CA's)", o.certValidity, minCertValidity, webhookcert.DefaultCAValidity)
	}
	return nil
}

// certSettle is webhookcert.Policy.Settle: four rereads of the Secret.
const certSettle = 4 * webhookcert.Poll

// secretCertificate syncs the --cert-secret Secret once, so that the
// webhook holds a certificate before it binds, and keeps it in the
// background.
func (o *options) secretCertificate(ctx context.Context, stderr io.Writer) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	config, err := kube.RESTConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	ns, name, _ := strings.Cut(o.certSecret, "/")
	m := webhookcert.New(webhookcert.Config{
		Client: client, Namespace: ns, Name: name, WebhookConfiguration: o.caBundleOf,
		Policy: webhookcert.Policy{Hosts: o.certHosts, Validity: o.certValidity, Settle: certSettle},
		Log:    stderr,
	})
	next, err := m.Sync(ctx)
	if err != nil {
		return nil, fmt.Errorf("--cert-secret: %w", err)
	}
	go m.Run(ctx, next)
	return m.GetCertificate, nil
}

func run(ctx context.Context, o *options, cmd *cobra.Command) error {
	stderr := cmd.ErrOrStderr()
	if err := o.checkCertFlags(cmd.Flags().Changed); err != nil {
		return err
	}
	// controller-runtime's packages that take no logger (its certificate
	// watcher) log through its global logger, which discards everything
	// until it is set and then complains on stderr.
	log := logr.FromSlogHandler(slog.NewTextHandler(stderr, nil))
	ctrllog.SetLogger(log)
	var requests *requestsFile
	if o.requests != "" {
		requests = &requestsFile{path: o.requests, log: stderr}
		requests.load()
		go requests.watch(ctx, o.reloadEvery)
	}
	getCertificate, source, err := o.certificate(ctx, stderr)
	if err != nil {
		return err
	}
	if getCertificate == nil { // stopped before holding a certificate
		return nil
	}
	// The webhook binds the address itself (port 0 included) and says
	// which it got, so that tests and probes need not guess a free port.
	ln, err := tls.Listen("tcp", o.listen, &tls.Config{GetCertificate: getCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	mux, err := newMux(requests.current, log)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "gpupack webhook: serving https://%s%s (%s)\n", ln.Addr(), Path, source)
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

// newMux routes the webhook's endpoints: pod admission at Path, through
// controller-runtime's admission webhook with its metrics; /metrics, the
// metrics of controller-runtime's registry (the admission webhook's
// requests, latency and panics, the certificate watcher's reads, and
// gpupack_webhook_failures_total); and /readyz.
func newMux(requests func() map[string]plan.WorkloadRequest, log logr.Logger) (*http.ServeMux, error) {
	hook, err := ctrladmission.StandaloneWebhook(&ctrladmission.Webhook{Handler: newHandler(requests, log)},
		ctrladmission.StandaloneOptions{Logger: log.WithName("admission"), MetricsPath: Path})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, hook)
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux, nil
}

// certificate returns what serves the TLS certificate and where it comes
// from, once the webhook holds one; nil if ctx ended first.
func (o *options) certificate(ctx context.Context, stderr io.Writer) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), string, error) {
	if o.certSecret != "" {
		get, err := o.secretCertificate(ctx, stderr)
		if err != nil && ctx.Err() != nil {
			return nil, "", nil
		}
		return get, "certificate managed in Secret " + o.certSecret, err
	}
	if o.selfSigned != "" {
		if err := writeSelfSigned(o.certDir, o.selfSigned); err != nil {
			return nil, "", fmt.Errorf("--self-signed %s: %w", o.selfSigned, err)
		}
	}
	certs, err := certwatcher.New(filepath.Join(o.certDir, "tls.crt"), filepath.Join(o.certDir, "tls.key"))
	if err != nil {
		return nil, "", fmt.Errorf("--cert-dir %s: %w", o.certDir, err)
	}
	go func() {
		if err := certs.Start(ctx); err != nil {
			fmt.Fprintf(stderr, "gpupack webhook: watching the certificates in %s: %v\n", o.certDir, err)
		}
	}()
	return certs.GetCertificate, "certificates in " + o.certDir, nil
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
