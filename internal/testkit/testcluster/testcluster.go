// Package testcluster starts a real Kubernetes control plane for tests: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, with kwok acting
// as the kubelet of fake GPU nodes, so that tests exercise the real scheduler,
// controllers, admission and API semantics rather than a fake clientset.
//
// The controller-manager runs the controllers that make workloads and
// identities behave as in a real cluster (see controllers): Deployments,
// ReplicaSets and Jobs create and count their pods, every namespace gets its
// default ServiceAccount and kube-root-ca.crt, deleting a namespace or an
// owner removes what it holds, pods' ResourceClaimTemplates become
// ResourceClaims, and PodDisruptionBudgets guard evictions through the
// Eviction API. It runs none of the node controllers: nothing taints,
// evicts or garbage-collects pods because of a node's state.
//
// The binaries come from hack/k8s-bins.sh (or $GPUPACK_K8S_BINDIR). Without
// them Start skips the test, unless $GPUPACK_E2E is set, in which case it
// fails it.
//
// StartGPUOperator runs a stand-in for the GPU operator's mig-manager and
// device plugin (internal/gpusim/operator) on the cluster's nodes.
// StartKarpenter runs Karpenter's kwok cloud provider (hack/karpenter-bins.sh)
// against the cluster, whose nodes the cluster's kwok runs.
// StartKEDA runs KEDA's real operator and metrics API server
// (hack/keda-bins.sh), which the apiserver's aggregation layer serves
// external.metrics.k8s.io from.
//
// testcluster is a test edge: it imports client-go and starts processes. Only
// tests may import it.
package testcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultStartTimeout is how long Start waits for each component to become
// ready when Options.StartTimeout is zero. It bounds a hung start-up; it is
// not an expectation of speed.
const DefaultStartTimeout = 2 * time.Minute

// pollInterval is how often readiness and test conditions are polled.
const pollInterval = 100 * time.Millisecond

// Options configures Start.
type Options struct {
	// StartTimeout bounds the wait for each component to become ready, and
	// the wait of AddGPUNode for a node to become Ready. Zero means
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

// Cluster is a running control plane. Its methods report failures with
// t.Fatalf, so they must be called from the test's goroutine.
type Cluster struct {
	t          testing.TB
	kubeconfig string
	config     *rest.Config // the administrator's, which client uses
	client     kubernetes.Interface
	timeout    time.Duration
	dir, home  string // logs, and the components' HOME
}

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and kwok on loopback ports (started again on new ones when another process
// holds one), waits until each is ready, and registers cleanups that stop
// them all.
// Component logs are written under t.TempDir() and printed if the test fails.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	// t.TempDir registers its removal first, so it runs after the cleanups
	// below: the processes stop, then their logs are printed, then removed.
	dir := t.TempDir()
	b := &boot{t: t, bins: binDir(t), dir: dir, home: mkdir(t, dir, "home"), timeout: timeout}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range b.procs {
			t.Logf("testcluster: ----- %s log -----\n%s", p.name, p.logTail())
		}
	})
	etcdURL := b.etcd()
	api := b.apiserver(etcdURL)
	b.controllerManager(api)
	b.scheduler(api.kubeconfig)
	b.kwok(api.kubeconfig)
	return &Cluster{t: t, kubeconfig: api.kubeconfig, config: api.config, client: api.client, timeout: timeout, dir: dir, home: b.home}
}

// boot starts the components of one test cluster in turn, each on loopback
// ports, and keeps the processes for the logs of a failed test.
type boot struct {
	t               testing.TB
	bins, dir, home string
	timeout         time.Duration
	procs           []*process
}

// onPorts starts a component on n ports of its own: none of them can bind
// port 0 and say which it got, so each is told its ports and started again
// on new ones when another process holds one (startOnPorts).
func (b *boot) onPorts(name, binary string, n int, args func(ports []int) []string, probe func(ports []int) func(ctx context.Context) error) []int {
	b.t.Helper()
	start := func(name string, args ...string) *process {
		b.t.Helper()
		p := startProcess(b.t, name, b.dir, b.home, filepath.Join(b.bins, binary), args...)
		b.procs = append(b.procs, p)
		return p
	}
	_, ports, err := startOnPorts(b.t.Context(), b.timeout, start, name, n, args, probe)
	if err != nil {
		b.t.Fatalf("testcluster: %v", err)
	}
	return ports
}

