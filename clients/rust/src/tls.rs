//! The `rustls` feature's TLS options of [`ClientBuilder`]: a private CA
//! (Go: `WithCAFile`, the CLI's `--ca-file`) and a client certificate for
//! mutual TLS (docs/operations.md, "TLS"). They configure the one
//! `reqwest::Client` that every request, watch stream and observer of the
//! built [`Client`](crate::Client) shares.

use crate::client::ClientBuilder;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The TLS files a builder was given.
#[derive(Debug, Default)]
pub(crate) struct Tls {
    ca_file: Option<PathBuf>,
    identity: Option<(PathBuf, PathBuf)>,
}

impl ClientBuilder {
    /// Trusts the certificate authorities in the PEM file at `path` for an
    /// `https://` broker, **instead of** the built-in roots (Go:
    /// `WithCAFile`; the CLI's `--ca-file`): a broker whose certificate a
    /// private CA signed. Every certificate of the file is a root; no
    /// other root is trusted by this client, so a broker with a public
    /// certificate is refused (leave `ca_file` unset for one).
    ///
    /// [`build`](ClientBuilder::build) reads the file and fails with
    /// [`Error::InvalidRequest`] when it cannot be read or holds no
    /// certificate. It cannot be combined with
    /// [`http_client`](ClientBuilder::http_client) (configure that client's
    /// TLS instead): `build` refuses both. Only with the `rustls` feature.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca_file = Some(path.into());
        self
    }

    /// Presents the certificate in the PEM file `cert` (the certificate,
    /// then its chain) with its private key in the PEM file `key` (PKCS#8,
    /// PKCS#1 or SEC 1) in every TLS handshake: mutual TLS, for a broker
    /// with `client_ca_file`. The certificate only admits the connection;
    /// the bearer token still decides the family and the grants.
    ///
    /// [`build`](ClientBuilder::build) reads both files and fails with
    /// [`Error::InvalidRequest`] when they cannot be read or do not hold a
    /// certificate and a key. Like [`ca_file`](ClientBuilder::ca_file), it
    /// cannot be combined with
    /// [`http_client`](ClientBuilder::http_client). Only with the `rustls`
    /// feature.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.identity = Some((cert.into(), key.into()));
        self
    }
}

impl Tls {
    /// Whether any TLS option was given.
    pub(crate) fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.identity.is_some()
    }

    /// The HTTP client with the given TLS files (through rustls).
    pub(crate) fn client(&self) -> Result<reqwest::Client> {
        let mut b = reqwest::Client::builder().use_rustls_tls();
        if let Some(path) = &self.ca_file {
            let certs = reqwest::Certificate::from_pem_bundle(&read(path, "CA file")?)
                .map_err(|e| bad(path, "CA file", e))?;
            if certs.is_empty() {
                return Err(bad(path, "CA file", "no PEM certificate in it"));
            }
            b = b.tls_built_in_root_certs(false);
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        if let Some((cert, key)) = &self.identity {
            let mut pem = read(cert, "client certificate")?;
            pem.push(b'\n');
            pem.extend(read(key, "client key")?);
            let id = reqwest::Identity::from_pem(&pem)
                .map_err(|e| bad(cert, "client certificate and key", e))?;
            b = b.identity(id);
        }
        b.build()
            .map_err(|e| Error::invalid_request(format!("TLS configuration: {}", source_chain(&e))))
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| bad(path, what, e))
}

fn bad(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::invalid_request(format!("{what} {}: {e}", path.display()))
}

/// An error with its causes, `a: b: c` (reqwest's own says only "builder
/// error").
fn source_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
