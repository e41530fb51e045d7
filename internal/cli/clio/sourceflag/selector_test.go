package sourceflag

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/gpupack/gpupack/internal/source/promql"
)

// TestSelectorFlag: --prometheus-selector is parsed as PromQL matchers
// when the flag is read (a list that is none is refused there, with the
// offset), kept canonical, and refused without --prometheus.
func TestSelectorFlag(t *testing.T) {
	cases := map[string]struct {
		args            []string
		want, wantErr   string
		prometheus      string
		wantCheckRefuse bool
	}{
		"a job":              {args: []string{`--prometheus-selector=job = 'dcgm-exporter'`}, want: `job="dcgm-exporter"`, prometheus: "http://prometheus:9090"},
		"none":               {want: ""},
		"no quotes":          {args: []string{`--prometheus-selector=job=dcgm-exporter`}, wantErr: `unexpected token "-"`},
		"without prometheus": {args: []string{`--prometheus-selector=job="dcgm-exporter"`}, want: `job="dcgm-exporter"`, wantCheckRefuse: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := pflag.NewFlagSet("test", pflag.ContinueOnError)
			var sel promql.Selector
			AddSelector(f, &sel)
			err := f.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parse: %v; want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || sel.String() != tc.want {
				t.Fatalf("parse: %q, %v; want %q", sel, err, tc.want)
			}
			if err := CheckSelector(sel, tc.prometheus); (err != nil) != tc.wantCheckRefuse {
				t.Errorf("CheckSelector: %v; want a refusal: %v", err, tc.wantCheckRefuse)
			}
		})
	}
}