// etcd starts etcd and returns its client URL.
func (b *boot) etcd() string {
	b.t.Helper()
	etcdName := "testcluster-" + randomToken(b.t)[:12]
	etcdPorts := b.onPorts("etcd", etcdBinary, 2, func(ports []int) []string {
		clientURL, peerURL := "http://"+hostPort(ports[0]), "http://"+hostPort(ports[1])
		return []string{
			"--name=" + etcdName,
			// A fresh data directory per attempt: a failed start may leave one behind.
			"--data-dir=" + filepath.Join(b.dir, fmt.Sprintf("etcd-%d", ports[0])),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=" + etcdName + "=" + peerURL,
			// The data is thrown away with the test; durability only costs time.
			"--unsafe-no-fsync",
		}
	}, func(ports []int) func(ctx context.Context) error {
		return httpProbe(http.DefaultClient, "http://"+hostPort(ports[0])+"/health")
	})
	return "http://" + hostPort(etcdPorts[0])
}

// apiserverAccess is what the later components and the tests need of a
// started kube-apiserver.
type apiserverAccess struct {
	kubeconfig string
	config     *rest.Config
	client     kubernetes.Interface
	// cert is the apiserver's serving certificate and its CA; saKey the
	// key that signs ServiceAccount tokens.
	cert, saKey string
}

// apiserver starts kube-apiserver on etcd, with an administrator's token
// and RBAC, and returns how to reach it.
func (b *boot) apiserver(etcdURL string) apiserverAccess {
	b.t.Helper()
	token := randomToken(b.t)
	tokenFile := writeFile(b.t, b.dir, "tokens.csv", token+`,admin,admin,"system:masters"`+"\n")
	saKey, saPub := serviceAccountKeyPair(b.t, b.dir)
	apiserverCerts := mkdir(b.t, b.dir, "apiserver-certs")
	a := apiserverAccess{cert: filepath.Join(apiserverCerts, "apiserver.crt"), saKey: saKey}
	aggregation := aggregationFlags(b.t, b.dir)
	b.onPorts("kube-apiserver", apiserverBinary, 1, func(ports []int) []string {
		return append([]string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", ports[0]),
			// Without --tls-cert-file the apiserver writes a self-signed serving
			// certificate, followed by its CA, to apiserver.crt here.
			"--cert-dir=" + apiserverCerts,
			"--token-auth-file=" + tokenFile,
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + saPub,
			"--service-account-signing-key-file=" + saKey,
			"--service-cluster-ip-range=10.96.0.0/16",
			// The endpoint reconciler would publish 127.0.0.1, which Endpoints
			// reject; nothing in a test needs the kubernetes Service's endpoints.
			"--endpoint-reconciler-type=none",
			"--enable-admission-plugins=" + strings.Join(admissionPlugins, ","),
			"--disable-admission-plugins=" + strings.Join(disabledAdmissionPlugins, ","),
		}, aggregation...)
	}, func(ports []int) func(ctx context.Context) error {
		a.kubeconfig = writeKubeconfig(b.t, b.dir, "https://"+hostPort(ports[0]), a.cert, token)
		a.client = nil
		return func(ctx context.Context) error {
			if a.client == nil {
				cfg, c, err := newClient(a.kubeconfig)
				if err != nil {
					return err // the certificate is not written yet
				}
				a.config, a.client = cfg, c
			}
			_, err := a.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}
	})
	return a
}

