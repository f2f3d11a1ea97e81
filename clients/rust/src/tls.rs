//! The `rustls` feature's TLS options of a client builder: a private CA
//! (Go: `WithCAFile`, the CLI's `--ca-file`) and a client certificate for
//! mutual TLS (docs/operations.md, "TLS"). They configure the one
//! `reqwest::Client` that every request, watch stream and observer of the
//! built client shares (`ClientBuilder::ca_file`, `ClientBuilder::identity`).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The TLS files a builder was given.
#[derive(Debug, Default)]
pub(crate) struct Tls {
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) identity: Option<(PathBuf, PathBuf)>,
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
