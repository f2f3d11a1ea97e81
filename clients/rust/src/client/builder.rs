//! [`ClientBuilder`]: how a [`Client`] is made, its base URLs checked,
//! its options (the `rustls` feature's TLS files among them) read once.

use super::{Client, Inner, Towards};
use crate::error::{Error, Result};
use crate::loss::Sessions;
use reqwest::Url;
#[cfg(feature = "rustls")]
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Configures a [`Client`]; see [`Client::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    http: Option<reqwest::Client>,
    without_follow: bool,
    sticky_owner: bool,
    stay_on_unavailable: bool,
    single_broker: bool,
    never_lost: bool,
    send_plus_ttl: bool,
    late_loss: bool,
    creator_loss: bool,
    /// The `rustls` feature's CA file and client certificate (tls.rs).
    #[cfg(feature = "rustls")]
    tls: crate::tls::Tls,
}

impl ClientBuilder {
    /// Turns off following `wrong_broker` answers (Go: `WithoutFollow`): a
    /// request for a family that another broker serves then fails with
    /// [`Error::WrongBroker`], whose problem's `owner` names that broker.
    /// The rest of the rule of several brokers still applies.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn without_follow(mut self) -> Self {
        self.without_follow = true;
        self
    }

    /// Builds a deliberately broken client (`no_follow`, `sticky_owner`,
    /// `stay_on_unavailable`, `single_broker`, `never_lost`,
    /// `send_plus_ttl`, `late_loss`, `creator_loss`), for the conformance tests only (the
    /// `test-util` feature).
    #[cfg(any(test, feature = "test-util"))]
    #[must_use = "builder methods return the changed value; use it"]
    pub fn faults(mut self, f: crate::faults::Faults) -> Self {
        self.without_follow |= f.no_follow;
        self.sticky_owner = f.sticky_owner;
        self.stay_on_unavailable = f.stay_on_unavailable;
        self.single_broker = f.single_broker;
        self.never_lost = f.never_lost;
        self.send_plus_ttl = f.send_plus_ttl;
        self.late_loss = f.late_loss;
        self.creator_loss = f.creator_loss;
        self
    }

    /// Sends `token` as the bearer token of every request (Go: `WithToken`).
    /// A broker in dev mode accepts requests without one.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Uses `http` for every request (Go: `WithHTTPClient`). Its timeout, if
    /// any, also applies to watch streams and long-polling acquisitions: leave
    /// it unset, or longer than the longest wait. With the `rustls` feature
    /// it excludes `ca_file` and `identity`: give this client its TLS
    /// configuration instead.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Builds the client; every base URL must be `http(s)://host[:port]`.
    pub fn build(self) -> Result<Client> {
        let mut bases = parse_bases(&self.base)?;
        if self.single_broker {
            bases.truncate(1);
        }
        // The rustls feature's TLS files make the SDK's own HTTP client.
        #[cfg(feature = "rustls")]
        let http = match (self.tls.is_set(), self.http) {
            (true, Some(_)) => {
                return Err(Error::invalid_request(
                    "ca_file and identity configure the SDK's own HTTP client: \
                     give the reqwest::Client of http_client its TLS configuration instead",
                ))
            }
            (true, None) => Some(self.tls.client()?),
            (false, h) => h,
        };
        #[cfg(not(feature = "rustls"))]
        let http = self.http;
        let http = match http {
            Some(h) => h,
            None => reqwest::Client::builder().build()?,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                bases,
                token: self.token,
                http,
                epoch: Mutex::new(String::new()),
                follow: !self.without_follow,
                to: Mutex::new(Towards::default()),
                sticky_owner: self.sticky_owner,
                stay_on_unavailable: self.stay_on_unavailable,
                never_lost: self.never_lost,
                send_plus_ttl: self.send_plus_ttl,
                sessions: Sessions::new(self.late_loss, self.creator_loss),
            }),
        })
    }

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
    #[cfg(feature = "rustls")]
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
    #[cfg(feature = "rustls")]
    #[must_use = "builder methods return the changed value; use it"]
    pub fn identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.identity = Some((cert.into(), key.into()));
        self
    }
}

impl Client {
    /// A client of the broker at `base_url` (e.g. `http://127.0.0.1:7420`)
    /// without a token (dev mode). `base_url` may list several brokers'
    /// base URLs separated by commas, in order of preference, as
    /// `MUSTER_ADDR` may (docs/client-operations.md, "Several brokers").
    pub fn new(base_url: &str) -> Result<Client> {
        Client::builder(base_url).build()
    }

    /// A builder for a client of the broker at `base_url`, or of the
    /// brokers it lists separated by commas (see [`Client::new`]).
    pub fn builder(base_url: &str) -> ClientBuilder {
        ClientBuilder {
            base: base_url.to_string(),
            token: None,
            http: None,
            without_follow: false,
            sticky_owner: false,
            stay_on_unavailable: false,
            single_broker: false,
            never_lost: false,
            send_plus_ttl: false,
            late_loss: false,
            creator_loss: false,
            #[cfg(feature = "rustls")]
            tls: Default::default(),
        }
    }

    /// A builder for a client of several brokers, given their base URLs in
    /// order of preference (the list form of [`Client::builder`]); each is
    /// checked at [`ClientBuilder::build`], and an empty list is refused
    /// there.
    pub fn builder_list<I>(base_urls: I) -> ClientBuilder
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let list: Vec<String> = base_urls
            .into_iter()
            .map(|u| u.as_ref().to_string())
            .collect();
        Client::builder(&list.join(","))
    }
}

/// Reads the base URL argument: one base URL, or several separated by
/// commas (as `MUSTER_ADDR` may hold them), in order of preference. Go:
/// `parseBases`.
fn parse_bases(base_urls: &str) -> Result<Vec<Url>> {
    base_urls
        .split(',')
        .map(|s| {
            let s = s.trim().trim_end_matches('/');
            let bad = || {
                Error::invalid_request(format!(
                    "base URL {s:?}: want http(s)://host[:port], or several separated by commas"
                ))
            };
            let u = Url::parse(s).map_err(|_| bad())?;
            if !matches!(u.scheme(), "http" | "https") || u.host_str().unwrap_or("").is_empty() {
                return Err(bad());
            }
            Ok(u)
        })
        .collect()
}
