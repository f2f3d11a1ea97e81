//! The [`Client`]: one broker's base URL, an optional bearer token and an
//! HTTP client, plus the one place that turns answers into values or errors.

use crate::error::{media_type, problem_error, Error, Result};
use crate::loss::answered_by;
use crate::session::SessionInner;
use reqwest::{Method, RequestBuilder, Url};
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex, Weak};

/// Bounds the bytes read from one non-streaming answer.
const MAX_BODY: usize = 32 << 20;

/// Bounds the brokers one request is sent to after the first (following
/// `wrong_broker`; Go: `maxFollows`).
pub const MAX_FOLLOWS: usize = 2;

/// A client of one broker. Cheap to clone (clones share everything); safe to
/// use from many tasks. It holds no state besides its configuration, the
/// last epoch it saw, the broker it was last sent to and its live sessions
/// (each is lost the moment an answer shows that it ended: see
/// [`Session`](crate::Session)).
///
/// In a multi-broker deployment (docs/placement.md) a broker answers a
/// request for a family it does not serve with `421 wrong_broker` naming
/// the owner: the client sends the request there (at most [`MAX_FOLLOWS`]
/// hops), sends every later request straight to the owner, and goes back to
/// its base URL when the owner stops answering. A 421 means the broker did
/// nothing, so resending is safe for every operation.
/// [`ClientBuilder::without_follow`] turns this off.
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
    follow: bool,
    /// Where requests go: the owner a 421 named; `None` for the base URL.
    owner: Mutex<Option<Url>>,
    /// Conformance tests only: never forget an owner that stopped answering.
    sticky_owner: bool,
    /// Conformance tests only: a lease's loss is never reported.
    pub(crate) never_lost: bool,
    /// Conformance tests only: a grant's local deadline is send + TTL.
    pub(crate) send_plus_ttl: bool,
    /// Conformance tests only: sessions are lost at their keepalive only,
    /// never promptly (loss.rs).
    pub(crate) late_loss: bool,
    /// The live sessions, for prompt loss (loss.rs).
    pub(crate) sessions: Mutex<Vec<Weak<SessionInner>>>,
}

/// Configures a [`Client`]; see [`Client::builder`].
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    http: Option<reqwest::Client>,
    without_follow: bool,
    sticky_owner: bool,
    never_lost: bool,
    send_plus_ttl: bool,
    late_loss: bool,
}

impl ClientBuilder {
    /// Turns off following `wrong_broker` answers (Go: `WithoutFollow`): a
    /// request for a family that another broker serves then fails with
    /// [`Error::WrongBroker`], whose problem's `owner` names that broker.
    pub fn without_follow(mut self) -> Self {
        self.without_follow = true;
        self
    }

    /// Builds a deliberately broken client (`no_follow`, `sticky_owner`,
    /// `never_lost`, `send_plus_ttl`, `late_loss`), for the conformance tests
    /// only.
    #[doc(hidden)]
    pub fn faults(mut self, f: crate::Faults) -> Self {
        self.without_follow |= f.no_follow;
        self.sticky_owner = f.sticky_owner;
        self.never_lost = f.never_lost;
        self.send_plus_ttl = f.send_plus_ttl;
        self.late_loss = f.late_loss;
        self
    }

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
                follow: !self.without_follow,
                owner: Mutex::new(None),
                sticky_owner: self.sticky_owner,
                never_lost: self.never_lost,
                send_plus_ttl: self.send_plus_ttl,
                late_loss: self.late_loss,
                sessions: Mutex::new(Vec::new()),
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
            without_follow: false,
            sticky_owner: false,
            never_lost: false,
            send_plus_ttl: false,
            late_loss: false,
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

    /// Records the answer's epoch; a new one from the broker that holds a
    /// session ends that session (prompt loss: loss.rs).
    pub(crate) fn saw_epoch(&self, resp: &reqwest::Response) {
        if let Some(e) = resp
            .headers()
            .get("Muster-Epoch")
            .and_then(|v| v.to_str().ok())
        {
            if !e.is_empty() {
                *self.inner.epoch.lock().unwrap() = e.to_string();
                self.broker_gone(&answered_by(resp.url()), Some(e), None);
            }
        }
    }

