package muster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// WithCAFile trusts the certificate authorities in the PEM file at path
// for an https:// broker, instead of the system's roots: a broker whose
// certificate a private CA signed. New reads the file and fails when it
// holds no certificate.
//
// It configures a copy of the http.Client's transport (given by
// WithHTTPClient, or http.DefaultTransport), which must be an
// *http.Transport. For anything else (a client certificate for mutual TLS,
// pinned keys) give WithHTTPClient a transport with its own
// TLSClientConfig instead.
func WithCAFile(path string) Option { return func(c *Client) { c.caFile = path } }

// trustCAFile puts c.caFile's roots into a copy of hc's transport.
func trustCAFile(hc *http.Client, path string) error {
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("muster: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("muster: CA file %s: no PEM certificate in it", path)
	}
	var t *http.Transport
	switch rt := hc.Transport.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		return fmt.Errorf("muster: WithCAFile needs an *http.Transport, the http.Client has a %T", rt)
	}
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.RootCAs = pool
	t.ForceAttemptHTTP2 = true // a TLSClientConfig of our own would turn HTTP/2 off
	hc.Transport = t
	return nil
}
