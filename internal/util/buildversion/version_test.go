package buildversion

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuildInfo(t *testing.T) {
	cases := map[string]struct {
		bi   *debug.BuildInfo
		want Info
	}{
		"no build information": {
			bi:   nil,
			want: Info{Version: Unknown, Commit: Unknown, CommitTime: Unknown, Modified: Unknown, GoVersion: Unknown, Platform: Unknown},
		},
		"no VCS stamp": {
			bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
				Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}},
			want: Info{Version: "(devel)", Commit: Unknown, CommitTime: Unknown, Modified: Unknown, GoVersion: "go1.26.8", Platform: "linux/arm64"},
		},
		"VCS stamp": {
			bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.1-0.20260102030405-0123456789ab+dirty"},
				Settings: []debug.BuildSetting{
					{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"},
					{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
					{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
					{Key: "vcs.modified", Value: "true"},
				}},
			want: Info{Version: "v0.1.1-0.20260102030405-0123456789ab+dirty", Commit: "0123456789abcdef0123456789abcdef01234567",
				CommitTime: "2026-01-02T03:04:05Z", Modified: "true", GoVersion: "go1.26.8", Platform: "linux/amd64"},
		},
		"an empty value is unknown": {
			bi:   &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: ""}, {Key: "GOOS", Value: "linux"}}},
			want: Info{Version: Unknown, Commit: Unknown, CommitTime: Unknown, Modified: Unknown, GoVersion: Unknown, Platform: Unknown},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FromBuildInfo(tc.bi)); diff != "" {
				t.Errorf("FromBuildInfo (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGetLinkTimeValues checks that values set with -ldflags -X win over
// the build information, and that the platform is the running one.
func TestGetLinkTimeValues(t *testing.T) {
	saved := [...]string{version, commit, commitTime, modified}
	t.Cleanup(func() { version, commit, commitTime, modified = saved[0], saved[1], saved[2], saved[3] })

	version, commit, commitTime, modified = "v0.1.0", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z", "false"
	got := Get()
	want := Info{Version: "v0.1.0", Commit: "0123456789abcdef0123456789abcdef01234567", CommitTime: "2026-01-02T03:04:05Z",
		Modified: "false", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get with link-time values (-want +got):\n%s", diff)
	}

	// A test binary has no VCS stamp (go test does not stamp), so without
	// link-time values the commit is unknown, never empty.
	version, commit, commitTime, modified = "", "", "", ""
	got = Get()
	for field, value := range map[string]string{"Version": got.Version, "Commit": got.Commit, "CommitTime": got.CommitTime, "Modified": got.Modified} {
		if value == "" {
			t.Errorf("Get().%s is empty; want a value or %q", field, Unknown)
		}
	}
}