    /// Sends one request and returns the answer, following `wrong_broker`
    /// (unless built `without_follow`). The answer's epoch is recorded; the
    /// answer's URL names the broker that answered.
    pub(crate) async fn execute(&self, rb: RequestBuilder) -> Result<reqwest::Response> {
        let req = rb.build()?;
        if !self.inner.follow {
            let resp = self.inner.http.execute(req).await?;
            self.saw_epoch(&resp);
            return Ok(resp);
        }
        let mut hop = 0;
        loop {
            let owner = self.inner.owner.lock().unwrap().clone();
            let mut out = req.try_clone().ok_or_else(|| {
                Error::Protocol("cannot resend a streaming request to the family's broker".into())
            })?;
            if let Some(o) = &owner {
                rebase(out.url_mut(), o);
            }
            let resp = match self.inner.http.execute(out).await {
                Ok(r) => r,
                Err(e) => {
                    // The owner we were sent to is gone (a failover): the
                    // next request asks the configured broker again.
                    let mut g = self.inner.owner.lock().unwrap();
                    if owner.is_some() && *g == owner && !self.inner.sticky_owner {
                        *g = None;
                    }
                    return Err(e.into());
                }
            };
            self.saw_epoch(&resp);
            if resp.status().as_u16() != 421 || hop >= MAX_FOLLOWS {
                return Ok(resp);
            }
            let ct = content_type(&resp);
            let body = read_body(resp).await?;
            match misdirected_to(&ct, &body) {
                Some(to) => *self.inner.owner.lock().unwrap() = Some(to),
                None => return Err(problem_error(421, &ct, &body)),
            }
            hop += 1;
        }
    }

    /// Sends one request/response operation; a status other than `want`
    /// becomes an [`Error`] from its problem body. Returns the body.
    pub(crate) async fn send(&self, rb: RequestBuilder, want: u16) -> Result<bytes::Bytes> {
        Ok(self.send_from(rb, want).await?.0)
    }

    /// [`Client::send`], also returning the broker that answered
    /// (`host:port`).
    pub(crate) async fn send_from(
        &self,
        rb: RequestBuilder,
        want: u16,
    ) -> Result<(bytes::Bytes, String)> {
        let resp = self.execute(rb).await?;
        let host = answered_by(resp.url());
        let status = resp.status().as_u16();
        let ct = content_type(&resp);
        let body = read_body(resp).await?;
        if status != want {
            return Err(self.problem(&host, status, &ct, &body));
        }
        Ok((body, host))
    }

    /// [`Client::send`] and decode the JSON answer.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        rb: RequestBuilder,
        want: u16,
    ) -> Result<T> {
        Ok(self.call_from(rb, want).await?.0)
    }

    /// [`Client::call`], also returning the broker that answered.
    pub(crate) async fn call_from<T: DeserializeOwned>(
        &self,
        rb: RequestBuilder,
        want: u16,
    ) -> Result<(T, String)> {
        let (body, host) = self.send_from(rb, want).await?;
        let out = serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("decoding a {want} answer: {e}")))?;
        Ok((out, host))
    }
}

/// Gives `u` the scheme, host and port of `owner`.
fn rebase(u: &mut Url, owner: &Url) {
    let _ = u.set_scheme(owner.scheme());
    let _ = u.set_host(owner.host_str());
    let _ = u.set_port(owner.port());
}