// controllerManager starts kube-controller-manager. It and the scheduler
// serve their health checks over HTTPS with a self-signed certificate that
// each writes to its --cert-dir, under its own name.
func (b *boot) controllerManager(api apiserverAccess) {
	b.t.Helper()
	certs := mkdir(b.t, b.dir, "controller-manager-certs")
	b.onPorts("kube-controller-manager", controllerManagerBinary, 1, func(ports []int) []string {
		return append(componentFlags(api.kubeconfig, certs, ports[0]),
			"--controllers="+strings.Join(controllers, ","),
			// Each controller acts as its own ServiceAccount in kube-system,
			// with the system:controller:* role the apiserver bootstraps, as
			// in a real cluster, rather than as the administrator.
			"--use-service-account-credentials",
			// The serviceaccount-token-controller signs the tokens of legacy
			// ServiceAccount token Secrets with the apiserver's signing key.
			"--service-account-private-key-file="+api.saKey,
			// The ca.crt of kube-root-ca.crt and of token Secrets: the
			// apiserver's serving certificate and its CA, which the
			// administrator's kubeconfig trusts too.
			"--root-ca-file="+api.cert,
			// The HPA controller scales a target down to the highest of its
			// recommendations over this window (5 minutes by default), so a
			// test sees a scale-down within its time.
			"--horizontal-pod-autoscaler-downscale-stabilization=10s",
		)
	}, selfSignedProbe(filepath.Join(certs, "kube-controller-manager.crt"), "/healthz"))
}

// scheduler starts kube-scheduler; its /readyz includes the sync of its
// informers.
func (b *boot) scheduler(kubeconfig string) {
	b.t.Helper()
	certs := mkdir(b.t, b.dir, "scheduler-certs")
	b.onPorts("kube-scheduler", schedulerBinary, 1, func(ports []int) []string {
		return componentFlags(kubeconfig, certs, ports[0])
	}, selfSignedProbe(filepath.Join(certs, "kube-scheduler.crt"), "/readyz"))
}

// kwok starts kwok, managing the nodes that carry its annotation.
func (b *boot) kwok(kubeconfig string) {
	b.t.Helper()
	stages := b.kwokStages()
	b.onPorts("kwok", kwokBinary, 1, func(ports []int) []string {
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--config=" + stages,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeAnnotationValue,
			"--server-address=" + hostPort(ports[0]),
		}
	}, func(ports []int) func(ctx context.Context) error {
		return httpProbe(http.DefaultClient, "http://"+hostPort(ports[0])+"/healthz")
	})
}

// LabelKeepsRunning on a pod of a Job keeps kwok from completing it:
// kwok's default pod-complete stage completes every running pod a Job
// owns at once, and a test of a Job that holds its GPU idle needs its pod
// to run on.
const LabelKeepsRunning = "keeps-running"

// AnnotationCompletesAfter on a pod is how long it runs before kwok
// completes it (phase Succeeded), counted from when kwok has it running: a
// Go duration such as "12.5s" (kwok's stage delay reads it with
// time.ParseDuration). It makes pods that finish on their own, as a
// churn of batch work needs; a pod without it runs until deleted, and a
// Job's pod with it completes after it rather than at once.
const AnnotationCompletesAfter = "completes-after"

