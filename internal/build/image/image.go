// Package image builds gpupack's container images offline, without a
// container daemon: an empty base and one layer holding a static binary and
// the nonroot user (uid and gid 65532, as in distroless' :nonroot images),
// written as an OCI image layout in a tar archive, which `podman load`,
// `docker load` (Docker 25 and later) and `skopeo copy oci-archive:` read.
// The image is deterministic: every timestamp is Options.Created. It is the
// daemonless twin of the repository's Dockerfiles (the same user, entrypoint
// and labels) and uses go-containerregistry; it is an edge package of the
// build (hack/image), imported by no gpupack binary.
package image

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gpupack/gpupack/internal/util/buildversion"
)

// nonRoot is the uid and gid the image runs as: distroless' nonroot user.
const nonRoot = 65532

// workingDir is the image's working directory, the nonroot user's home.
const workingDir = "/home/nonroot"

// The user database of the image: root and nonroot, so that tools which
// resolve user names (ps, id, a runtime's runAsUser check) find them.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// Options describe one image.
type Options struct {
	// Binary is the path of a statically linked Go binary for Linux.
	Binary string
	// Entrypoint is the binary's absolute path in the image, e.g. /gpupack.
	Entrypoint string
	// Title, Version and Revision are the labels of the same names; empty
	// Version and Revision are taken from the binary's Go build
	// information ("unknown" where it has none).
	Title, Version, Revision string
	// Created is every timestamp of the image: the config's, the history's
	// and each file's (seconds; deterministic builds pass the commit time
	// or SOURCE_DATE_EPOCH).
	Created time.Time
}

// Build returns the image of o. It refuses a binary that is not a static
// Linux executable, since the image has no dynamic loader or libc.
func Build(o Options) (v1.Image, error) {
	if path.Dir(o.Entrypoint) != "/" || o.Entrypoint == "/" || path.Clean(o.Entrypoint) != o.Entrypoint {
		return nil, fmt.Errorf("entrypoint %q: want a file in the image's root such as /gpupack", o.Entrypoint)
	}
	if o.Title == "" {
		return nil, fmt.Errorf("image title is empty: name the image, e.g. gpupack")
	}
	if err := checkStatic(o.Binary); err != nil {
		return nil, err
	}
	bi, err := buildinfo.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("%s: reading its Go build information: %w (the image builder takes Go binaries)", o.Binary, err)
	}
	built := buildversion.FromBuildInfo(bi)
	goos, goarch, ok := strings.Cut(built.Platform, "/")
	if !ok || goos != "linux" {
		return nil, fmt.Errorf("%s is built for %s: build it with GOOS=linux", o.Binary, built.Platform)
	}
	if o.Version == "" {
		o.Version = built.Version
	}
	if o.Revision == "" {
		o.Revision = built.Commit
	}
	binary, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	created := o.Created.UTC().Truncate(time.Second)
	layerTar, err := layerFiles(o.Entrypoint, binary, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("building the layer of %s: %w", o.Binary, err)
	}

	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	cfg, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = goos, goarch
	cfg.Created = v1.Time{Time: created}
	cfg.Config.Entrypoint = []string{o.Entrypoint}
	cfg.Config.User = strconv.Itoa(nonRoot) + ":" + strconv.Itoa(nonRoot)
	cfg.Config.WorkingDir = workingDir
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.source":   "https://github.com/gpupack/gpupack",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.title":    o.Title,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
	}
	base, err = mutate.ConfigFile(base, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "gpupack internal/build/image: " + o.Entrypoint + " and the nonroot user",
			Comment:   o.Title + " " + o.Version,
		},
	})
}

// Write writes img, named ref (e.g. ghcr.io/gpupack/gpupack:v0.1.0), to
// file as an OCI image layout in a tar archive (an "oci-archive"), which
// keeps the image's digest and OCI media types. Its index names the image
// by the OCI annotation (the tag) and by containerd's (the full
// reference), so that `podman load` and `docker load` tag it. The archive's
// own entries are as deterministic as the image: sorted, owned by root,
// timed at the image's creation.
func Write(file, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w (want registry/repository:tag)", ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gpupack-oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	oci, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := oci.AppendImage(img, layout.WithAnnotations(map[string]string{
		// The OCI annotation holds the tag; containerd's (which docker
		// load reads) the whole reference.
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.Name(),
	})); err != nil {
		return fmt.Errorf("writing the OCI layout of %s: %w", ref, err)
	}
	if err := tarDir(file, dir, cfg.Created.Time); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

// tarDir writes the files under dir to the tar archive file, in lexical
// order, owned by root, every time set to mtime.
func tarDir(file, dir string, mtime time.Time) (err error) {
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(out)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: mtime, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h.Size = info.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// checkStatic returns an error unless file is an ELF executable with no
// program interpreter and no dynamic section.
func checkStatic(file string) error {
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("the binary to package: %w", err)
	}
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w (build it with GOOS=linux)", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			return fmt.Errorf("%s is dynamically linked (it needs a program interpreter, which the image lacks): build it with CGO_ENABLED=0", file)
		case elf.PT_DYNAMIC:
			return fmt.Errorf("%s has a dynamic section (it loads shared libraries, which the image lacks): build it with CGO_ENABLED=0", file)
		}
	}
	return nil
}

// layerFiles returns the layer's tar: the directories, the user database,
// nonroot's home and the binary at entrypoint (a file in /), every time set
// to mtime.
func layerFiles(entrypoint string, binary []byte, mtime time.Time) ([]byte, error) {
	entries := []struct {
		name string
		mode int64
		uid  int
		dir  bool
		data []byte
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: nonRoot, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		// Owned by root, as in the Dockerfiles' COPY: the process, running
		// as nonroot, cannot rewrite its own binary.
		{name: strings.TrimPrefix(entrypoint, "/"), mode: 0o755, data: binary},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.name,
			Typeflag: tar.TypeReg,
			Size:     int64(len(e.data)),
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.uid,
			Uname:    "root",
			Gname:    "root",
			ModTime:  mtime,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		}
		if e.uid == nonRoot {
			h.Uname, h.Gname = "nonroot", "nonroot"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
