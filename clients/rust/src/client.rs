//! The [`Client`]: the base URLs of one broker or several, an optional
//! bearer token and an HTTP client, the rule that picks the broker of every
//! request, plus the one place that turns answers into values or errors.

use crate::error::{media_type, problem_error, Error, Problem, Result};
use crate::loss::answered_by;
use crate::session::SessionInner;
use reqwest::{Method, RequestBuilder, Url};
use serde::de::DeserializeOwned;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};

/// Bounds the bytes read from one non-streaming answer.
const MAX_BODY: usize = 32 << 20;

/// Bounds the brokers one request is sent to after the first (following
/// `wrong_broker`; Go: `maxFollows`).
pub const MAX_FOLLOWS: usize = 2;

/// A client of one broker, or of a deployment of several. Cheap to clone
/// (clones share everything); safe to use from many tasks. It holds no
/// state besides its configuration, the last epoch it saw, the broker it
/// sends to and its live sessions (each is lost the moment an answer shows
/// that it ended: see [`Session`](crate::Session)).
///
/// Its base URL may be a list of several brokers' base URLs, in order of
/// preference ([`Client::builder`] with commas, or
/// [`Client::builder_list`]). Every request, watch stream and observer
/// picks its broker by the rule of docs/client-operations.md, "Several
/// brokers": it goes to the owner a `421 wrong_broker` named (at most
/// [`MAX_FOLLOWS`] hops per request), else to the current base URL; a
/// connection error or `family_unavailable` from that broker moves the
/// client on (the owner is forgotten, or the next base URL becomes the
/// current one), and a request the broker certainly did not act on (the
/// connection could not be made, 421, `family_unavailable`) is sent again at
/// once to the new target, reaching every base URL at most once plus its
/// hops. [`ClientBuilder::without_follow`] turns off following 421s only.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// The base URLs, in order of preference (at least one).
    bases: Vec<Url>,
    token: Option<String>,
    http: reqwest::Client,
    epoch: Mutex<String>,
    follow: bool,
    /// Where requests go: the owner a 421 named, else the current base URL.
    to: Mutex<Towards>,
    /// Conformance tests only: never forget an owner that stopped answering.
    sticky_owner: bool,
    /// Conformance tests only: a `family_unavailable` answer moves the
    /// client nowhere (it still ends that broker's sessions).
    stay_on_unavailable: bool,
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

/// The client's target: the owner a 421 named (`None` for none), set for
/// the `owner_set`-th time, else the current base URL `cur`.
#[derive(Debug, Default)]
struct Towards {
    owner: Option<Url>,
    owner_set: u64,
    cur: usize,
}