// kwokStages writes kwok's default stages with the pod-complete stage
// skipping pods labelled LabelKeepsRunning or annotated
// AnnotationCompletesAfter, and a stage pod-complete-after that completes
// a running pod AnnotationCompletesAfter after kwok has it running, and
// returns the file's path.
func (b *boot) kwokStages() string {
	b.t.Helper()
	data, err := os.ReadFile(filepath.Join(b.bins, kwokStagesFile))
	if err != nil {
		b.t.Fatal(err)
	}
	text, err := withCompletesAfter(string(data))
	if err != nil {
		b.t.Fatalf("testcluster: %v", err)
	}
	path := filepath.Join(b.dir, kwokStagesFile)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// The parts of kwok's pod-complete stage that withCompletesAfter edits.
const (
	podCompleteName = "  name: pod-complete\n"
	podCompleteJob  = "    - key: '.metadata.ownerReferences.[].kind'\n      operator: 'In'\n      values:\n      - 'Job'\n"
	podCompleteNext = "  next:\n"
)

// withCompletesAfter edits kwok's default stages (the text of its
// kwok-stages.yaml): pod-complete, which completes a Job's running pods at
// once, skips pods labelled LabelKeepsRunning or annotated
// AnnotationCompletesAfter; a copy of it, pod-complete-after, selects
// running pods annotated AnnotationCompletesAfter, whoever owns them, and
// completes each after the delay its annotation gives, with kwok's own
// status template.
func withCompletesAfter(text string) (string, error) {
	docs := strings.Split(text, "\n---\n")
	for i, doc := range docs {
		if !strings.Contains(doc, "\n"+podCompleteName) || strings.Count(doc, podCompleteJob) != 1 || strings.Count(doc, podCompleteNext) != 1 {
			continue
		}
		skip := "    - key: '.metadata.labels[\"" + LabelKeepsRunning + "\"]'\n      operator: 'DoesNotExist'\n" +
			"    - key: '.metadata.annotations[\"" + AnnotationCompletesAfter + "\"]'\n      operator: 'DoesNotExist'\n"
		after := strings.Replace(doc, "\n"+podCompleteName, "\n  name: pod-complete-after\n", 1)
		after = strings.Replace(after, podCompleteJob,
			"    - key: '.metadata.annotations[\""+AnnotationCompletesAfter+"\"]'\n      operator: 'Exists'\n", 1)
		after = strings.Replace(after, podCompleteNext,
			"  delay:\n    durationFrom:\n      jq:\n        expression: '.metadata.annotations[\""+AnnotationCompletesAfter+"\"]'\n"+podCompleteNext, 1)
		docs[i] = strings.Replace(doc, podCompleteJob, podCompleteJob+skip, 1)
		docs = slices.Insert(docs, i+1, after)
		return strings.Join(docs, "\n---\n"), nil
	}
	return "", errors.New("kwok's stages have no pod-complete stage selecting Job pods and setting their status; update withCompletesAfter for this kwok version")
}

// componentFlags are the flags that kube-controller-manager and
// kube-scheduler share: the administrator's kubeconfig for everything, no
// leader election, and a loopback secure port whose self-signed certificate
// goes to certDir.
func componentFlags(kubeconfig, certDir string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		// The apiserver has no client CA (its ConfigMap
		// extension-apiserver-authentication holds only the front proxy's
		// CA), so there is nothing to look up; bearer tokens still work
		// through TokenReview.
		"--authentication-skip-lookup",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + certDir,
	}
}

// selfSignedProbe returns the probe of a component that serves path on
// https://127.0.0.1:ports[0] with the self-signed certificate in certFile:
// it fails until the certificate is written, then until path answers 200 OK.
func selfSignedProbe(certFile, path string) func(ports []int) func(ctx context.Context) error {
	return func(ports []int) func(ctx context.Context) error {
		var client *http.Client
		return func(ctx context.Context) error {
			if client == nil {
				c, err := httpsClient(certFile)
				if err != nil {
					return err // the certificate is not written yet
				}
				client = c
			}
			return httpProbe(client, "https://"+hostPort(ports[0])+path)(ctx)
		}
	}
}

// controllers are the kube-controller-manager v1.37 controllers that Start
// runs: those that make workloads, namespaces, ServiceAccounts and DRA
// claims behave as in a real cluster.
//
// Left out on purpose: node-lifecycle-controller and taint-eviction-controller
// would taint nodes whose kubelet does not report (every node a test creates
// without kwok, and each kwok node until kwok first marks it Ready) and evict
// their pods; pod-garbage-collector-controller would delete pods bound to
// nodes that do not exist, which tests create to describe a cluster;
// ttl-controller annotates nodes; node-ipam, the volume, endpoint and
// certificate controllers serve what kwok's fake nodes never use. Add a
// controller here, with the reason, when a test needs it.
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"job-controller",
	// A HorizontalPodAutoscaler stops scaling a target that is at 0
	// replicas (ScalingDisabled), which reclaim's scale-to-zero relies on.
	"horizontal-pod-autoscaler-controller",
	// A ResourceQuota's status (hard and used) is counted, which the
	// ResourceQuota admission plugin needs to admit or refuse pods.
	"resourcequota-controller",
	// Every namespace gets its default ServiceAccount, which the
	// ServiceAccount admission plugin requires of each pod.
	"serviceaccount-controller",
	// Legacy ServiceAccount token Secrets get their token.
	"serviceaccount-token-controller",
	// Every namespace gets the kube-root-ca.crt ConfigMap that projected
	// ServiceAccount token volumes mount.
	"root-ca-certificate-publisher-controller",
	// Deleting a namespace deletes what it holds, then the namespace.
	"namespace-controller",
	// Deleting an owner deletes its dependents: a Deployment's ReplicaSets,
	// their pods.
	"garbage-collector-controller",
	// The admin, edit and view ClusterRoles get their rules from the roles
	// that aggregate into them.
	"clusterrole-aggregation-controller",
	// A pod's ResourceClaimTemplates become its ResourceClaims.
	"resourceclaim-controller",
	// A PodDisruptionBudget's status (healthy pods, disruptions allowed) is
	// counted. The apiserver's Eviction API refuses every eviction that a
	// budget covers, with 429 TooManyRequests, until this controller has
	// observed the budget, and decides each eviction by that status.
	"disruption-controller",
}

