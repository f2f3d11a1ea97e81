package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// testCA is a throwaway certificate authority made by a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "muster test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, pool: x509.NewCertPool(), pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.pool.AddCert(cert)
	return ca
}

// issue signs a leaf certificate: a server one for 127.0.0.1, or a client
// one; it returns the certificate and key in PEM.
func (ca *testCA) issue(t *testing.T, serial int64, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "muster test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFiles(t *testing.T, files map[string][]byte) {
	t.Helper()
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// tlsClient trusts ca and speaks HTTP/2 when the server offers it.
func tlsClient(ca *testCA, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: ca.pool, Certificates: certs}}}
}

func newSessionOver(t *testing.T, hc *http.Client, base, secret string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/sessions", strings.NewReader(`{"owner_id":"w","ttl_ms":60000}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// servedSerial is the serial of the certificate a new handshake sees.
func servedSerial(t *testing.T, addr string, ca *testCA) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestTLSServeAndReload: with a tls section the broker serves HTTPS with
// HTTP/2, says https:// in its banner, and a reload swaps the certificate
// for new handshakes; the CLI reaches it with --ca-file or MUSTER_CA_FILE.
func TestTLSServeAndReload(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	crt, key, caFile, cfg := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "muster.yaml")
	c1, k1 := ca.issue(t, 101, true)
	writeFiles(t, map[string][]byte{crt: c1, key: k1, caFile: ca.pem})
	writeConfig(t, cfg, "tls: {cert_file: "+crt+", key_file: "+key+", min_version: \"1.2\"}\n", acmeToken("tls-secret"))

	cmd := exec.Command(musterBinary(t), "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--config", cfg)
	stdout := &musterbin.LockedBuffer{}
	cmd.Stdout = stdout
	p := startCommand(t, cmd)
	base := "https://" + p.addr

	hc := tlsClient(ca)
	resp, err := newSessionOver(t, hc, base, "tls-secret")
	if err != nil || resp.StatusCode != 201 || resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
		t.Fatalf("session over TLS: %v %+v", err, resp)
	}
	if got := servedSerial(t, p.addr, ca); got != 101 {
		t.Fatalf("served serial %d, want 101", got)
	}
	banner := regexp.MustCompile(`muster is serving on https://127\.0\.0\.1:\d+\n`)
	waitFor(t, func() bool { return banner.MatchString(stdout.String()) })
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("a client without the CA trusted the broker")
	}

	c2, k2 := ca.issue(t, 202, true)
	writeFiles(t, map[string][]byte{crt: c2, key: k2})
	if l := hangUp(t, p); l["msg"] != "config reloaded" {
		t.Fatalf("reload: %v", l)
	}
	if got := servedSerial(t, p.addr, ca); got != 202 {
		t.Errorf("served serial after the reload %d, want 202", got)
	}
	if resp, err := newSessionOver(t, hc, base, "tls-secret"); err != nil || resp.StatusCode != 201 {
		t.Errorf("session after the certificate swap: %v %v", err, resp)
	}

	// A key that does not match the certificate: refused, the old pair kept.
	_, k3 := ca.issue(t, 303, true)
	writeFiles(t, map[string][]byte{key: k3})
	if l := hangUp(t, p); !strings.Contains(l["err"].(string), "tls: cert_file, key_file") {
		t.Errorf("reload with a mismatched key: %v", l)
	}
	if got := servedSerial(t, p.addr, ca); got != 202 {
		t.Errorf("served serial after a refused reload %d, want 202", got)
	}

	c := &cli{tb: t, addr: base, env: []string{"MUSTER_TOKEN=tls-secret"}}
	c.ok("session", "create", "--ca-file", caFile)
	c.env = append(c.env, "MUSTER_CA_FILE="+caFile)
	c.ok("session", "create")
	c.env = c.env[:1]
	c.fails(1, "certificate", "session", "create")
}

// TestTLSMutual: with client_ca_file a client needs a certificate that CA
// signed.
func TestTLSMutual(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	crt, key, caFile, cfg := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "muster.yaml")
	c1, k1 := ca.issue(t, 101, true)
	writeFiles(t, map[string][]byte{crt: c1, key: k1, caFile: ca.pem})
	writeConfig(t, cfg, "tls: {cert_file: "+crt+", key_file: "+key+", client_ca_file: "+caFile+", min_version: \"1.3\"}\n", acmeToken("m-secret"))
	p := startProcess(t, "--addr", "127.0.0.1:0", "--config", cfg)
	base := "https://" + p.addr

	if resp, err := newSessionOver(t, tlsClient(ca), base, "m-secret"); err == nil {
		t.Fatalf("a client without a certificate was served: %d", resp.StatusCode)
	}
	cc, ck := ca.issue(t, 7, false)
	pair, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := newSessionOver(t, tlsClient(ca, pair), base, "m-secret"); err != nil || resp.StatusCode != 201 {
		t.Fatalf("a client with a certificate: %v %v", err, resp)
	}
	other := newTestCA(t)
	oc, ok := other.issue(t, 8, false)
	opair, _ := tls.X509KeyPair(oc, ok)
	if _, err := newSessionOver(t, tlsClient(ca, opair), base, "m-secret"); err == nil {
		t.Fatal("a client with a certificate of another CA was served")
	}
}
