package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	// envBinDir names the directory holding the component binaries.
	envBinDir = "GPUPACK_K8S_BINDIR"
	// envE2E, when set, turns missing binaries from a skip into a failure, so
	// that CI never passes by skipping.
	envE2E = "GPUPACK_E2E"
)

// Files that Start needs in the binary directory; hack/k8s-bins.sh makes them.
const (
	etcdBinary              = "etcd"
	apiserverBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
	schedulerBinary         = "kube-scheduler"
	kwokBinary              = "kwok"
	kwokStagesFile          = "kwok-stages.yaml"
)

// binDir returns the directory with the component binaries: $GPUPACK_K8S_BINDIR,
// else the cache directory that hack/k8s-bins.sh --print-dir names. When a
// file is missing it skips the test, or fails it if GPUPACK_E2E is set.
func binDir(t testing.TB) string {
	t.Helper()
	dir, err := locateBinDir()
	if err == nil {
		err = checkBinDir(dir)
	}
	if err == nil {
		return dir
	}
	if _, required := os.LookupEnv(envE2E); required {
		t.Fatalf("testcluster: %v; %s is set, so this is a failure, not a skip: run hack/k8s-bins.sh (or hack/e2e.sh)", err, envE2E)
	}
	t.Skipf("testcluster: %v; run hack/k8s-bins.sh to build them, or hack/e2e.sh to build and test", err)
	return ""
}

// locateBinDir returns $GPUPACK_K8S_BINDIR, or asks the repository's
// hack/k8s-bins.sh (see repoRoot).
func locateBinDir() (string, error) {
	if dir := os.Getenv(envBinDir); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %w", envBinDir, err)
	}
	script := filepath.Join(root, "hack", "k8s-bins.sh")
	out, err := exec.Command("bash", script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %s --print-dir failed: %w", envBinDir, script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkBinDir reports the first file of the component set missing from dir.
func checkBinDir(dir string) error {
	for _, name := range []string{etcdBinary, apiserverBinary, controllerManagerBinary, schedulerBinary, kwokBinary, kwokStagesFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("missing a Kubernetes test binary: %w", err)
		}
	}
	return nil
}
