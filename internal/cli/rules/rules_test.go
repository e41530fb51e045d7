package rules

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/source/promql"
)

func TestRules(t *testing.T) {
	cases := map[string]struct {
		args     []string
		step     time.Duration
		selector promql.Selector
		wantErr  string
	}{
		"default step":                 {step: 30 * time.Second},
		"a job's series":               {args: []string{"--selector", `job = "dcgm-exporter"`}, step: 30 * time.Second, selector: mustSelector(t, `job="dcgm-exporter"`)},
		"a selector that is no PromQL": {args: []string{"--selector", `job=dcgm-exporter`}, wantErr: `unexpected token "-"`},
		"15 s scrapes":                 {args: []string{"--step", "15s"}, step: 15 * time.Second},
		"a step that leaves a rest":    {args: []string{"--step", "7s"}, wantErr: "divide 5m"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got promql.RuleFile
			if err := yaml.UnmarshalStrict(out.Bytes(), &got); err != nil {
				t.Fatalf("output is not a rules file: %v\n%s", err, out.String())
			}
			want, err := promql.RecordingRules(tc.step, tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

func mustSelector(t *testing.T, s string) promql.Selector {
	t.Helper()
	sel, err := promql.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
