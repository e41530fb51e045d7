package testcluster

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Karpenter's kwok cloud provider (the main package kwok/ of
// sigs.k8s.io/karpenter), built by hack/karpenter-bins.sh.
const (
	envKarpenterBinDir = "GPUPACK_KARPENTER_BINDIR"
	karpenterBinary    = "karpenter-kwok"
)

// The node class StartKarpenter creates, for the nodeClassRef of the
// NodePools a test creates: the kwok provider's own kind.
const (
	KWOKNodeClassGroup = "karpenter.kwok.sh"
	KWOKNodeClassKind  = "KWOKNodeClass"
	KWOKNodeClassName  = "default"
)

// KarpenterInstanceType is one instance type of the kwok provider's
// instance types file: the JSON of its InstanceTypeOptions
// (kwok/cloudprovider/helpers.go), the format of its embedded
// instance_types.json. Karpenter launches a node of the type as a Node
// object whose allocatable is Resources less 100m CPU and 10Mi memory,
// labelled with the type's name (node.kubernetes.io/instance-type), arch,
// OS, and each single-valued requirement of the offering it chose.
type KarpenterInstanceType struct {
	Name             string              `json:"name"`
	Offerings        []KarpenterOffering `json:"offerings"`
	Architecture     string              `json:"architecture"`
	OperatingSystems []string            `json:"operatingSystems"`
	Resources        corev1.ResourceList `json:"resources"`
}

// KarpenterOffering is one offering of an instance type: its price and the
// requirements (capacity type, zone, any other label) that its nodes
// carry. The provider's format spells these fields capitalised: they are
// its Go structs' fields without JSON tags.
type KarpenterOffering struct {
	Price        float64                          `json:"Price"`
	Available    bool                             `json:"Available"`
	Requirements []corev1.NodeSelectorRequirement `json:"Requirements"`
}

// karpenterCRDs are Karpenter's NodePool and NodeClaim CRDs and the kwok
// provider's KWOKNodeClass CRD (karpenter/README.md says whence).
//
//go:embed karpenter/*.yaml
var karpenterCRDs embed.FS

var kwokNodeClassResource = schema.GroupVersionResource{Group: KWOKNodeClassGroup, Version: "v1alpha1", Resource: "kwoknodeclasses"}

// StartKarpenter installs Karpenter's CRDs, creates the KWOKNodeClass
// KWOKNodeClassName, and runs Karpenter's kwok provider against the
// cluster with instance types types until the test ends: leader election
// off, its health and metrics ports picked as the control plane's are. It
// returns once the provider is ready. The nodes it launches carry kwok's
// annotation, so the cluster's kwok makes them Ready and runs their pods.
// Without the binary of hack/karpenter-bins.sh (or
// $GPUPACK_KARPENTER_BINDIR) it skips the test, or fails it when
// $GPUPACK_E2E is set.
func (c *Cluster) StartKarpenter(types []KarpenterInstanceType) *Process {
	c.t.Helper()
	bin := karpenterBin(c.t)
	c.installKarpenterCRDs()
	c.createKWOKNodeClass()
	data, err := json.MarshalIndent(types, "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	typesFile := writeFile(c.t, c.dir, "karpenter-instance-types.json", string(data))
	start := func(name string, args ...string) *process {
		c.t.Helper()
		p := startProcessEnv(c.t, name, c.dir, c.home, bin, []string{"KUBECONFIG=" + c.kubeconfig}, args...)
		c.t.Cleanup(func() {
			if c.t.Failed() {
				c.t.Logf("testcluster: ----- %s log -----\n%s", p.name, p.logTail())
			}
		})
		return p
	}
	p, _, err := startOnPorts(c.t.Context(), c.timeout, start, "karpenter", 2, func(ports []int) []string {
		return []string{
			"--health-probe-port=" + strconv.Itoa(ports[0]),
			"--metrics-port=" + strconv.Itoa(ports[1]),
			"--disable-leader-election=true",
			"--instance-types-file-path=" + typesFile,
			"--log-level=debug",
		}
	}, func(ports []int) func(ctx context.Context) error {
		return httpProbe(http.DefaultClient, "http://"+hostPort(ports[0])+"/readyz")
	})
	if err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
	return &Process{t: c.t, p: p}
}

// karpenterBin is the kwok provider's binary: in $GPUPACK_KARPENTER_BINDIR,
// else in the directory hack/karpenter-bins.sh --print-dir names.
func karpenterBin(t testing.TB) string {
	t.Helper()
	dir, err := locateKarpenterBinDir()
	if err == nil {
		path := filepath.Join(dir, karpenterBinary)
		if _, err = os.Stat(path); err == nil {
			return path
		}
		err = fmt.Errorf("missing Karpenter's kwok provider: %w", err)
	}
	if _, required := os.LookupEnv(envE2E); required {
		t.Fatalf("testcluster: %v; %s is set, so this is a failure, not a skip: run hack/karpenter-bins.sh", err, envE2E)
	}
	t.Skipf("testcluster: %v; run hack/karpenter-bins.sh to build it", err)
	return ""
}

func locateKarpenterBinDir() (string, error) {
	if dir := os.Getenv(envKarpenterBinDir); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %w", envKarpenterBinDir, err)
	}
	script := filepath.Join(root, "hack", "karpenter-bins.sh")
	out, err := exec.Command("bash", script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %s --print-dir failed: %w", envKarpenterBinDir, script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// installKarpenterCRDs creates the embedded CRDs and waits until the
// apiserver serves their groups.
func (c *Cluster) installKarpenterCRDs() {
	c.t.Helper()
	files, err := karpenterCRDs.ReadDir("karpenter")
	if err != nil {
		c.t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, "karpenter/"+f.Name())
	}
	crds := c.readCRDs(karpenterCRDs, paths...)
	c.InstallCRDs(crds...)
	for _, gv := range []string{"karpenter.sh/v1", KWOKNodeClassGroup + "/v1alpha1"} {
		c.waitServed(gv)
	}
}

// createKWOKNodeClass creates the KWOKNodeClass KWOKNodeClassName. Its
// CRD defaults its status to Ready, which Karpenter requires of a
// NodePool's node class before it launches nodes for it.
func (c *Cluster) createKWOKNodeClass() {
	c.t.Helper()
	nc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KWOKNodeClassGroup + "/v1alpha1",
		"kind":       KWOKNodeClassKind,
		"metadata":   map[string]any{"name": KWOKNodeClassName},
	}}
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	if _, err := c.Dynamic().Resource(kwokNodeClassResource).Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("testcluster: create %s %s: %v", KWOKNodeClassKind, KWOKNodeClassName, err)
	}
}
