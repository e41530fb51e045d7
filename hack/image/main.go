// Command image writes a container image of a static gpupack binary as an
// OCI image layout in a tar archive, offline (no container daemon, no
// registry): an empty base plus one layer with the binary and the nonroot
// user (internal/build/image). `make images` (hack/images.sh) runs it for gpupack
// and gpupack-scheduler:
//
//	go run ./hack/image --binary bin/images/gpupack --entrypoint /gpupack \
//	  --ref ghcr.io/gpupack/gpupack:v0.1.0 --version v0.1.0 --revision "$(git rev-parse HEAD)" \
//	  --out bin/images/gpupack.tar
//
// Every timestamp is --created, else $SOURCE_DATE_EPOCH, else the Unix
// epoch, so the same binary gives the same image digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/gpupack/gpupack/internal/build/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o image.Options
	var ref, out, created string
	fs.StringVar(&o.Binary, "binary", "", "static Linux binary to package (required)")
	fs.StringVar(&o.Entrypoint, "entrypoint", "", "the binary's path in the image, e.g. /gpupack (required)")
	fs.StringVar(&o.Title, "title", "", "the image's title label (default: the entrypoint's name)")
	fs.StringVar(&o.Version, "version", "", "the version label (default: the binary's Go build information)")
	fs.StringVar(&o.Revision, "revision", "", "the revision (commit) label (default: the binary's Go build information)")
	fs.StringVar(&created, "created", "", "every timestamp of the image, RFC 3339 (default: $SOURCE_DATE_EPOCH, else 1970-01-01T00:00:00Z)")
	fs.StringVar(&ref, "ref", "", "the image's name and tag in the archive, e.g. ghcr.io/gpupack/gpupack:v0.1.0 (required)")
	fs.StringVar(&out, "out", "", "the OCI archive (tar) to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, required := range []struct{ flag, value string }{{"--binary", o.Binary}, {"--entrypoint", o.Entrypoint}, {"--ref", ref}, {"--out", out}} {
		if required.value == "" {
			return fmt.Errorf("%s is required (see -help)", required.flag)
		}
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every input is a flag (see -help)", fs.Args())
	}
	if o.Title == "" {
		o.Title = path.Base(o.Entrypoint)
	}
	var err error
	if o.Created, err = creationTime(created, os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return err
	}
	img, err := image.Build(o)
	if err != nil {
		return err
	}
	if err := image.Write(out, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s@%s\n", out, ref, digest)
	return nil
}

// creationTime is the --created flag, else SOURCE_DATE_EPOCH (seconds since
// the epoch), else the epoch.
func creationTime(flagValue, sourceDateEpoch string) (time.Time, error) {
	switch {
	case flagValue != "":
		t, err := time.Parse(time.RFC3339, flagValue)
		if err != nil {
			return time.Time{}, fmt.Errorf("--created %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", flagValue)
		}
		return t, nil
	case sourceDateEpoch != "":
		seconds, err := strconv.ParseInt(sourceDateEpoch, 10, 64)
		if err != nil || seconds < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want whole seconds since 1970-01-01 UTC", sourceDateEpoch)
		}
		return time.Unix(seconds, 0), nil
	}
	return time.Unix(0, 0), nil
}
