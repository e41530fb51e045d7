// Package buildversion says which build of gpupack is running: the module
// version, the VCS commit it was built from (and whether the tree was
// modified), the commit's time, the Go version and the platform.
//
// The values come from the Go toolchain's build information
// (runtime/debug.ReadBuildInfo, stamped by `go build` in a git checkout)
// and are overridden at link time for builds that stamp them explicitly,
// such as those outside git (a container build context without .git) or
// under GOFLAGS=-buildvcs=false:
//
//	go build -ldflags "-X github.com/gpupack/gpupack/internal/version.commit=$(git rev-parse HEAD) ..."
//
// hack/version.sh prints those flags for the current checkout. A value
// neither source knows is Unknown, never the empty string. Both gpupack and
// gpupack-scheduler (module scheduler/) report through this package. It
// imports only the standard library.
package buildversion

import (
	"runtime"
	"runtime/debug"
)

// Unknown is the value of every field that the build did not record.
const Unknown = "unknown"

// Set at link time with -ldflags -X; empty means "take the build
// information's value".
var (
	version    string // module version, e.g. v0.1.0 or v0.1.0-3-gabc1234-dirty
	commit     string // full VCS revision
	commitTime string // the commit's time, RFC 3339
	modified   string // "true" when the tree had uncommitted changes
)

// Info describes one build. Every field is set; what the build did not
// record is Unknown.
type Info struct {
	// Version is the module version: a release tag, a pseudo-version, or
	// Go's "(devel)" for a build from a work tree with no VCS stamp.
	Version string
	// Commit is the full VCS revision the binary was built from.
	Commit string
	// CommitTime is the commit's time, RFC 3339.
	CommitTime string
	// Modified is "true" when the work tree had uncommitted changes at build
	// time, "false" when it had none.
	Modified string
	// GoVersion is the toolchain that built the binary, e.g. go1.26.8.
	GoVersion string
	// Platform is GOOS/GOARCH, e.g. linux/amd64.
	Platform string
}

// Get returns the running binary's build: its build information with the
// link-time values over it.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	info := FromBuildInfo(bi)
	info.Platform = runtime.GOOS + "/" + runtime.GOARCH
	info.GoVersion = runtime.Version()
	for _, o := range []struct {
		field *string
		value string
	}{
		{&info.Version, version},
		{&info.Commit, commit},
		{&info.CommitTime, commitTime},
		{&info.Modified, modified},
	} {
		if o.value != "" {
			*o.field = o.value
		}
	}
	return info
}

// FromBuildInfo reads a build from Go's build information (of this binary,
// or of another read with debug/buildinfo); a nil bi gives every field
// Unknown. Values set with -ldflags -X are not in the build information;
// only Get sees them.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: Unknown, Commit: Unknown, CommitTime: Unknown, Modified: Unknown, GoVersion: Unknown, Platform: Unknown}
	if bi == nil {
		return info
	}
	set := func(field *string, value string) {
		if value != "" {
			*field = value
		}
	}
	set(&info.Version, bi.Main.Version)
	set(&info.GoVersion, bi.GoVersion)
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			set(&info.Commit, s.Value)
		case "vcs.time":
			set(&info.CommitTime, s.Value)
		case "vcs.modified":
			set(&info.Modified, s.Value)
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		info.Platform = goos + "/" + goarch
	}
	return info
}
