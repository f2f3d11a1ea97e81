//! The [`Client`]: one broker's base URL, an optional bearer token and an
//! HTTP client, plus the one place that turns answers into values or errors.

use crate::error::{problem_error, Error, Result};
use reqwest::{Method, RequestBuilder, Url};
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex};

/// Bounds the bytes read from one non-streaming answer.
const MAX_BODY: usize = 32 << 20;

/// A client of one broker. Cheap to clone (clones share everything); safe to
/// use from many tasks. It holds no state besides its configuration and the
/// last epoch it saw.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    base: Url,
    token: Option<String>,
    http: reqwest::Client,
    epoch: Mutex<String>,
}

/// Configures a [`Client`]; see [`Client::builder`].
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    http: Option<reqwest::Client>,
}

impl ClientBuilder {
    /// Sends `token` as the bearer token of every request (Go: `WithToken`).
    /// A broker in dev mode accepts requests without one.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Uses `http` for every request (Go: `WithHTTPClient`). Its timeout, if
    /// any, also applies to watch streams and long-polling acquisitions: leave
    /// it unset, or longer than the longest wait.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Builds the client; the base URL must be `http(s)://host[:port]`.
    pub fn build(self) -> Result<Client> {
        let bad = || {
            Error::invalid_request(format!(
                "base URL {:?}: want http(s)://host[:port]",
                self.base
            ))
        };
        let base = Url::parse(self.base.trim_end_matches('/')).map_err(|_| bad())?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().unwrap_or("").is_empty() {
            return Err(bad());
        }
        let http = match self.http {
            Some(h) => h,
            None => reqwest::Client::builder().build()?,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                base,
                token: self.token,
                http,
                epoch: Mutex::new(String::new()),
            }),
        })
    }
}

impl Client {
    /// A client of the broker at `base_url` (e.g. `http://127.0.0.1:7420`)
    /// without a token (dev mode).
    pub fn new(base_url: &str) -> Result<Client> {
        Client::builder(base_url).build()
    }

    /// A builder for a client of the broker at `base_url`.
    pub fn builder(base_url: &str) -> ClientBuilder {
        ClientBuilder {
            base: base_url.to_string(),
            token: None,
            http: None,
        }
    }

    /// The broker lifetime (the `Muster-Epoch` header) of the last answer,
    /// `""` before the first one.
    pub fn epoch(&self) -> String {
        self.inner.epoch.lock().unwrap().clone()
    }

    /// The URL of `segments` below the base URL, each percent-encoded as one
    /// path segment (a `/` inside one becomes `%2F`).
    pub(crate) fn url(&self, segments: &[&str]) -> Url {
        let mut u = self.inner.base.clone();
        u.path_segments_mut()
            .expect("an http(s) URL has path segments")
            .pop_if_empty()
            .extend(segments);
        u
    }

    /// A request with the bearer token.
    pub(crate) fn request(&self, method: Method, url: Url) -> RequestBuilder {
        let rb = self.inner.http.request(method, url);
        match &self.inner.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    pub(crate) fn saw_epoch(&self, resp: &reqwest::Response) {
        if let Some(e) = resp
            .headers()
            .get("Muster-Epoch")
            .and_then(|v| v.to_str().ok())
        {
            if !e.is_empty() {
                *self.inner.epoch.lock().unwrap() = e.to_string();
            }
        }
    }

    /// Sends one request/response operation; a status other than `want`
    /// becomes an [`Error`] from its problem body. Returns the body.
    pub(crate) async fn send(&self, rb: RequestBuilder, want: u16) -> Result<bytes::Bytes> {
        let resp = rb.send().await?;
        self.saw_epoch(&resp);
        let status = resp.status().as_u16();
        let ct = content_type(&resp);
        let body = read_body(resp).await?;
        if status != want {
            return Err(problem_error(status, &ct, &body));
        }
        Ok(body)
    }

    /// [`Client::send`] and decode the JSON answer.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        rb: RequestBuilder,
        want: u16,
    ) -> Result<T> {
        let body = self.send(rb, want).await?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("decoding a {want} answer: {e}")))
    }
}

pub(crate) fn content_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Reads a body, at most [`MAX_BODY`] bytes.
pub(crate) async fn read_body(mut resp: reqwest::Response) -> Result<bytes::Bytes> {
    let mut buf = bytes::BytesMut::new();
    while let Some(chunk) = resp.chunk().await? {
        if buf.len() + chunk.len() > MAX_BODY {
            return Err(Error::Protocol(format!("an answer above {MAX_BODY} bytes")));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// A parsed exact route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub realm: String,
    pub area: String,
    pub resource: String,
}

impl Route {
    /// Splits `lease://realm/area/resource`. Only the shape needed to build a
    /// path is checked; the broker checks the rest (a wildcard segment is its
    /// `invalid_route`).
    pub fn parse(s: &str) -> Result<Route> {
        let bad = || {
            Error::InvalidRoute(crate::Problem::local(
                "a route is lease://{realm}/{area}/{resource}",
            ))
        };
        let rest = s.strip_prefix("lease://").ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        Ok(Route {
            realm: parts[0].into(),
            area: parts[1].into(),
            resource: parts[2].into(),
        })
    }

    /// The URL of this route's lease, with an optional final segment.
    pub fn url(&self, c: &Client, verb: Option<&str>) -> Url {
        let mut segs = vec!["v1", "leases", &self.realm, &self.area, &self.resource];
        if let Some(v) = verb {
            segs.push(v);
        }
        c.url(&segs)
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "lease://{}/{}/{}", self.realm, self.area, self.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_or_are_invalid_route() {
        let r = Route::parse("lease://acme/renderers/doc-1").unwrap();
        assert_eq!(r.to_string(), "lease://acme/renderers/doc-1");
        for bad in [
            "acme/renderers/doc-1",
            "lease://acme/renderers",
            "lease://a//c",
            "lease://a/b/c/d",
        ] {
            assert!(
                matches!(Route::parse(bad), Err(Error::InvalidRoute(_))),
                "{bad}"
            );
        }
    }

    /// A transport error never shows the URL, whose path may hold a
    /// session id (a secret).
    #[tokio::test]
    async fn transport_errors_hide_the_url() {
        let ln = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = ln.local_addr().unwrap();
        drop(ln); // nothing listens there now
        let c = Client::new(&format!("http://{addr}")).unwrap();
        let secret = "0123456789abcdef0123456789abcdef";
        let url = c.url(&["v1", "sessions", secret, "keepalive"]);
        let e = c.send(c.request(Method::POST, url), 200).await.unwrap_err();
        assert!(matches!(e, Error::Transport(_)), "{e:?}");
        assert!(e.is_retryable());
        assert!(!format!("{e} {e:?}").contains(secret), "{e:?}");
    }

    #[test]
    fn base_urls_are_checked_and_segments_escaped() {
        for bad in ["", "ftp://x", "127.0.0.1:7420", "http://"] {
            assert!(
                matches!(Client::new(bad), Err(Error::InvalidRequest(_))),
                "{bad}"
            );
        }
        let c = Client::new("http://127.0.0.1:7420/").unwrap();
        assert_eq!(
            c.url(&["v1", "fleets", "a/b", "specs"]).as_str(),
            "http://127.0.0.1:7420/v1/fleets/a%2Fb/specs"
        );
    }
}