// Process is a component that a test runs beside the control plane.
type Process struct {
	t testing.TB
	p *process
}

// Stop stops the process now (SIGTERM, then SIGKILL); fault tests use it to
// kill a component mid-run. It is idempotent, and runs at cleanup anyway.
func (p *Process) Stop() { p.p.stop() }

// Exited returns an error naming the process if it is no longer running.
func (p *Process) Exited() error { return p.p.exitedEarly() }

// LogAddress waits until a line of the process's log matches re and
// returns its first submatch: the address that a server told to bind port
// 0 says it got (gpupack's "serving https://ADDR/...", Prometheus'
// "Listening on" address=ADDR). It fails the test if the process exits
// first or DefaultStartTimeout passes.
func (p *Process) LogAddress(re *regexp.Regexp) string {
	p.t.Helper()
	addr, err := waitLogAddress(p.t.Context(), p.p, DefaultStartTimeout, re)
	if err != nil {
		p.t.Fatalf("testcluster: %v", err)
	}
	return addr
}

// CPUTime is the user and system CPU time the process used, once it has
// exited (after Stop); zero before.
func (p *Process) CPUTime() time.Duration {
	select {
	case <-p.p.exited:
		if st := p.p.cmd.ProcessState; st != nil {
			return st.UserTime() + st.SystemTime()
		}
	default:
	}
	return 0
}

// Run starts binary with args beside the control plane (a second scheduler,
// a webhook server), as the components are started: in its own process
// group, HOME set to an empty directory, its log kept with theirs and
// printed if the test fails, stopped at cleanup.
func (c *Cluster) Run(name, binary string, args ...string) *Process {
	c.t.Helper()
	p := startProcess(c.t, name, c.dir, c.home, binary, args...)
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("testcluster: ----- %s log -----\n%s", p.name, p.logTail())
		}
	})
	return &Process{t: c.t, p: p}
}

// admissionPlugins are the admission plugins the apiserver runs: namespace
// lifecycle, ServiceAccount defaulting, pod priority, ResourceQuota (a
// namespace without quotas is not limited) and the webhooks that gpupack's
// own webhook needs. disabledAdmissionPlugins turns off the rest of
// kube-apiserver v1.37's default set. TaintNodesByCondition in particular
// would taint every new node not-ready, and only the node-lifecycle
// controller, which does not run (see controllers), would remove the taint.
var (
	admissionPlugins = []string{
		"NamespaceLifecycle",
		"ServiceAccount",
		"Priority",
		"ResourceQuota",
		"MutatingAdmissionWebhook",
		"ValidatingAdmissionWebhook",
	}
	disabledAdmissionPlugins = []string{
		"LimitRanger",
		"DefaultStorageClass",
		"PersistentVolumeClaimResize",
		"DefaultTolerationSeconds",
		"StorageObjectInUseProtection",
		"PodGroupProtection",
		"TaintNodesByCondition",
		"RuntimeClass",
		"CertificateApproval",
		"CertificateSigning",
		"ClusterTrustBundleAttest",
		"CertificateSubjectRestriction",
		"DefaultIngressClass",
		"PodSecurity",
		"PodTopologyLabels",
		"MutatingAdmissionPolicy",
		"ValidatingAdmissionPolicy",
		"NodeDeclaredFeatureValidator",
		"PodResizeValidator",
	}
)