/// The owner a 421 answer names, when it is a `wrong_broker` problem with an
/// http(s) URL with a host; `None` otherwise.
pub(crate) fn misdirected_to(content_type: &str, body: &[u8]) -> Option<Url> {
    if media_type(content_type) != "application/problem+json" {
        return None;
    }
    let Error::WrongBroker(p) = problem_error(421, content_type, body) else {
        return None;
    };
    let u = Url::parse(&p.owner).ok()?;
    (matches!(u.scheme(), "http" | "https") && !u.host_str().unwrap_or("").is_empty()).then_some(u)
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
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

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

    /// A fake broker: every request (method, path and body) is recorded and
    /// answered by `answer` (status line, content type, body), one request
    /// per connection.
    async fn fake(
        answer: impl Fn(&str) -> (u16, &'static str, String) + Send + Sync + 'static,
    ) -> (String, Arc<Mutex<Vec<String>>>) {
        fake_after(move |line| (Duration::ZERO, answer(line))).await
    }

    /// [`fake`] whose `answer` also says how long to wait before answering
    /// (a broker that kept the request in a queue).
    pub(crate) async fn fake_after(
        answer: impl Fn(&str) -> (Duration, (u16, &'static str, String)) + Send + Sync + 'static,
    ) -> (String, Arc<Mutex<Vec<String>>>) {
        fake_with(move |line| {
            let (delay, a) = answer(line);
            (delay, String::new(), a)
        })
        .await
    }

    /// [`fake_after`] whose `answer` also gives extra header lines of the
    /// answer (each ending with `\r\n`), e.g. `Muster-Epoch: e1\r\n`.
    pub(crate) async fn fake_with(
        answer: impl Fn(&str) -> (Duration, String, (u16, &'static str, String)) + Send + Sync + 'static,
    ) -> (String, Arc<Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let ln = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", ln.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (seen2, answer) = (seen.clone(), Arc::new(answer));
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = ln.accept().await {
                let (seen, answer) = (seen2.clone(), answer.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let req = loop {
                        let n = conn.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buf).to_string();
                        if let Some((head, body)) = text.split_once("\r\n\r\n") {
                            let len = head
                                .lines()
                                .find_map(|l| {
                                    l.to_ascii_lowercase()
                                        .strip_prefix("content-length: ")
                                        .map(|v| v.trim().parse::<usize>().unwrap())
                                })
                                .unwrap_or(0);
                            if body.len() >= len {
                                break text;
                            }
                        }
                    };
                    let (head, body) = req.split_once("\r\n\r\n").unwrap();
                    let line = head.lines().next().unwrap().to_string();
                    let auth = head
                        .lines()
                        .any(|l| l.eq_ignore_ascii_case("authorization: Bearer t"));
                    seen.lock()
                        .unwrap()
                        .push(format!("{line} auth={auth} {body}"));
                    let (delay, headers, (status, ct, out)) = answer(&line);
                    tokio::time::sleep(delay).await;
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: {ct}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{out}",
                        out.len()
                    );
                    let _ = conn.write_all(resp.as_bytes()).await;
                });
            }
        });
        (url, seen)
    }

    pub(crate) fn misdirect(owner: &str) -> (u16, &'static str, String) {
        (
            421,
            "application/problem+json",
            format!(
                r#"{{"type":"about:blank","title":"Misdirected Request","status":421,"code":"wrong_broker","owner":"{owner}"}}"#
            ),
        )
    }

    #[tokio::test]
    async fn follows_wrong_broker_with_the_body_and_stays_with_the_owner() {
        let (owner, at_owner) = fake(|_| {
            (
                200,
                "application/json",
                r#"{"items":[],"snapshot":{"epoch":"e","revision":1}}"#.into(),
            )
        })
        .await;
        let o = owner.clone();
        let (first, at_first) = fake(move |_| misdirect(&o)).await;
        let c = Client::builder(&first).token("t").build().unwrap();
        let url = c.url(&["v1", "sessions"]);
        let body = c
            .send(
                c.request(Method::POST, url.clone())
                    .body("{\"owner_id\":\"w\"}"),
                200,
            )
            .await
            .unwrap();
        assert!(!body.is_empty());
        let seen = at_owner.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec!["POST /v1/sessions HTTP/1.1 auth=true {\"owner_id\":\"w\"}".to_string()]
        );
        c.send(c.request(Method::GET, url), 200).await.unwrap();
        assert_eq!(
            at_first.lock().unwrap().len(),
            1,
            "the second request went straight to the owner"
        );
        assert_eq!(at_owner.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_loop_ends_after_max_follows_and_without_follow_does_not_follow() {
        let (b, at_b) = fake(|_| misdirect("http://127.0.0.1:9")).await;
        let b2 = b.clone();
        let (a, at_a) = fake(move |_| misdirect(&b2)).await;
        // a → b → (b names a dead address): the third request fails to connect.
        let c = Client::new(&a).unwrap();
        let e = c
            .send(c.request(Method::GET, c.url(&["v1"])), 200)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Transport(_)), "{e:?}");
        assert_eq!(
            (at_a.lock().unwrap().len(), at_b.lock().unwrap().len()),
            (1, 1)
        );
        // The dead owner is forgotten: the next request starts at a again.
        let _ = c.send(c.request(Method::GET, c.url(&["v1"])), 200).await;
        assert_eq!(at_a.lock().unwrap().len(), 2);

        let c = Client::builder(&a).without_follow().build().unwrap();
        let e = c
            .send(c.request(Method::GET, c.url(&["v1"])), 200)
            .await
            .unwrap_err();
        assert!(matches!(&e, Error::WrongBroker(p) if p.owner == b), "{e:?}");
        assert_eq!(at_a.lock().unwrap().len(), 3);

        let (x, _) = fake(|_| misdirect("http://127.0.0.1:1")).await;
        let x2 = x.clone();
        let (y, _) = fake(move |_| misdirect(&x2)).await;
        let y2 = y.clone();
        let (z, at_z) = fake(move |_| misdirect(&y2)).await;
        // z → y → x: MAX_FOLLOWS hops, then x's answer is the error.
        let c = Client::new(&z).unwrap();
        let e = c
            .send(c.request(Method::GET, c.url(&["v1"])), 200)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::WrongBroker(p) if p.owner == "http://127.0.0.1:1"),
            "{e:?}"
        );
        assert_eq!(at_z.lock().unwrap().len(), 1);
        assert_eq!(MAX_FOLLOWS, 2);
    }

    #[test]
    fn misdirected_to_follows_only_an_http_owner_of_wrong_broker() {
        let pj = "application/problem+json";
        for (body, ct, ok) in [
            (
                r#"{"code":"wrong_broker","owner":"http://10.0.0.2:7420"}"#,
                pj,
                true,
            ),
            (
                r#"{"code":"wrong_broker","owner":"javascript:alert(1)"}"#,
                pj,
                false,
            ),
            (r#"{"code":"wrong_broker"}"#, pj, false),
            (r#"{"code":"not_owner","owner":"http://x"}"#, pj, false),
            ("not json", "text/plain", false),
        ] {
            assert_eq!(misdirected_to(ct, body.as_bytes()).is_some(), ok, "{body}");
        }
    }
}
