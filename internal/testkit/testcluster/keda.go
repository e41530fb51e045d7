package testcluster

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// KEDA's binaries, built by hack/keda-bins.sh, and where they are found.
const (
	envKEDABinDir  = "GPUPACK_KEDA_BINDIR"
	kedaOperator   = "keda-operator"
	kedaAdapter    = "keda-adapter"
	kedaBinsScript = "keda-bins.sh"
)

// KEDA's namespace, and the names its own manifests give the metrics API
// server's Service and APIService.
const (
	kedaNamespace     = "keda"
	kedaAdapterName   = "keda-metrics-apiserver"
	externalMetricsGV = "external.metrics.k8s.io/v1beta1"
)

// kedaCRDs are KEDA's CRDs, copied unchanged from the module
// (neighbours/README.md says whence); its operator watches every kind.
var kedaCRDs = []string{
	"keda.sh_scaledobjects.yaml",
	"keda.sh_scaledjobs.yaml",
	"keda.sh_triggerauthentications.yaml",
	"keda.sh_clustertriggerauthentications.yaml",
	"eventing.keda.sh_cloudeventsources.yaml",
	"eventing.keda.sh_clustercloudeventsources.yaml",
}

var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// StartKEDA runs KEDA (hack/keda-bins.sh builds it) against the cluster, as
// its own manifests deploy it, and waits until the apiserver serves
// external.metrics.k8s.io through it:
//
//   - its CRDs;
//   - keda-operator, watching every namespace, leader election and
//     certificate rotation off, which scales a target between 0 and
//     minReplicaCount itself and creates the HorizontalPodAutoscaler that
//     scales it above;
//   - keda-adapter, the external metrics API server, which the
//     apiserver's aggregation layer proxies the HPA controller's requests
//     to, and which asks the operator for each metric over gRPC;
//   - their mutual TLS certificates, from a CA of the test's, in place of
//     the certificates the operator would rotate;
//   - the APIService v1beta1.external.metrics.k8s.io, whose Service is an
//     ExternalName Service naming 127.0.0.1: the aggregator resolves it to
//     the adapter's loopback port, where a cluster routes to the adapter's
//     pod.
//
// Both run as the cluster's administrator, not as KEDA's ServiceAccounts,
// and KEDA's admission webhooks do not run. Without the binaries the test
// is skipped, or fails under $GPUPACK_E2E. A test that starts KEDA does not
// call InstallNeighbourCRDs, which installs the ScaledObject CRD too.
func (c *Cluster) StartKEDA() {
	c.t.Helper()
	bins := kedaBinDir(c.t)
	c.installKEDACRDs()
	c.CreateNamespace(kedaNamespace)
	certs, caPEM := c.kedaCerts()
	grpcAddr := c.startKEDAOperator(filepath.Join(bins, kedaOperator), certs)
	port := c.startKEDAAdapter(filepath.Join(bins, kedaAdapter), certs, grpcAddr)
	c.registerExternalMetrics(port, caPEM)
}

// kedaBinDir returns the directory with KEDA's binaries: $GPUPACK_KEDA_BINDIR,
// else what hack/keda-bins.sh --print-dir names. When one is missing it
// skips the test, or fails it if GPUPACK_E2E is set.
func kedaBinDir(t testing.TB) string {
	t.Helper()
	dir, err := locateKEDABinDir()
	if err == nil {
		err = checkKEDABins(dir)
	}
	if err == nil {
		return dir
	}
	if _, required := os.LookupEnv(envE2E); required {
		t.Fatalf("testcluster: %v; %s is set, so this is a failure, not a skip: run hack/%s", err, envE2E, kedaBinsScript)
	}
	t.Skipf("testcluster: %v; run hack/%s to build them", err, kedaBinsScript)
	return ""
}

func locateKEDABinDir() (string, error) {
	if dir := os.Getenv(envKEDABinDir); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %w", envKEDABinDir, err)
	}
	script := filepath.Join(root, "hack", kedaBinsScript)
	out, err := exec.Command("bash", script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %s --print-dir failed: %w", envKEDABinDir, script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkKEDABins reports the first of KEDA's binaries missing from dir.
func checkKEDABins(dir string) error {
	for _, name := range []string{kedaOperator, kedaAdapter} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("missing a KEDA binary: %w", err)
		}
	}
	return nil
}

// installKEDACRDs creates KEDA's CRDs and waits until both of its groups
// are served.
func (c *Cluster) installKEDACRDs() {
	c.t.Helper()
	var paths []string
	for _, name := range kedaCRDs {
		paths = append(paths, "neighbours/"+name)
	}
	crds := c.readCRDs(neighbourCRDs, paths...)
	c.InstallCRDs(crds...)
	for _, gv := range []string{"keda.sh/v1alpha1", "eventing.keda.sh/v1alpha1"} {
		c.waitServed(gv)
	}
}

// waitServed waits until discovery lists a resource of the group version.
func (c *Cluster) waitServed(gv string) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(c.t.Context(), pollInterval, c.timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.client.Discovery().ServerResourcesForGroupVersion(gv)
		return err == nil && len(list.APIResources) > 0, nil
	})
	if err != nil {
		c.t.Fatalf("testcluster: %s not served after %v: %v", gv, c.timeout, err)
	}
}