// Client returns a client authenticated as a cluster administrator.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Kubeconfig returns the path of a kubeconfig file for a cluster
// administrator, for components and commands under test.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// CreateNamespace creates the namespace and waits until the
// controller-manager has created its default ServiceAccount, which the
// ServiceAccount admission plugin requires of every pod.
func (c *Cluster) CreateNamespace(name string) {
	c.t.Helper()
	ctx := c.t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("testcluster: create namespace %q: %v", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, pollInterval, c.timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		c.t.Fatalf("testcluster: namespace %q has no default ServiceAccount after %v (the serviceaccount-controller of kube-controller-manager creates it; its log is printed below): %v", name, c.timeout, err)
	}
}

// waitReady polls probe until it succeeds, p exits or timeout passes, and
// says which of them happened, with the probe's last error.
func waitReady(ctx context.Context, p *process, timeout time.Duration, probe func(ctx context.Context) error) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := p.exitedEarly(); err != nil {
			return false, err
		}
		probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		lastErr = probe(probeCtx)
		if errors.Is(lastErr, errPortTaken) {
			return false, lastErr
		}
		return lastErr == nil, nil
	})
	if err == nil {
		return nil
	}
	if p.exitedEarly() != nil {
		return err
	}
	return fmt.Errorf("%s not ready after %v (log %s): %w", p.name, timeout, p.logPath, errors.Join(err, lastErr))
}

// httpProbe returns a probe that succeeds when url answers 200 OK.
func httpProbe(client *http.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// httpsClient returns an HTTP client that trusts the certificates in caFile.
func httpsClient(caFile string) (*http.Client, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &http.Client{Transport: transport}, nil
}

// newClient returns the configuration and a client for kubeconfig; it fails
// while the CA file that kubeconfig names does not exist yet.
func newClient(kubeconfig string) (*rest.Config, kubernetes.Interface, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	// Tests create objects in bursts; the default 5 QPS would throttle them.
	config.QPS = 100
	config.Burst = 200
	config.UserAgent = rest.DefaultKubernetesUserAgent() + " gpupack-testcluster"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, nil, err
	}
	return config, client, nil
}

// writeKubeconfig writes a kubeconfig for server with a bearer token and returns its path.
func writeKubeconfig(t testing.TB, dir, server, caFile, token string) string {
	t.Helper()
	const name = "testcluster"
	config := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{name: {Server: server, CertificateAuthority: caFile}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name}},
		CurrentContext: name,
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(config, path); err != nil {
		t.Fatalf("testcluster: write kubeconfig: %v", err)
	}
	return path
}

// serviceAccountKeyPair writes an ECDSA P-256 key pair for signing
// ServiceAccount tokens and returns the paths of the private and public keys.
func serviceAccountKeyPair(t testing.TB, dir string) (privatePath, publicPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcluster: generate ServiceAccount key: %v", err)
	}
	private, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcluster: encode ServiceAccount key: %v", err)
	}
	public, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatalf("testcluster: encode ServiceAccount public key: %v", err)
	}
	privatePath = writeFile(t, dir, "sa.key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: private})))
	publicPath = writeFile(t, dir, "sa.pub", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: public})))
	return privatePath, publicPath
}

// randomToken returns a bearer token of 32 random bytes in hex.
func randomToken(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testcluster: generate token: %v", err)
	}
	return hex.EncodeToString(b)
}

// writeFile writes content to dir/name, readable by the owner only, and returns the path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return path
}

// mkdir creates dir/name and returns its path.
func mkdir(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return path
}

// Parallel runs create(0..n-1) on 32 goroutines, for tests and benchmarks
// that fill the cluster with many objects, and fails t on the first error.
func Parallel(t testing.TB, n int, create func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := create(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// EnvInt is the positive whole number the environment variable name
// holds (a benchmark's size, such as GPUPACK_BENCH_GPUS), or def where it
// is unset; anything else fails tb.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}
