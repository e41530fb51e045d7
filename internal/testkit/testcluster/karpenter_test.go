package testcluster_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// karpenterModule is the module the kwok provider, its CRDs and its
// instance types format come from (hack/karpenter-bins.sh builds it).
const karpenterModule = "sigs.k8s.io/karpenter@v1.14.1"

// karpenterModuleDir is the module's directory in the module cache.
func karpenterModuleDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("fetches a module with go mod download")
	}
	out, err := exec.Command("go", "mod", "download", "-json", karpenterModule).Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); err != nil || jerr != nil || info.Error != "" {
		if os.Getenv("GPUPACK_E2E") == "" {
			t.Skipf("go mod download %s: %v %s (set GPUPACK_E2E to fail instead)", karpenterModule, err, info.Error)
		}
		t.Fatalf("go mod download %s: %v %s", karpenterModule, err, info.Error)
	}
	return info.Dir
}

// TestKarpenterCRDsMatchModule checks that the CRDs StartKarpenter
// installs are the module's own files (karpenter/README.md).
func TestKarpenterCRDsMatchModule(t *testing.T) {
	dir := karpenterModuleDir(t)
	for file, path := range map[string]string{
		"karpenter.sh_nodepools.yaml":            "kwok/charts/crds/karpenter.sh_nodepools.yaml",
		"karpenter.sh_nodeclaims.yaml":           "kwok/charts/crds/karpenter.sh_nodeclaims.yaml",
		"karpenter.kwok.sh_kwoknodeclasses.yaml": "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("karpenter", file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("karpenter/%s differs from %s in %s; copy it again", file, path, karpenterModule)
		}
	}
}

// TestKarpenterInstanceTypesFormat reads the kwok provider's own instance
// types file into KarpenterInstanceType, refusing unknown fields, and
// checks that writing them back gives the same JSON: the file StartKarpenter
// writes is in the provider's format.
func TestKarpenterInstanceTypesFormat(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(karpenterModuleDir(t), "kwok", "cloudprovider", "instance_types.json"))
	if err != nil {
		t.Fatal(err)
	}
	var types []testcluster.KarpenterInstanceType
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&types); err != nil {
		t.Fatalf("the provider's instance_types.json: %v", err)
	}
	if len(types) == 0 || len(types[0].Offerings) == 0 || len(types[0].Offerings[0].Requirements) == 0 {
		t.Fatalf("decoded %d instance types, the first %+v: want offerings with requirements", len(types), types)
	}
	written, err := json.Marshal(types)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(written, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance types written back differ from the provider's file (-provider +written):\n%s", diff)
	}
}
