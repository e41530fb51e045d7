package webhookcert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testPolicy() Policy {
	return Policy{
		Hosts:      []string{"gpupack-webhook.gpupack-system.svc", "127.0.0.1"},
		Validity:   24 * time.Hour,
		CAValidity: 30 * 24 * time.Hour,
		Settle:     2 * time.Hour,
	}
}

func reconcile(t *testing.T, p Policy, m Material, now time.Time) Result {
	t.Helper()
	r, err := p.Reconcile(m, now)
	if err != nil {
		t.Fatalf("Reconcile at %s: %v", now, err)
	}
	if !r.NextCheck.After(now) {
		t.Errorf("Reconcile at %s: next check %s is not later", now, r.NextCheck)
	}
	return r
}

// leafOf parses the serving certificate, failing if it and its key are
// not a pair.
func leafOf(t *testing.T, m Material) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		t.Fatalf("serving certificate and key: %v", err)
	}
	return pair.Leaf
}

// verifies says whether the serving certificate of m chains, at now, to
// the CA bundle of trusted, with the names of p.
func verifies(t *testing.T, p Policy, m, trusted Material, now time.Time) error {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(trusted.CABundle) {
		t.Fatal("the CA bundle holds no certificate")
	}
	leaf := leafOf(t, m)
	for _, h := range p.Hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: h}); err != nil {
			return err
		}
	}
	return nil
}

func bundleSize(t *testing.T, m Material) int {
	t.Helper()
	cas, err := parseCertificates(m.CABundle)
	if err != nil {
		t.Fatal(err)
	}
	return len(cas)
}

func TestReconcileGeneratesFromNothing(t *testing.T) {
	p := testPolicy()
	r := reconcile(t, p, Material{}, t0)
	if len(r.Changes) != 2 || !strings.Contains(r.Changes[0], "the Secret holds no CA") || !strings.Contains(r.Changes[1], "issued a serving certificate") {
		t.Errorf("changes %q, want a new CA and a serving certificate", r.Changes)
	}
	if err := verifies(t, p, r.Material, r.Material, t0); err != nil {
		t.Errorf("the generated certificate does not verify against its bundle: %v", err)
	}
	leaf := leafOf(t, r.Material)
	if got, want := leaf.NotAfter, t0.Add(p.Validity); !got.Equal(want) {
		t.Errorf("serving certificate valid until %s, want %s", got, want)
	}
	if want := t0.Add(p.Validity * 2 / 3); !r.NextCheck.Equal(want) {
		t.Errorf("next check %s, want the renewal at %s", r.NextCheck, want)
	}
	for _, c := range r.Changes {
		if strings.Contains(c, "PRIVATE KEY") {
			t.Errorf("a change names key material: %q", c)
		}
	}
	again := reconcile(t, p, r.Material, t0)
	if len(again.Changes) != 0 {
		t.Errorf("reconciling fresh material changed %q", again.Changes)
	}
}

