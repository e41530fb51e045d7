package webhookcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// The keys of the Secret that holds the material.
const (
	KeyCABundle = "ca.crt"  // the CA bundle, newest CA first: the webhooks' caBundle
	KeyCAKey    = "ca.key"  // the newest CA's private key
	KeyCert     = "tls.crt" // the serving certificate
	KeyKey      = "tls.key" // its private key
)

// DefaultCAValidity is how long a generated CA is valid; it is replaced
// once two thirds of it have passed.
const DefaultCAValidity = 10 * 365 * 24 * time.Hour

// Backdate is how far before its issue a generated certificate's validity
// starts, so that a client whose clock lags a little accepts it.
const Backdate = time.Minute

// Material is the webhook's certificate material as the Secret holds it,
// PEM-encoded. Any field may be empty or garbage; Reconcile replaces what
// is not usable.
type Material struct {
	CABundle []byte // ca.crt: newest CA first, older CAs kept while a certificate they signed may be served
	CAKey    []byte // ca.key: the newest CA's key
	Cert     []byte // tls.crt
	Key      []byte // tls.key
}

// FromData reads Material from a Secret's data.
func FromData(data map[string][]byte) Material {
	return Material{CABundle: data[KeyCABundle], CAKey: data[KeyCAKey], Cert: data[KeyCert], Key: data[KeyKey]}
}

// SetData writes m into a Secret's data, leaving its other keys alone.
func (m Material) SetData(data map[string][]byte) {
	data[KeyCABundle], data[KeyCAKey], data[KeyCert], data[KeyKey] = m.CABundle, m.CAKey, m.Cert, m.Key
}

// Policy says what certificates the webhook needs and when to renew them.
type Policy struct {
	// Hosts are the DNS names and IP addresses the serving certificate
	// must name, exactly.
	Hosts []string
	// Validity is the serving certificate's; it is renewed once two
	// thirds of it have passed.
	Validity time.Duration
	// CAValidity is the CA's (DefaultCAValidity when zero).
	CAValidity time.Duration
	// Settle is how long a new CA sits in the bundle before it signs a
	// serving certificate, and how long an old CA stays after the serving
	// certificate moved to a newer one: long enough for every replica to
	// reread the Secret and for the webhook configuration's caBundle to
	// reach the apiserver, so that no client sees a certificate of a CA it
	// does not trust yet.
	Settle time.Duration
}

// Result is what Reconcile decided.
type Result struct {
	// Material is what the Secret should hold: the input unchanged when
	// Changes is empty.
	Material Material
	// Changes says what was replaced and why, for the log; it never
	// holds key material.
	Changes []string
	// NextCheck is when the material next needs a decision (a renewal, a
	// new CA settled, an old CA to drop).
	NextCheck time.Time
}

// ValidateHosts checks that each host is an IP address or a DNS name.
func ValidateHosts(hosts []string) error {
	if len(hosts) == 0 {
		return errors.New("no DNS name or IP address given")
	}
	for _, h := range hosts {
		if net.ParseIP(h) != nil {
			continue
		}
		if len(h) > 253 || h == "" {
			return fmt.Errorf("%q is neither an IP address nor a DNS name", h)
		}
		for _, label := range strings.Split(h, ".") {
			if !dnsLabel(label) {
				return fmt.Errorf("%q is neither an IP address nor a DNS name (label %q: want 1-63 of a-z, 0-9 and '-', not starting or ending with '-')", h, label)
			}
		}
	}
	return nil
}

