package version

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	buildversion "github.com/gpupack/gpupack/internal/util/buildversion"
)

var info = buildversion.Info{Version: "v0.1.0", Commit: "0123456789abcdef0123456789abcdef01234567",
	CommitTime: "2026-01-02T03:04:05Z", Modified: "false", GoVersion: "go1.26.8", Platform: "linux/amd64"}

func TestRun(t *testing.T) {
	cases := map[string]struct {
		format string
		extras []Extra
		want   string
	}{
		"table": {
			format: "table",
			want: `version     v0.1.0
commit      0123456789abcdef0123456789abcdef01234567
commitTime  2026-01-02T03:04:05Z
modified    false
goVersion   go1.26.8
platform    linux/amd64
`,
		},
		"table with the Kubernetes version, empty said as unknown": {
			format: "table",
			extras: []Extra{{"kubernetes", "v1.37.2"}, {"etcd", ""}},
			want: `version     v0.1.0
commit      0123456789abcdef0123456789abcdef01234567
commitTime  2026-01-02T03:04:05Z
modified    false
goVersion   go1.26.8
platform    linux/amd64
kubernetes  v1.37.2
etcd        unknown
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(&options{format: tc.format}, info, tc.extras, &out); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunJSON(t *testing.T) {
	var out bytes.Buffer
	if err := run(&options{format: "json"}, info, []Extra{{"kubernetes", "v1.37.2"}}, &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not a JSON object of strings: %v\n%s", err, out.String())
	}
	want := map[string]string{"version": "v0.1.0", "commit": "0123456789abcdef0123456789abcdef01234567",
		"commitTime": "2026-01-02T03:04:05Z", "modified": "false", "goVersion": "go1.26.8", "platform": "linux/amd64",
		"kubernetes": "v1.37.2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

func TestCommand(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--format", "yaml"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `--format "yaml": want one of table, json`) {
		t.Errorf("--format yaml: got error %v, want the allowed formats named", err)
	}
	cmd = NewCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"extra"})
	if err := cmd.Execute(); err == nil {
		t.Errorf("version extra: got no error, want one (version takes no arguments)")
	}
}
