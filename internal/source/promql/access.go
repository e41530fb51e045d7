package promql

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"

	"github.com/prometheus/common/config"
)

// Access is what a request to Prometheus carries besides its query: the
// credentials and headers a PromQL store behind a proxy or a multi-tenant
// one (Mimir's and Cortex's X-Scope-OrgID) asks for, and the CA that its
// certificate chains to. Each secret is a file, such as a key of a mounted
// Secret, and is read again for every request, so that a rotated token or
// password is used without a restart; the CA file is read again too, and
// a changed one replaces the connections.
//
// The semantics are prometheus/common's HTTPClientConfig (Prometheus' own
// bearer_token_file, basic_auth, http_headers and tls_config.ca_file), and
// the requests go through its round trippers; the transport under them is
// Go's default one, which asks for compressed answers (the one
// config.NewRoundTripperFromConfig builds does not, and a month of a
// fleet's answers runs to gigabytes uncompressed).
type Access struct {
	// BearerTokenFile holds the token sent as "Authorization: Bearer".
	BearerTokenFile string
	// CAFile holds the PEM certificates that the server's certificate
	// must chain to, in place of the system's.
	CAFile string
	// Username and PasswordFile are HTTP basic auth.
	Username     string
	PasswordFile string
	// Headers are sent with every request, by name.
	Headers map[string]string
	// HeaderFiles are headers whose values are read from files, by name.
	HeaderFiles map[string]string
}

// IsZero says whether a asks for nothing beyond the URL.
func (a Access) IsZero() bool {
	return a.BearerTokenFile == "" && a.CAFile == "" && a.Username == "" && a.PasswordFile == "" &&
		len(a.Headers) == 0 && len(a.HeaderFiles) == 0
}

// clientConfig is a as prometheus/common's HTTPClientConfig, whose
// Validate refuses two kinds of credentials at once and the headers that
// Prometheus reserves (Authorization, Content-Type, ...).
func (a Access) clientConfig() config.HTTPClientConfig {
	c := config.HTTPClientConfig{BearerTokenFile: a.BearerTokenFile, TLSConfig: config.TLSConfig{CAFile: a.CAFile}}
	if a.Username != "" || a.PasswordFile != "" {
		c.BasicAuth = &config.BasicAuth{Username: a.Username, PasswordFile: a.PasswordFile}
	}
	if len(a.Headers)+len(a.HeaderFiles) > 0 {
		c.HTTPHeaders = &config.Headers{Headers: map[string]config.Header{}}
		for name, v := range a.Headers {
			h := c.HTTPHeaders.Headers[name]
			h.Values = append(h.Values, v)
			c.HTTPHeaders.Headers[name] = h
		}
		for name, f := range a.HeaderFiles {
			h := c.HTTPHeaders.Headers[name]
			h.Files = append(h.Files, f)
			c.HTTPHeaders.Headers[name] = h
		}
	}
	return c
}

// check refuses what cannot work: credentials twice over (urlUser: the
// URL has a userinfo), a password without a user or the reverse, a
// reserved header, a file that cannot be read now.
func (a Access) check(urlUser bool) error {
	if urlUser && (a.Username != "" || a.PasswordFile != "" || a.BearerTokenFile != "") {
		return errors.New("the URL holds a user and the flags name credentials too: drop the user from the URL (user:password@), and keep the password in a file")
	}
	if (a.Username == "") != (a.PasswordFile == "") {
		return errors.New("basic auth needs both a user (--prometheus-username) and a password file (--prometheus-password-file)")
	}
	cfg := a.clientConfig()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%v (give one of a bearer token file and basic auth; headers other than Authorization and the ones HTTP sets)", err)
	}
	files := map[string]string{"--prometheus-bearer-token-file": a.BearerTokenFile, "--prometheus-ca-file": a.CAFile, "--prometheus-password-file": a.PasswordFile}
	for name, f := range a.HeaderFiles {
		files["--prometheus-header-file "+name] = f
	}
	for _, flag := range slices.Sorted(maps.Keys(files)) {
		if f := files[flag]; f != "" {
			if _, err := os.ReadFile(f); err != nil {
				return fmt.Errorf("%s: %v; name a readable file, such as a key of a mounted Secret", flag, err)
			}
		}
	}
	return nil
}

// roundTripper is Go's default transport under prometheus/common's round
// trippers for a: the CA reloader, then the credentials and the headers.
func (a Access) roundTripper() (http.RoundTripper, error) {
	base := func(tc *tls.Config) (http.RoundTripper, error) {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tc
		return t, nil
	}
	var rt http.RoundTripper
	var err error
	if a.CAFile != "" {
		tlsCfg := config.TLSConfig{CAFile: a.CAFile}
		tc, err := config.NewTLSConfig(&tlsCfg)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-ca-file %s: %v; give a file of PEM certificates", a.CAFile, err)
		}
		rt, err = config.NewTLSRoundTripper(tc, config.TLSRoundTripperSettings{CA: config.NewFileSecret(a.CAFile)}, base)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-ca-file %s: %v", a.CAFile, err)
		}
	} else if rt, err = base(nil); err != nil {
		return nil, err
	}
	if a.BearerTokenFile != "" {
		rt = config.NewAuthorizationCredentialsRoundTripper("Bearer", config.NewFileSecret(a.BearerTokenFile), rt)
	}
	if a.Username != "" {
		rt = config.NewBasicAuthRoundTripper(config.NewInlineSecret(a.Username), config.NewFileSecret(a.PasswordFile), rt)
	}
	if h := a.clientConfig().HTTPHeaders; h != nil {
		rt = config.NewHeadersRoundTripper(h, rt)
	}
	return rt, nil
}