/// The target one request was sent to, to move on from it only when the
/// client still targets it (concurrent failures move the client once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The owner set for the n-th time.
    Owner(u64),
    /// The base URL of this index.
    Base(usize),
}

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
    /// `send_plus_ttl`, `late_loss`), for the conformance tests only (the
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
    /// it unset, or longer than the longest wait.
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
        let http = match self.http {
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
                late_loss: self.late_loss,
                sessions: Mutex::new(Vec::new()),
            }),
        })
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

    /// The broker lifetime (the `Muster-Epoch` header) of the last answer,
    /// `""` before the first one.
    pub fn epoch(&self) -> String {
        self.inner.epoch.lock().unwrap().clone()
    }

    /// The URL of `segments` below the first base URL, each
    /// percent-encoded as one path segment (a `/` inside one becomes `%2F`).
    /// [`Client::execute`] sends it to the broker the rule picks.
    pub(crate) fn url(&self, segments: &[&str]) -> Url {
        let mut u = self.inner.bases[0].clone();
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

    /// Where the next request goes, and the URL of that broker.
    fn target(&self) -> (Target, Url) {
        let to = self.inner.to.lock().unwrap();
        match &to.owner {
            Some(o) => (Target::Owner(to.owner_set), o.clone()),
            None => (Target::Base(to.cur), self.inner.bases[to.cur].clone()),
        }
    }

    /// Leaves `t`, which failed: the owner is forgotten, or the current base
    /// URL becomes the next one; nothing when the client no longer targets
    /// `t` (another request moved on already, or an owner was named since).
    fn move_on(&self, t: Target) {
        let mut to = self.inner.to.lock().unwrap();
        match t {
            Target::Owner(n)
                if to.owner.is_some() && to.owner_set == n && !self.inner.sticky_owner =>
            {
                to.owner = None;
            }
            Target::Base(i) if to.owner.is_none() && to.cur == i => {
                to.cur = (i + 1) % self.inner.bases.len();
            }
            _ => {}
        }
    }

    /// Sends one request and returns the answer, to the broker the rule of
    /// several brokers picks (docs/client-operations.md, "Several brokers";
    /// Go: `follower.RoundTrip`): the owner a 421 named, else the current
    /// base URL. A `wrong_broker` answer is followed (unless built
    /// `without_follow`, at most [`MAX_FOLLOWS`] times); a connection error
    /// or `family_unavailable` moves the client on, and the request is sent
    /// again at once when the broker certainly did not act on it (the
    /// connection could not be made, 421, `family_unavailable`), each request
    /// failing at most (base URLs + [`MAX_FOLLOWS`]) times. Every answer's
    /// epoch is recorded, and every `family_unavailable` heard ends the
    /// sessions of the broker that answered it, also one sent on elsewhere
    /// (prompt loss: loss.rs). The caller's own cancellation drops the
    /// future: it moves nothing.
    pub(crate) async fn execute(&self, rb: RequestBuilder) -> Result<Answer> {
        let req = rb.build()?;
        let n = self.inner.bases.len();
        let (mut follows, mut fails) = (0, 0);
        loop {
            let (t, to) = self.target();
            let mut out = req.try_clone().ok_or_else(|| {
                Error::Protocol("cannot resend a streaming request to another broker".into())
            })?;
            rebase(out.url_mut(), &to);
            let resp = match self.inner.http.execute(out).await {
                Ok(r) => r,
                Err(e) => {
                    self.move_on(t);
                    fails += 1;
                    if e.is_connect() && fails < n + MAX_FOLLOWS {
                        continue; // nothing reached the broker
                    }
                    return Err(e.into());
                }
            };
            self.saw_epoch(&resp);
            let status = resp.status().as_u16();
            if status != 503 && status != 421 {
                return Ok(Answer::unread(resp));
            }
            let a = Answer::read(resp).await?;
            if status == 503 {
                let Some(p) = a.problem_of("family_unavailable") else {
                    return Ok(a);
                };
                self.broker_gone(&a.host, None, Some(&p));
                if self.inner.stay_on_unavailable {
                    return Ok(a);
                }
                self.move_on(t);
                fails += 1;
                // One base URL that answered itself: asking it again at once
                // would hear the same.
                if fails < n + MAX_FOLLOWS && (n > 1 || t != Target::Base(0)) {
                    continue;
                }
                return Ok(a);
            }
            if !self.inner.follow || follows >= MAX_FOLLOWS {
                return Ok(a);
            }
            let Some(owner) = misdirected_to(&a.content_type, a.read_body()) else {
                return Ok(a);
            };
            {
                let mut to = self.inner.to.lock().unwrap();
                to.owner = Some(owner);
                to.owner_set += 1;
            }
            follows += 1;
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
        let a = self.execute(rb).await?;
        let (host, status, ct) = (a.host.clone(), a.status, a.content_type.clone());
        let body = a.body().await?;
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

/// A byte stream of an answer's body.
pub(crate) type BodyStream =
    Pin<Box<dyn futures_core::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An answer of [`Client::execute`]: the broker that answered it
/// (`host:port`), its status and content type, and its body, unread or
/// read already (a 421 or 503, read to decide where the request goes).
pub(crate) struct Answer {
    pub(crate) host: String,
    pub(crate) status: u16,
    pub(crate) content_type: String,
    body: AnswerBody,
}

enum AnswerBody {
    Unread(reqwest::Response),
    Read(bytes::Bytes),
}

impl Answer {
    fn unread(resp: reqwest::Response) -> Answer {
        Answer {
            host: answered_by(resp.url()),
            status: resp.status().as_u16(),
            content_type: content_type(&resp),
            body: AnswerBody::Unread(resp),
        }
    }

    async fn read(resp: reqwest::Response) -> Result<Answer> {
        let mut a = Answer::unread(resp);
        if let AnswerBody::Unread(resp) = a.body {
            a.body = AnswerBody::Read(read_body(resp).await?);
        }
        Ok(a)
    }

    /// The body read already (empty when unread).
    fn read_body(&self) -> &[u8] {
        match &self.body {
            AnswerBody::Read(b) => b,
            AnswerBody::Unread(_) => &[],
        }
    }

    /// The problem of a problem answer (read already) of `code`.
    fn problem_of(&self, code: &str) -> Option<Problem> {
        if media_type(&self.content_type) != "application/problem+json" {
            return None;
        }
        let e = problem_error(self.status, &self.content_type, self.read_body());
        match (e.code(), e.problem()) {
            (Some(c), Some(p)) if c == code => Some(p.clone()),
            _ => None,
        }
    }

    /// The whole body, at most [`MAX_BODY`] bytes.
    pub(crate) async fn body(self) -> Result<bytes::Bytes> {
        match self.body {
            AnswerBody::Unread(resp) => read_body(resp).await,
            AnswerBody::Read(b) => Ok(b),
        }
    }

    /// The body as a stream of chunks (a watch stream's events).
    pub(crate) fn stream(self) -> BodyStream {
        match self.body {
            AnswerBody::Unread(resp) => Box::pin(resp.bytes_stream()),
            AnswerBody::Read(b) => Box::pin(futures_util::stream::once(async move { Ok(b) })),
        }
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
        for bad in [
            "",
            "ftp://x",
            "127.0.0.1:7420",
            "http://",
            "http://a:1,",
            "http://a:1,,http://b:2",
            "http://a:1,b:2",
        ] {
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
        // a → b → (b names a dead address): the third request cannot
        // connect, so the dead owner is forgotten and the request sent again
        // at once to a, whose 421 ends it (the hops are used up).
        let c = Client::new(&a).unwrap();
        let e = c
            .send(c.request(Method::GET, c.url(&["v1"])), 200)
            .await
            .unwrap_err();
        assert!(matches!(&e, Error::WrongBroker(p) if p.owner == b), "{e:?}");
        assert_eq!(
            (at_a.lock().unwrap().len(), at_b.lock().unwrap().len()),
            (2, 1)
        );
        // The dead owner is forgotten: the next request starts at a again.
        let _ = c.send(c.request(Method::GET, c.url(&["v1"])), 200).await;
        assert_eq!(at_a.lock().unwrap().len(), 4);

        let c = Client::builder(&a).without_follow().build().unwrap();
        let e = c
            .send(c.request(Method::GET, c.url(&["v1"])), 200)
            .await
            .unwrap_err();
        assert!(matches!(&e, Error::WrongBroker(p) if p.owner == b), "{e:?}");
        assert_eq!(at_a.lock().unwrap().len(), 5);

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

    /// A dead address: nothing listens there (connections are refused).
    fn dead() -> String {
        let ln = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = ln.local_addr().unwrap();
        drop(ln);
        format!("http://{addr}")
    }

    fn ok(_: &str) -> (u16, &'static str, String) {
        (200, "application/json", "{}".into())
    }

    fn unavailable(_: &str) -> (u16, &'static str, String) {
        (
            503,
            "application/problem+json",
            r#"{"type":"about:blank","title":"Service Unavailable","status":503,"code":"family_unavailable"}"#.into(),
        )
    }

    fn hosts(c: &Client) -> Vec<String> {
        c.inner.bases.iter().map(|u| u.to_string()).collect()
    }

    /// Several base URLs: one string with commas (spaces and a final `/`
    /// allowed), or a list; order is kept; a bad one is named.
    #[test]
    fn several_base_urls_parse_in_order() {
        let c = Client::new(" http://b1:7420/ ,http://b2:7421,https://b3").unwrap();
        let want = ["http://b1:7420/", "http://b2:7421/", "https://b3/"];
        assert_eq!(hosts(&c), want);
        let c = Client::builder_list(["http://b1:7420", "http://b2:7421/", "https://b3"])
            .build()
            .unwrap();
        assert_eq!(hosts(&c), want);
        assert_eq!(
            c.url(&["v1", "leases"]).as_str(),
            "http://b1:7420/v1/leases"
        );
        let e = Client::builder_list(["http://b1:7420", "b2:7421"])
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidRequest(p) if p.detail.contains("\"b2:7421\"")),
            "{e:?}"
        );
        let none: [&str; 0] = [];
        assert!(matches!(
            Client::builder_list(none).build(),
            Err(Error::InvalidRequest(_))
        ));
        let single = crate::faults::Faults {
            single_broker: true,
            ..crate::faults::Faults::default()
        };
        let c = Client::builder("http://b1:7420,http://b2:7421")
            .faults(single)
            .build()
            .unwrap();
        assert_eq!(hosts(&c), ["http://b1:7420/"]);
    }

    /// A refused first base URL: the request (with its body) is sent at once
    /// to the next one, which stays the current one.
    #[tokio::test]
    async fn a_refused_first_base_url_reaches_the_next() {
        let (b, at_b) = fake(ok).await;
        let c = Client::builder(&format!("{},{b}", dead()))
            .token("t")
            .build()
            .unwrap();
        let url = c.url(&["v1", "sessions"]);
        c.send(c.request(Method::POST, url.clone()).body("{}"), 200)
            .await
            .unwrap();
        assert_eq!(
            *at_b.lock().unwrap(),
            ["POST /v1/sessions HTTP/1.1 auth=true {}"]
        );
        assert_eq!(c.target().0, Target::Base(1));
        c.send(c.request(Method::GET, url), 200).await.unwrap();
        assert_eq!(at_b.lock().unwrap().len(), 2);
    }

    /// family_unavailable from the current base URL moves the client on
    /// and the request is sent again at once; the broker that answered it
    /// is not asked again by the next request.
    #[tokio::test]
    async fn family_unavailable_moves_on_and_resends() {
        let (a, at_a) = fake(unavailable).await;
        let (b, at_b) = fake(ok).await;
        let c = Client::builder_list([&a, &b]).build().unwrap();
        for _ in 0..2 {
            c.send(c.request(Method::POST, c.url(&["v1", "x"])).body("{}"), 200)
                .await
                .unwrap();
        }
        assert_eq!(
            (at_a.lock().unwrap().len(), at_b.lock().unwrap().len()),
            (1, 2)
        );

        // Every broker unavailable: each request fails at most
        // (base URLs + MAX_FOLLOWS) times, then the answer is the error.
        let (b2, at_b2) = fake(unavailable).await;
        let c = Client::builder_list([&a, &b2]).build().unwrap();
        let e = c
            .send(c.request(Method::GET, c.url(&["v1"])), 200)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::FamilyUnavailable(_)), "{e:?}");
        assert_eq!(
            (at_a.lock().unwrap().len(), at_b2.lock().unwrap().len()),
            (3, 2)
        );

        // One base URL that answers family_unavailable itself: not asked
        // again at once.
        let c = Client::new(&a).unwrap();
        let e = c
            .send(c.request(Method::GET, c.url(&["v1"])), 200)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::FamilyUnavailable(_)), "{e:?}");
        assert_eq!(at_a.lock().unwrap().len(), 4);

        // The conformance tests' broken client (stay_on_unavailable): it
        // keeps sending there.
        let stay = crate::faults::Faults {
            stay_on_unavailable: true,
            ..crate::faults::Faults::default()
        };
        let c = Client::builder_list([&a, &b]).faults(stay).build().unwrap();
        for _ in 0..2 {
            let e = c.send(c.request(Method::GET, c.url(&["v1"])), 200).await;
            assert!(matches!(e, Err(Error::FamilyUnavailable(_))), "{e:?}");
        }
        assert_eq!(at_a.lock().unwrap().len(), 6);
    }

    /// With one base URL, an owner that answers family_unavailable is
    /// forgotten and the base URL asked again, at once.
    #[tokio::test]
    async fn an_unavailable_owner_is_forgotten() {
        let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let g = gone.clone();
        let (b, at_b) = fake(move |l| {
            if g.load(std::sync::atomic::Ordering::SeqCst) {
                unavailable(l)
            } else {
                ok(l)
            }
        })
        .await;
        let o = b.clone();
        let (a, at_a) = fake(move |l| {
            if l.starts_with("GET /v1/x ") {
                misdirect(&o)
            } else {
                ok(l)
            }
        })
        .await;
        let c = Client::new(&a).unwrap();
        c.send(c.request(Method::GET, c.url(&["v1", "x"])), 200)
            .await
            .unwrap();
        gone.store(true, std::sync::atomic::Ordering::SeqCst);
        c.send(c.request(Method::GET, c.url(&["v1", "y"])), 200)
            .await
            .unwrap();
        assert_eq!(
            (at_a.lock().unwrap().len(), at_b.lock().unwrap().len()),
            (2, 2)
        );
        assert_eq!(c.target().0, Target::Base(0));
    }

    /// Concurrent requests failing at the same broker move the client once:
    /// every one of them ends at the second base URL, none at the third.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_failures_move_once() {
        let (b, at_b) = fake(ok).await;
        let (x, at_x) = fake(ok).await;
        let c = Client::builder_list([dead(), b, x]).build().unwrap();
        let reqs = (0..16).map(|_| {
            let c = c.clone();
            async move { c.send(c.request(Method::GET, c.url(&["v1"])), 200).await }
        });
        for r in futures_util::future::join_all(reqs).await {
            r.unwrap();
        }
        assert_eq!(
            (at_b.lock().unwrap().len(), at_x.lock().unwrap().len()),
            (16, 0)
        );
        assert_eq!(c.target().0, Target::Base(1));

        // The same, step by step: a stale failure moves nothing.
        let (t0, _) = c.target();
        c.move_on(t0);
        c.move_on(t0);
        assert_eq!(c.target().0, Target::Base(2));
        *c.inner.to.lock().unwrap() = Towards {
            owner: Some(Url::parse("http://o:1").unwrap()),
            owner_set: 7,
            cur: 2,
        };
        c.move_on(Target::Owner(6)); // an owner named before
        c.move_on(Target::Base(2)); // the owner is the target now
        assert_eq!(c.target().0, Target::Owner(7));
        c.move_on(Target::Owner(7));
        assert_eq!(c.target().0, Target::Base(2));
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
