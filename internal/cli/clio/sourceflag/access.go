package sourceflag

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpupack/gpupack/internal/source/promql"
)

// AddAccess registers the flags of what a request to Prometheus carries
// besides its query (promql.Access): a bearer token file, a CA file,
// basic auth with the password in a file, and extra headers, given or
// read from files. Every file is read again for each request, so that a
// rotated Secret is used without a restart.
func AddAccess(f *pflag.FlagSet, a *promql.Access) {
	f.StringVar(&a.BearerTokenFile, "prometheus-bearer-token-file", "", "file holding a token sent to Prometheus as Authorization: Bearer, read again for each request (a mounted Secret's key)")
	f.StringVar(&a.CAFile, "prometheus-ca-file", "", "PEM file of the CA certificates that the Prometheus server's certificate must chain to (https), read again when it changes")
	f.StringVar(&a.Username, "prometheus-username", "", "user of HTTP basic auth to Prometheus, with --prometheus-password-file")
	f.StringVar(&a.PasswordFile, "prometheus-password-file", "", "file holding the password of HTTP basic auth to Prometheus, read again for each request")
	f.Var(&headerMap{m: &a.Headers}, "prometheus-header", "NAME=VALUE: a header sent with every request to Prometheus, e.g. X-Scope-OrgID=team-a for Mimir or Cortex; repeat for more")
	f.Var(&headerMap{m: &a.HeaderFiles, files: true}, "prometheus-header-file", "NAME=FILE: a header sent with every request to Prometheus, its value read from FILE for each request (a mounted Secret's key); repeat for more")
}

// headerMap is a repeated NAME=VALUE flag gathered into a map; a value
// may hold commas and equals signs.
type headerMap struct {
	m     *map[string]string
	files bool
}

func (h *headerMap) String() string {
	if h.m == nil || len(*h.m) == 0 {
		return ""
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(*h.m)) {
		parts = append(parts, name+"="+(*h.m)[name])
	}
	return strings.Join(parts, ",")
}

func (h *headerMap) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	switch {
	case !ok || name == "":
		return fmt.Errorf("%q: want %s, e.g. %s", s, h.Type(), h.example())
	case strings.ContainsAny(name, " \t:\r\n"):
		return fmt.Errorf("%q: %q is not a header name", s, name)
	case h.files && value == "":
		return fmt.Errorf("%q: name the file that holds the header's value", s)
	}
	if *h.m == nil {
		*h.m = map[string]string{}
	}
	if _, dup := (*h.m)[name]; dup {
		return fmt.Errorf("header %s given twice; give it once", name)
	}
	(*h.m)[name] = value
	return nil
}

func (h *headerMap) Type() string {
	if h.files {
		return "NAME=FILE"
	}
	return "NAME=VALUE"
}

func (h *headerMap) example() string {
	if h.files {
		return "X-Scope-OrgID=/etc/gpupack/prometheus/tenant"
	}
	return "X-Scope-OrgID=team-a"
}

// CheckAccess refuses access flags (AddAccess) without the --prometheus
// URL they are for.
func CheckAccess(a promql.Access, prometheus string) error {
	if !a.IsZero() && prometheus == "" {
		return fmt.Errorf("--prometheus-bearer-token-file, --prometheus-ca-file, --prometheus-username, --prometheus-password-file and --prometheus-header(-file) say how to reach --prometheus: give --prometheus too, or drop them")
	}
	return nil
}
