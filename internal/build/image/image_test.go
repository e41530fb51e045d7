package image_test

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gpupack/gpupack/internal/build/image"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// The gpupack binary, built once for the package's tests in a directory
// that TestMain removes.
var (
	buildOnce  sync.Once
	buildDir   string
	gpupackBin string
	buildErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// gpupackBinary builds cmd/gpupack as `make images` does: static
// (CGO_ENABLED=0), -trimpath, stamped by hack/version.sh.
func gpupackBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "gpupack-image-test-"); buildErr != nil {
			return
		}
		var ldflags []byte
		if ldflags, buildErr = exec.Command("bash", filepath.Join(repoRoot, "hack/version.sh"), "--ldflags").Output(); buildErr != nil {
			buildErr = errors.New("hack/version.sh --ldflags: " + buildErr.Error())
			return
		}
		gpupackBin = filepath.Join(buildDir, "gpupack")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w "+strings.TrimSpace(string(ldflags)), "-o", gpupackBin, "./cmd/gpupack")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build ./cmd/gpupack: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return gpupackBin
}

// checkout is this checkout's build stamp (hack/version.sh), the labels
// that `make images` gives the images.
func checkout(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(repoRoot, "hack/version.sh")).Output()
	if err != nil {
		t.Fatalf("hack/version.sh: %v", err)
	}
	stamp := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		key, value, _ := strings.Cut(line, "=")
		stamp[key] = value
	}
	return stamp
}

// headCommit is `git rev-parse HEAD`, or "" outside a git checkout.
func headCommit() string {
	cmd := exec.Command("git", "rev-parse", "--verify", "HEAD")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestGpupackImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the image holds a Linux binary; this is %s", runtime.GOOS)
	}
	bin := gpupackBinary(t)
	stamp := checkout(t)
	opts := image.Options{Binary: bin, Entrypoint: "/gpupack", Title: "gpupack", Version: stamp["VERSION"], Revision: stamp["COMMIT"], Created: created}
	info := checkImage(t, opts, "ghcr.io/gpupack/gpupack:test")
	if head := headCommit(); head != "" && info["commit"] != head {
		t.Errorf("gpupack version names commit %q; built at HEAD %s", info["commit"], head)
	}

	t.Run("deterministic", func(t *testing.T) {
		first := digest(t, opts)
		if again := digest(t, opts); again != first {
			t.Errorf("the same binary and options gave digests %s and %s", first, again)
		}
		img, err := image.Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for _, file := range []string{"a.tar", "b.tar"} {
			if err := image.Write(filepath.Join(dir, file), "ghcr.io/gpupack/gpupack:test", img); err != nil {
				t.Fatal(err)
			}
		}
		a, errA := os.ReadFile(filepath.Join(dir, "a.tar"))
		b, errB := os.ReadFile(filepath.Join(dir, "b.tar"))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("writing the same image twice gave different archives (%v, %v)", errA, errB)
		}
		later := opts
		later.Created = created.Add(time.Second)
		if other := digest(t, later); other == first {
			t.Errorf("a different creation time gave the same digest %s; the timestamps are not in the image", first)
		}
	})
}

func TestSchedulerImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the image holds a Linux binary; this is %s", runtime.GOOS)
	}
	bin := schedulerBinary(t)
	stamp := checkout(t)
	opts := image.Options{Binary: bin, Entrypoint: "/gpupack-scheduler", Title: "gpupack-scheduler", Version: stamp["VERSION"], Revision: stamp["COMMIT"], Created: created}
	info := checkImage(t, opts, "ghcr.io/gpupack/gpupack-scheduler:test")
	if !strings.HasPrefix(info["kubernetes"], "v1.") {
		t.Errorf("gpupack-scheduler version: kubernetes %q, want the v1.x version it is built on", info["kubernetes"])
	}
}

func TestBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		opts image.Options
		want string
	}{
		"relative entrypoint": {
			opts: image.Options{Binary: text, Entrypoint: "gpupack", Title: "gpupack"},
			want: `entrypoint "gpupack": want a file in the image's root such as /gpupack`,
		},
		"entrypoint in a directory": {
			opts: image.Options{Binary: text, Entrypoint: "/usr/bin/gpupack", Title: "gpupack"},
			want: `entrypoint "/usr/bin/gpupack": want a file in the image's root`,
		},
		"no title": {
			opts: image.Options{Binary: text, Entrypoint: "/gpupack"},
			want: "image title is empty",
		},
		"not ELF": {
			opts: image.Options{Binary: text, Entrypoint: "/gpupack", Title: "gpupack"},
			want: text + " is not an ELF executable",
		},
		"missing binary": {
			opts: image.Options{Binary: filepath.Join(dir, "absent"), Entrypoint: "/gpupack", Title: "gpupack"},
			want: "the binary to package: stat " + filepath.Join(dir, "absent") + ": no such file or directory",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := image.Build(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestBuildRefusesDynamic checks that a dynamically linked executable,
// which the image's empty base cannot run, is refused with the fix named.
func TestBuildRefusesDynamic(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh to use as a dynamically linked binary: %v", err)
	}
	sh, _ = filepath.EvalSymlinks(sh)
	f, err := elf.Open(sh)
	if err != nil {
		t.Skipf("%s is not an ELF executable here: %v", sh, err)
	}
	dynamic := f.Section(".interp") != nil
	f.Close()
	if !dynamic {
		t.Skipf("%s is not dynamically linked here", sh)
	}
	_, err = image.Build(image.Options{Binary: sh, Entrypoint: "/sh", Title: "sh"})
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("Build(%s): got error %v, want it refused as dynamically linked, naming CGO_ENABLED=0", sh, err)
	}
}

// schedulerBinary returns $GPUPACK_SCHEDULER_BIN or hack/build-scheduler.sh's
// cached binary for this checkout, skipping when it is not built (failing
// under GPUPACK_E2E).
func schedulerBinary(t *testing.T) string {
	t.Helper()
	if path := os.Getenv("GPUPACK_SCHEDULER_BIN"); path != "" {
		return path
	}
	out, err := exec.Command("bash", filepath.Join(repoRoot, "hack/build-scheduler.sh"), "--print-path").Output()
	if err != nil {
		t.Fatalf("hack/build-scheduler.sh --print-path: %v", err)
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		msg := "gpupack-scheduler is not built for these sources and this commit (" + path + "); run hack/build-scheduler.sh"
		if os.Getenv("GPUPACK_E2E") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

func digest(t *testing.T, opts image.Options) v1.Hash {
	t.Helper()
	img, err := image.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// entry is what the test compares of a layer's file.
type entry struct {
	Name       string
	Type       byte
	Mode       int64
	UID, GID   int
	Size       int64
	ModTimeUTC time.Time
}

// checkImage builds the image of opts, writes it as an OCI archive tagged ref,
// reads it back and checks its manifest, config and layer; it runs the
// binary's `version --format json` as the image's user and returns its
// output, having checked that it names the labels' version and commit.
func checkImage(t *testing.T, opts image.Options, ref string) map[string]string {
	t.Helper()
	built, err := image.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "image.tar")
	if err := image.Write(file, ref, built); err != nil {
		t.Fatal(err)
	}
	img := readArchive(t, file, ref)
	wantDigest, _ := built.Digest()
	if got, err := img.Digest(); err != nil || got != wantDigest {
		t.Errorf("the archive's image digest is %s (%v); built %s", got, err, wantDigest)
	}

	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != types.OCIManifestSchema1 || manifest.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types: manifest %s, config %s; want OCI (%s, %s)", manifest.MediaType, manifest.Config.MediaType, types.OCIManifestSchema1, types.OCIConfigJSON)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantConfig := v1.Config{
		Entrypoint: []string{opts.Entrypoint},
		User:       "65532:65532",
		WorkingDir: "/home/nonroot",
		Labels: map[string]string{
			"org.opencontainers.image.source":   "https://github.com/gpupack/gpupack",
			"org.opencontainers.image.version":  opts.Version,
			"org.opencontainers.image.revision": opts.Revision,
			"org.opencontainers.image.title":    opts.Title,
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
		},
	}
	if diff := cmp.Diff(wantConfig, cfg.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || !cfg.Created.Equal(created) {
		t.Errorf("config: os %q, architecture %q, created %s; want linux, %s, %s", cfg.OS, cfg.Architecture, cfg.Created.Time, runtime.GOARCH, created)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	runDir := nonrootDir(t)
	files := readLayer(t, layers[0], runDir)
	binInfo, err := os.Stat(opts.Binary)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(opts.Entrypoint, "/")
	wantFiles := []entry{
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755, ModTimeUTC: created},
		{Name: "etc/group", Type: tar.TypeReg, Mode: 0o644, Size: int64(len("root:x:0:\nnonroot:x:65532:\n")), ModTimeUTC: created},
		{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Size: int64(len("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")), ModTimeUTC: created},
		{Name: "home/", Type: tar.TypeDir, Mode: 0o755, ModTimeUTC: created},
		{Name: "home/nonroot/", Type: tar.TypeDir, Mode: 0o700, UID: 65532, GID: 65532, ModTimeUTC: created},
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777, ModTimeUTC: created},
		{Name: name, Type: tar.TypeReg, Mode: 0o755, Size: binInfo.Size(), ModTimeUTC: created},
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("layer files (-want +got):\n%s", diff)
	}
	for file, line := range map[string]string{"etc/passwd": "nonroot:x:65532:65532:", "etc/group": "nonroot:x:65532:"} {
		data, err := os.ReadFile(filepath.Join(runDir, file))
		if err != nil || !strings.Contains(string(data), "\n"+line) {
			t.Errorf("%s lacks the nonroot user (%q): %q (%v)", file, line, data, err)
		}
	}

	extracted := filepath.Join(runDir, name)
	checkStaticELF(t, extracted)
	info := runAsNonroot(t, runDir, extracted)
	if info["commit"] != opts.Revision || info["version"] != opts.Version {
		t.Errorf("%s version: version %q, commit %q; the labels say %q, %q", name, info["version"], info["commit"], opts.Version, opts.Revision)
	}
	return info
}

// readArchive unpacks the OCI layout archive file and returns its one
// image, having checked that the index names it ref.
func readArchive(t *testing.T, file, ref string) v1.Image {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("%s is not an OCI image layout: %v", file, err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout's index lists %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	wantAnnotations := map[string]string{
		"org.opencontainers.image.ref.name": ref[strings.LastIndex(ref, ":")+1:],
		"io.containerd.image.name":          ref,
	}
	if diff := cmp.Diff(wantAnnotations, desc.Annotations); diff != "" {
		t.Errorf("the index's annotations (-want +got):\n%s", diff)
	}
	img, err := index.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// nonrootDir returns a directory that uid 65532 may enter and read (a test's
// TempDir is private to its owner), removed at the test's end.
func nonrootDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gpupack-image-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readLayer lists the layer's files and extracts the regular ones into dir,
// keeping their modes.
func readLayer(t *testing.T, layer v1.Layer, dir string) []entry {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the layer: %v", err)
		}
		files = append(files, entry{Name: h.Name, Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Size: h.Size, ModTimeUTC: h.ModTime.UTC()})
		if h.Typeflag != tar.TypeReg {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		var data bytes.Buffer
		if _, err := io.Copy(&data, tr); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data.Bytes(), os.FileMode(h.Mode).Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// checkStaticELF fails the test unless file is an ELF executable for this
// machine with no program interpreter and no dynamic section.
func checkStaticELF(t *testing.T, file string) {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatalf("the layer's binary is not ELF: %v", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		t.Errorf("ELF type %s, want %s (a static executable)", f.Type, elf.ET_EXEC)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %s program header: it is dynamically linked", p.Type)
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		t.Errorf("the binary has a .dynamic section: it is dynamically linked")
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary imports libraries %v (%v); want none", libs, err)
	}
}

// runAsNonroot runs `<bin> version --format json` as uid and gid 65532 with
// an empty environment, as the image's user, and returns its output.
func runAsNonroot(t *testing.T, dir, bin string) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		msg := "running the binary as uid 65532 needs root (to set its credentials); this test runs as uid " + strconv.Itoa(os.Geteuid())
		if os.Getenv("GPUPACK_E2E") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command(bin, "version", "--format", "json")
	cmd.Dir = dir
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s version --format json as 65532:65532: %v\n%s", bin, err, stderr.String())
	}
	info := map[string]string{}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("%s version --format json: %v\n%s", bin, err, out)
	}
	return info
}