func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// Reconcile decides, at now, what the Secret must hold: m itself if its
// CA and serving certificate are usable and not due, else m with what is
// missing, broken or due generated anew. It errors only when the system's
// random source fails.
//
// The rules: the CA bundle must parse, its first CA must match ca.key and be
// valid; otherwise a new CA (ECDSA P-256, CAValidity) replaces the
// bundle. Once two thirds of the CA's life have passed a new CA is put in
// front of it; the old one stays until it expires or the serving
// certificate has moved to the new CA for Settle. The serving certificate
// must match tls.key, name exactly Hosts, be signed by a CA of the bundle,
// and be within the first two thirds of its validity and no longer than
// Validity; otherwise the newest CA signs a new one, valid for Validity
// (never past the CA). A new CA signs only after Settle, unless nothing
// usable is served meanwhile.
func (p Policy) Reconcile(m Material, now time.Time) (Result, error) {
	caValidity := p.CAValidity
	if caValidity == 0 {
		caValidity = DefaultCAValidity
	}
	r := Result{Material: m}
	next := now.Add(caValidity) // later than anything below
	soon := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}

	cas, caKey, why := parseCA(m, now)
	if why != "" {
		cert, key, err := newCA(caValidity, now)
		if err != nil {
			return Result{}, err
		}
		cas, caKey = []*x509.Certificate{cert}, key
		r.Changes = append(r.Changes, fmt.Sprintf("%s: generated a new CA, valid until %s", why, cert.NotAfter.Format(time.RFC3339)))
	} else if renew := renewAt(cas[0]); !now.Before(renew) {
		cert, key, err := newCA(caValidity, now)
		if err != nil {
			return Result{}, err
		}
		r.Changes = append(r.Changes, fmt.Sprintf("two thirds of the CA's life passed on %s: generated a new CA, valid until %s; the old one stays in the bundle while it may be served",
			renew.Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339)))
		cas, caKey = append([]*x509.Certificate{cert}, cas...), key
	}
	newest := cas[0]
	soon(renewAt(newest))
	settled := len(cas) == 1 || !now.Before(issued(newest).Add(p.Settle))

	leaf, why := p.checkServing(m, cas, now)
	switch {
	case why == "":
		if over := issued(leaf).Add(p.Validity); leaf.NotAfter.After(over.Add(time.Second)) {
			why = fmt.Sprintf("the serving certificate is valid until %s, longer than the validity %s", leaf.NotAfter.Format(time.RFC3339), p.Validity)
		} else if !now.Before(renewAt(leaf)) {
			why = fmt.Sprintf("two thirds of the serving certificate's validity passed on %s", renewAt(leaf).Format(time.RFC3339))
		}
		if why != "" && !settled && now.Before(leaf.NotAfter) {
			// Keep serving what every client trusts until the new CA has
			// reached them.
			soon(issued(newest).Add(p.Settle))
			why = ""
		} else if why == "" {
			soon(renewAt(leaf))
		}
	case !settled:
		why += " (signed by the new CA at once: nothing usable is served meanwhile)"
	}
	if why != "" {
		cert, key, err := p.newServing(newest, caKey, now)
		if err != nil {
			return Result{}, err
		}
		r.Material.Cert, r.Material.Key = cert, key
		leaf, _ = x509.ParseCertificate(mustDER(cert))
		r.Changes = append(r.Changes, fmt.Sprintf("%s: issued a serving certificate for %s, valid until %s", why, strings.Join(p.Hosts, ","), leaf.NotAfter.Format(time.RFC3339)))
		soon(renewAt(leaf))
	}

	// Old CAs stay while the serving certificate may still be one they
	// signed somewhere: until they expire, or for Settle after the
	// serving certificate moved to a newer CA.
	kept := cas[:1]
	signedByNewest := leaf.CheckSignatureFrom(newest) == nil
	for _, old := range cas[1:] {
		until := old.NotAfter
		if signedByNewest {
			until = minTime(until, issued(leaf).Add(p.Settle))
		}
		if now.Before(until) {
			kept = append(kept, old)
			soon(until)
		} else {
			r.Changes = append(r.Changes, fmt.Sprintf("dropped the old CA %q from the bundle: nothing it signed is served any longer", old.Subject.CommonName))
		}
	}

	if len(r.Changes) > 0 {
		var bundle bytes.Buffer
		for _, c := range kept {
			_ = pem.Encode(&bundle, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
		r.Material.CABundle = bundle.Bytes()
		keyPEM, err := encodeKey(caKey)
		if err != nil {
			return Result{}, err
		}
		r.Material.CAKey = keyPEM
	}
	r.NextCheck = next
	return r, nil
}

// parseCA returns the bundle's CAs and the newest one's key, or why they
// are not usable.
func parseCA(m Material, now time.Time) ([]*x509.Certificate, *ecdsa.PrivateKey, string) {
	if len(bytes.TrimSpace(m.CABundle)) == 0 {
		return nil, nil, "the Secret holds no CA"
	}
	cas, err := parseCertificates(m.CABundle)
	if err != nil {
		return nil, nil, KeyCABundle + " " + err.Error()
	}
	for _, c := range cas {
		if !c.IsCA {
			return nil, nil, fmt.Sprintf("%s holds %q, which is not a CA", KeyCABundle, c.Subject.CommonName)
		}
	}
	key, err := parseKey(m.CAKey)
	if err != nil {
		return nil, nil, KeyCAKey + " " + err.Error()
	}
	if !key.Public().(*ecdsa.PublicKey).Equal(cas[0].PublicKey) {
		return nil, nil, KeyCAKey + " is not the key of the first CA of " + KeyCABundle
	}
	if now.Before(cas[0].NotBefore) || !now.Before(cas[0].NotAfter) {
		return nil, nil, fmt.Sprintf("the CA is valid from %s until %s only", cas[0].NotBefore.Format(time.RFC3339), cas[0].NotAfter.Format(time.RFC3339))
	}
	return cas, key, ""
}

// checkServing returns the serving certificate if it is usable at now
// (matches its key, names exactly the hosts, is signed by a CA of the
// bundle, has not expired), or why not.
func (p Policy) checkServing(m Material, cas []*x509.Certificate, now time.Time) (*x509.Certificate, string) {
	if len(bytes.TrimSpace(m.Cert)) == 0 {
		return nil, "the Secret holds no serving certificate"
	}
	pair, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, fmt.Sprintf("%s and %s are not a usable pair (%v)", KeyCert, KeyKey, err)
	}
	leaf := pair.Leaf
	if got, want := certHosts(leaf), normalHosts(p.Hosts); !slices.Equal(got, want) {
		return nil, fmt.Sprintf("the serving certificate names %s, not %s", strings.Join(got, ","), strings.Join(want, ","))
	}
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Sprintf("the serving certificate does not verify against the CA bundle (%v)", err)
	}
	return leaf, ""
}

