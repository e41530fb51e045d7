package serve

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlagsRefuseWhatCannotWork: serve refuses, before it starts, an
// --auth it does not know, --auth kubernetes without the Service whose
// services/proxy callers need, --auth-service without --auth kubernetes,
// and the Prometheus access flags without --prometheus.
func TestFlagsRefuseWhatCannotWork(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"unknown auth":            {args: []string{"--auth", "basic"}, want: `--auth "basic": want none or kubernetes`},
		"auth without service":    {args: []string{"--auth", "kubernetes"}, want: "--auth kubernetes needs --auth-service NAMESPACE/NAME"},
		"service not NS/NAME":     {args: []string{"--auth", "kubernetes", "--auth-service", "gpupack"}, want: "--auth kubernetes needs --auth-service NAMESPACE/NAME"},
		"service without auth":    {args: []string{"--auth-service", "gpupack-system/gpupack"}, want: "--auth-service applies to --auth kubernetes only"},
		"token without URL":       {args: []string{"--prometheus-bearer-token-file", "/dev/null"}, want: "give --prometheus too"},
		"header without URL":      {args: []string{"--prometheus-header", "X-Scope-OrgID=a"}, want: "give --prometheus too"},
		"token and user in URL":   {args: []string{"--prometheus", "http://u:p@prom:9090", "--prometheus-bearer-token-file", "/dev/null"}, want: "drop the user from the URL"},
		"a header without a name": {args: []string{"--prometheus-header", "=a"}, want: "want NAME=VALUE"},
		"reclaim on the demo":     {args: []string{"--reclaim-controller"}, want: "--reclaim-controller changes the live cluster"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand(t.Context())
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(c.args)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("serve %v: error %v, want one saying %q", c.args, err, c.want)
			}
		})
	}
}