// TestReconcileRenewal checks each reason to keep or replace the
// material, from one generated at t0.
func TestReconcileRenewal(t *testing.T) {
	p := testPolicy()
	fresh := reconcile(t, p, Material{}, t0).Material
	other := reconcile(t, p, Material{}, t0).Material // another CA and serving pair
	garbage := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
	with := func(f func(m *Material)) Material { m := fresh; f(&m); return m }
	renamed := p
	renamed.Hosts = []string{"gpupack-webhook.other.svc"}
	shorter := p
	shorter.Validity = time.Hour

	cases := map[string]struct {
		policy  Policy
		m       Material
		now     time.Time
		newCA   bool   // a new CA replaces the bundle
		newCert bool   // a new serving certificate
		why     string // in the changes
	}{
		"fresh":                   {m: fresh, now: t0.Add(p.Validity / 2)},
		"just before 2/3":         {m: fresh, now: t0.Add(p.Validity*2/3 - time.Second)},
		"2/3 passed":              {m: fresh, now: t0.Add(p.Validity * 2 / 3), newCert: true, why: "two thirds of the serving certificate's validity passed"},
		"expired":                 {m: fresh, now: t0.Add(p.Validity + time.Hour), newCert: true, why: "does not verify against the CA bundle"},
		"wrong DNS names":         {policy: renamed, m: fresh, now: t0, newCert: true, why: "names 127.0.0.1,gpupack-webhook.gpupack-system.svc, not gpupack-webhook.other.svc"},
		"longer than validity":    {policy: shorter, m: fresh, now: t0, newCert: true, why: "longer than the validity 1h0m0s"},
		"no serving certificate":  {m: with(func(m *Material) { m.Cert, m.Key = nil, nil }), now: t0, newCert: true, why: "holds no serving certificate"},
		"garbage tls.crt":         {m: with(func(m *Material) { m.Cert = garbage }), now: t0, newCert: true, why: "not a usable pair"},
		"garbage tls.key":         {m: with(func(m *Material) { m.Key = []byte("not PEM") }), now: t0, newCert: true, why: "not a usable pair"},
		"tls.key of another cert": {m: with(func(m *Material) { m.Key = other.Key }), now: t0, newCert: true, why: "not a usable pair"},
		"signed by another CA":    {m: with(func(m *Material) { m.Cert, m.Key = other.Cert, other.Key }), now: t0, newCert: true, why: "does not verify against the CA bundle"},
		"garbage ca.crt":          {m: with(func(m *Material) { m.CABundle = garbage }), now: t0, newCA: true, newCert: true, why: "ca.crt holds a certificate that does not parse"},
		"text in ca.crt":          {m: with(func(m *Material) { m.CABundle = append(bytes.Clone(m.CABundle), "junk"...) }), now: t0, newCA: true, newCert: true, why: "ca.crt is not a PEM bundle"},
		"garbage ca.key":          {m: with(func(m *Material) { m.CAKey = garbage }), now: t0, newCA: true, newCert: true, why: "ca.key is not an EC private key"},
		"ca.key of another CA":    {m: with(func(m *Material) { m.CAKey = other.CAKey }), now: t0, newCA: true, newCert: true, why: "ca.key is not the key of the first CA"},
		"serving cert as CA":      {m: with(func(m *Material) { m.CABundle = m.Cert }), now: t0, newCA: true, newCert: true, why: "which is not a CA"},
		"CA expired":              {m: fresh, now: t0.Add(p.CAValidity), newCA: true, newCert: true, why: "the CA is valid from"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			policy := tc.policy
			if policy.Hosts == nil {
				policy = p
			}
			r := reconcile(t, policy, tc.m, tc.now)
			gotCA := !bytes.Equal(r.Material.CABundle, tc.m.CABundle) || !bytes.Equal(r.Material.CAKey, tc.m.CAKey)
			gotCert := !bytes.Equal(r.Material.Cert, tc.m.Cert)
			if gotCA != tc.newCA || gotCert != tc.newCert {
				t.Errorf("new CA %v, new serving certificate %v; want %v, %v (changes %q)", gotCA, gotCert, tc.newCA, tc.newCert, r.Changes)
			}
			if tc.why != "" && !strings.Contains(strings.Join(r.Changes, "\n"), tc.why) {
				t.Errorf("changes %q do not say %q", r.Changes, tc.why)
			}
			if tc.newCA && bundleSize(t, r.Material) != 1 {
				t.Errorf("a replaced unusable CA left %d CAs in the bundle, want only the new one", bundleSize(t, r.Material))
			}
			if err := verifies(t, policy, r.Material, r.Material, tc.now); err != nil {
				t.Errorf("the result does not verify: %v", err)
			}
			if again := reconcile(t, policy, r.Material, tc.now); len(again.Changes) != 0 {
				t.Errorf("reconciling the result again changed %q", again.Changes)
			}
		})
	}
}

// TestCARotationKeepsEveryServedCertificateTrusted steps a clock through
// more than a CA's life, applying each decision, and checks at every step
// what clients see: the certificate served now verifies against the bundle
// a client took up to Settle ago, and the certificate a replica that has
// not reread the Secret for up to Settle still serves verifies against the
// bundle of now. The CA must have been replaced, the old one kept a while
// and dropped at last.
func TestCARotationKeepsEveryServedCertificateTrusted(t *testing.T) {
	p := testPolicy()
	const step = time.Hour
	settleSteps := int(p.Settle / step)
	history := []Material{reconcile(t, p, Material{}, t0).Material}
	initialCA := history[0].CABundle
	sawTwo, rotated := false, false
	for now := t0.Add(step); now.Before(t0.Add(p.CAValidity * 3 / 2)); now = now.Add(step) {
		r := reconcile(t, p, history[len(history)-1], now)
		history = append(history, r.Material)
		cur := r.Material
		for back := 1; back <= settleSteps && back < len(history); back++ {
			old := history[len(history)-1-back]
			if err := verifies(t, p, cur, old, now); err != nil {
				t.Fatalf("at %s: the served certificate is not trusted by the bundle of %d h before: %v (changes %q)", now, back, err, r.Changes)
			}
			if leafOf(t, old).NotAfter.After(now) {
				if err := verifies(t, p, old, cur, now); err != nil {
					t.Fatalf("at %s: the certificate served %d h before is no longer trusted: %v (changes %q)", now, back, err, r.Changes)
				}
			}
		}
		if n := bundleSize(t, cur); n == 2 {
			sawTwo = true
		} else if n == 1 && !bytes.Equal(cur.CABundle[:100], initialCA[:100]) {
			rotated = true
		}
	}
	if !sawTwo || !rotated {
		t.Errorf("the bundle held two CAs: %v; ended with only a new CA: %v; want both", sawTwo, rotated)
	}
}

func TestValidateHosts(t *testing.T) {
	cases := map[string]struct {
		hosts []string
		err   string
	}{
		"service names": {hosts: []string{"gpupack-webhook.gpupack-system.svc", "gpupack-webhook.gpupack-system.svc.cluster.local"}},
		"IP addresses":  {hosts: []string{"127.0.0.1", "::1"}},
		"none":          {err: "no DNS name or IP address given"},
		"upper case":    {hosts: []string{"Webhook.svc"}, err: `"Webhook.svc" is neither an IP address nor a DNS name (label "Webhook"`},
		"empty label":   {hosts: []string{"webhook..svc"}, err: `label ""`},
		"URL":           {hosts: []string{"https://webhook"}, err: `"https://webhook" is neither`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateHosts(tc.hosts)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("ValidateHosts(%q) = %v, want %q", tc.hosts, err, tc.err)
			}
		})
	}
}