func newCA(validity time.Duration, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("gpupack-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// newServing returns the PEM of a serving certificate for the hosts
// signed by ca, and of its key.
func (p Policy) newServing(ca *x509.Certificate, caKey crypto.Signer, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the serving key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: p.Hosts[0]},
		NotBefore:    now.Add(-Backdate),
		NotAfter:     minTime(now.Add(p.Validity), ca.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range p.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the serving certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// issued is when a certificate was generated: its validity starts
// Backdate earlier.
func issued(c *x509.Certificate) time.Time { return c.NotBefore.Add(Backdate) }

// renewAt is when two thirds of a certificate's validity have passed.
func renewAt(c *x509.Certificate) time.Time {
	start := issued(c)
	return start.Add(c.NotAfter.Sub(start) * 2 / 3)
}

func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a PEM block of type %q, want CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("holds a certificate that does not parse: %v", err)
		}
		certs = append(certs, c)
	}
	if len(bytes.TrimSpace(rest)) > 0 || len(certs) == 0 {
		return nil, errors.New("is not a PEM bundle of certificates")
	}
	return certs, nil
}

func parseKey(data []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("is not a PEM private key")
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("is not an EC private key")
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("is a %T, not an EC private key", k)
	}
	return ec, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("draw a serial number: %w", err)
	}
	return serial, nil
}

// certHosts is the sorted list of a certificate's DNS names and IP
// addresses.
func certHosts(c *x509.Certificate) []string {
	hosts := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

func normalHosts(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func mustDER(certPEM []byte) []byte {
	block, _ := pem.Decode(certPEM)
	return block.Bytes
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
