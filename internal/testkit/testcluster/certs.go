package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// testCA is a certificate authority of one test cluster, which signs the
// certificates that its components show each other.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// certValidity is the validity of the test certificates: longer than any
// test, starting an hour back so that a clock a little behind accepts them.
const certValidity = 24 * time.Hour

// newCA generates a CA named name (ECDSA P-256).
func newCA(t testing.TB, name string) *testCA {
	t.Helper()
	key := generateKey(t)
	tmpl := certTemplate(t, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testcluster: CA %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcluster: CA %s: %v", name, err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for commonName, valid for hosts (DNS names or
// IP addresses) and the usages, and writes it and its key to dir as
// certFile and keyFile, returning their paths.
func (ca *testCA) issue(t testing.TB, dir, certFile, keyFile, commonName string, hosts []string, usages ...x509.ExtKeyUsage) (certPath, keyPath string) {
	t.Helper()
	key := generateKey(t)
	tmpl := certTemplate(t, commonName)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = usages
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testcluster: certificate %s: %v", commonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcluster: key of %s: %v", commonName, err)
	}
	certPath = writeFile(t, dir, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyPath = writeFile(t, dir, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	return certPath, keyPath
}

// writeCert writes the CA's certificate to dir/name and returns its path.
func (ca *testCA) writeCert(t testing.TB, dir, name string) string {
	t.Helper()
	return writeFile(t, dir, name, string(ca.pem))
}

func generateKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcluster: generate key: %v", err)
	}
	return key
}

func certTemplate(t testing.TB, commonName string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testcluster: serial number: %v", err)
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity)}
}

// frontProxyClient is the name of the certificate the apiserver shows an
// aggregated API server when it proxies a request, which that server
// trusts to tell it who asked (the requestheader flags).
const frontProxyClient = "front-proxy-client"

// aggregationFlags gives kube-apiserver what its aggregation layer needs
// to proxy to an aggregated API server, as kubeadm sets it up: a
// front-proxy CA, a client certificate of it to proxy with, and the
// headers that carry the user. The apiserver publishes the CA and the
// headers in kube-system's extension-apiserver-authentication ConfigMap,
// where the aggregated server reads them.
func aggregationFlags(t testing.TB, dir string) []string {
	t.Helper()
	certs := mkdir(t, dir, "front-proxy")
	ca := newCA(t, "front-proxy-ca")
	cert, key := ca.issue(t, certs, "front-proxy-client.crt", "front-proxy-client.key", frontProxyClient, nil, x509.ExtKeyUsageClientAuth)
	return []string{
		"--requestheader-client-ca-file=" + ca.writeCert(t, certs, "front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + cert,
		"--proxy-client-key-file=" + key,
	}
}
