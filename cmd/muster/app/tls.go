package app

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
)

// TLSConfig is the `tls:` section: the broker serves HTTPS, HTTP/2 and
// HTTP/1.1 by ALPN, instead of cleartext.
//
//	tls:
//	  cert_file: /etc/muster/tls.crt   # PEM: the certificate, then its chain
//	  key_file: /etc/muster/tls.key    # PEM: its private key
//	  client_ca_file: /etc/muster/ca.crt  # optional: mutual TLS, clients need a certificate it signed
//	  min_version: "1.2"               # "1.2" (default) or "1.3"
//
// The files are read at start and again on every reload (SIGHUP): a renewed
// certificate is served to new connections without a restart.
type TLSConfig struct {
	CertFile     string `yaml:"cert_file" validate:"required,max=4096"`
	KeyFile      string `yaml:"key_file" validate:"required,max=4096"`
	ClientCAFile string `yaml:"client_ca_file" validate:"max=4096"`
	MinVersion   string `yaml:"min_version" validate:"omitempty,oneof=1.2 1.3"`
}

// load reads the files and builds the server's TLS configuration.
func (c *TLSConfig) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file, key_file: %w", err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	if c.MinVersion == "1.3" {
		cfg.MinVersion = tls.VersionTLS13
	}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client_ca_file %s: no PEM certificate in it", c.ClientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// tlsFiles holds the TLS configuration in force: every new handshake reads
// it through an atomic pointer, and a reload replaces it whole (the
// certificate, the client CAs and the least version); connections already
// open keep the one they were made with.
type tlsFiles struct{ current atomic.Pointer[tls.Config] }

// serverConfig is the http.Server's TLS configuration: each handshake gets
// the one in force.
func (t *tlsFiles) serverConfig() *tls.Config {
	return &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		// GetConfigForClient answers first; GetCertificate is the same
		// certificate for whatever asks without it.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &t.current.Load().Certificates[0], nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.current.Load(), nil },
	}
}