// kedaCerts writes what KEDA's certificate rotation would put in its
// Secret, in the one directory that both binaries read: ca.crt, and
// tls.crt and tls.key, which the operator's gRPC server, the adapter's
// gRPC client and the adapter's HTTPS server all show. It returns the
// directory and the CA.
func (c *Cluster) kedaCerts() (dir string, caPEM []byte) {
	c.t.Helper()
	dir = mkdir(c.t, c.dir, "keda-certs")
	ca := newCA(c.t, "keda-ca")
	ca.writeCert(c.t, dir, "ca.crt")
	hosts := []string{"127.0.0.1", "localhost",
		"keda-operator." + kedaNamespace + ".svc", kedaAdapterName + "." + kedaNamespace + ".svc"}
	ca.issue(c.t, dir, "tls.crt", "tls.key", "keda", hosts, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return dir, ca.pem
}

// kedaEnv is the environment KEDA's manifests give both binaries: every
// namespace watched, KEDA's own namespace for cluster-wide objects.
var kedaEnv = []string{"WATCH_NAMESPACE=", "POD_NAMESPACE=" + kedaNamespace, "KEDA_CLUSTER_OBJECT_NAMESPACE=" + kedaNamespace}

// startKEDAOperator starts the operator with its gRPC metrics service and
// health probes on ports of their own, and returns the gRPC address.
func (c *Cluster) startKEDAOperator(binary, certs string) string {
	c.t.Helper()
	ports := c.runOnPorts(kedaOperator, binary, kedaEnv, 2, func(ports []int) []string {
		return []string{
			"--kubeconfig=" + c.kubeconfig,
			"--leader-elect=false",
			// ports[0] first: startOnPorts checks that the operator itself
			// holds it, and the gRPC server binds it last.
			"--metrics-service-bind-address=" + hostPort(ports[0]),
			"--health-probe-bind-address=" + hostPort(ports[1]),
			"--metrics-bind-address=0", // off: nothing scrapes the operator
			"--enable-cert-rotation=false",
			"--cert-dir=" + certs,
		}
	}, func(ports []int) func(ctx context.Context) error {
		return httpProbe(http.DefaultClient, "http://"+hostPort(ports[1])+"/readyz")
	})
	return hostPort(ports[0])
}

// startKEDAAdapter starts the external metrics API server on a port of
// its own and returns the port.
func (c *Cluster) startKEDAAdapter(binary, certs, operator string) int {
	c.t.Helper()
	caFile := filepath.Join(certs, "ca.crt")
	ports := c.runOnPorts(kedaAdapter, binary, kedaEnv, 1, func(ports []int) []string {
		return []string{
			"--kubeconfig=" + c.kubeconfig,
			"--lister-kubeconfig=" + c.kubeconfig,
			"--authentication-kubeconfig=" + c.kubeconfig,
			"--authorization-kubeconfig=" + c.kubeconfig,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", ports[0]),
			"--cert-dir=" + certs,
			"--tls-cert-file=" + filepath.Join(certs, "tls.crt"),
			"--tls-private-key-file=" + filepath.Join(certs, "tls.key"),
			"--metrics-service-address=" + operator,
			"--port=0", // its own /metrics, on any free port: nothing scrapes it
		}
	}, func(ports []int) func(ctx context.Context) error {
		var client *http.Client
		return func(ctx context.Context) error {
			if client == nil {
				cl, err := httpsClient(caFile)
				if err != nil {
					return err
				}
				client = cl
			}
			return httpProbe(client, "https://"+hostPort(ports[0])+"/readyz")(ctx)
		}
	})
	return ports[0]
}

// registerExternalMetrics registers the adapter on port as the server of
// external.metrics.k8s.io, as KEDA's manifests do through its Service, and
// waits until the aggregator finds it available and discovery lists it.
func (c *Cluster) registerExternalMetrics(port int, caPEM []byte) {
	c.t.Helper()
	ctx := c.t.Context()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: kedaNamespace, Name: kedaAdapterName},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"},
	}
	if _, err := c.client.CoreV1().Services(kedaNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("testcluster: create Service %s/%s: %v", kedaNamespace, kedaAdapterName, err)
	}
	group, version, _ := strings.Cut(externalMetricsGV, "/")
	name := version + "." + group
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "version": version,
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service":  map[string]any{"namespace": kedaNamespace, "name": kedaAdapterName, "port": int64(port)},
			"caBundle": base64.StdEncoding.EncodeToString(caPEM),
		},
	}}
	dyn := c.Dynamic()
	if _, err := dyn.Resource(apiServiceResource).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("testcluster: create APIService %s: %v", name, err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, c.timeout, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(apiServiceResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		last = fmt.Sprint(conds)
		for _, cond := range conds {
			if m, _ := cond.(map[string]any); m["type"] == "Available" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		c.t.Fatalf("testcluster: APIService %s not available after %v: %v; conditions %s (the logs of keda-adapter and kube-apiserver are printed below)", name, c.timeout, err, last)
	}
	c.waitServed(externalMetricsGV)
}

// runOnPorts starts a component that must be told its n ports, with env
// added to its environment, as Start starts the control plane's
// (startOnPorts), and returns the ports it got. Its log is printed if the
// test fails.
func (c *Cluster) runOnPorts(name, binary string, env []string, n int, args func(ports []int) []string, probe func(ports []int) func(ctx context.Context) error) []int {
	c.t.Helper()
	start := func(name string, args ...string) *process {
		p := startProcessEnv(c.t, name, c.dir, c.home, binary, env, args...)
		c.t.Cleanup(func() {
			if c.t.Failed() {
				c.t.Logf("testcluster: ----- %s log -----\n%s", p.name, p.logTail())
			}
		})
		return p
	}
	_, ports, err := startOnPorts(c.t.Context(), c.timeout, start, name, n, args, probe)
	if err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
	return ports
}
