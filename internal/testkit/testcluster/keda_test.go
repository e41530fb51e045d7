package testcluster

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// kedaModule is the module and version whose CRDs neighbours/ holds and
// whose binaries hack/keda-bins.sh builds.
const kedaModule = "github.com/kedacore/keda/v2@v2.20.2"

// TestKEDACRDsMatchModule checks that KEDA's CRDs in neighbours/ are the
// module's own files (config/crd/bases) at the pinned version.
func TestKEDACRDsMatchModule(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches the module with go mod download")
	}
	out, err := exec.Command("go", "mod", "download", "-json", kedaModule).Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); err != nil || jerr != nil || info.Error != "" {
		if os.Getenv(envE2E) == "" {
			t.Skipf("go mod download %s: %v %s (set %s to fail instead)", kedaModule, err, info.Error, envE2E)
		}
		t.Fatalf("go mod download %s: %v %s", kedaModule, err, info.Error)
	}
	for _, name := range kedaCRDs {
		want, err := os.ReadFile(filepath.Join(info.Dir, "config", "crd", "bases", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := neighbourCRDs.ReadFile("neighbours/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("neighbours/%s differs from config/crd/bases/%s in %s; copy it again", name, name, kedaModule)
		}
	}
}
