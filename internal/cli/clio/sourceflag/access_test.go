package sourceflag

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/gpupack/gpupack/internal/source/promql"
)

// TestAccessFlags: the access flags fill promql.Access; a header's value
// may hold commas and equals signs; a header without a name or a file,
// or given twice, is refused.
func TestAccessFlags(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    promql.Access
		wantErr bool
	}{
		"none": {},
		"all": {
			args: []string{"--prometheus-bearer-token-file=/s/token", "--prometheus-ca-file=/s/ca.crt", "--prometheus-username=gpupack", "--prometheus-password-file=/s/pw",
				"--prometheus-header=X-Team=gpu,infra", "--prometheus-header=X-Query=a=b", "--prometheus-header-file=X-Scope-OrgID=/s/tenant"},
			want: promql.Access{BearerTokenFile: "/s/token", CAFile: "/s/ca.crt", Username: "gpupack", PasswordFile: "/s/pw",
				Headers: map[string]string{"X-Team": "gpu,infra", "X-Query": "a=b"}, HeaderFiles: map[string]string{"X-Scope-OrgID": "/s/tenant"}},
		},
		"no equals":        {args: []string{"--prometheus-header=X-Team"}, wantErr: true},
		"no name":          {args: []string{"--prometheus-header==v"}, wantErr: true},
		"space in name":    {args: []string{"--prometheus-header=X Team=v"}, wantErr: true},
		"header file none": {args: []string{"--prometheus-header-file=X-Scope-OrgID="}, wantErr: true},
		"twice":            {args: []string{"--prometheus-header=X-Team=a", "--prometheus-header=X-Team=b"}, wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := pflag.NewFlagSet("t", pflag.ContinueOnError)
			var got promql.Access
			AddAccess(f, &got)
			err := f.Parse(c.args)
			if (err != nil) != c.wantErr {
				t.Fatalf("%v: error %v, want one: %v", c.args, err, c.wantErr)
			}
			if !c.wantErr {
				if diff := cmp.Diff(c.want, got); diff != "" {
					t.Errorf("%v (-want +got):\n%s", c.args, diff)
				}
			}
		})
	}
}
