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
    /// Conformance tests only: a session's broker stays its creator (loss.rs).
    pub(crate) creator_loss: bool,
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
    creator_loss: bool,
    /// The `rustls` feature's CA file and client certificate (tls.rs).
    #[cfg(feature = "rustls")]
    pub(crate) tls: crate::tls::Tls,
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
                late_loss: self.late_loss,
                creator_loss: self.creator_loss,
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
        self.execute_as(rb, None).await
    }

    /// [`Client::execute`] for one of `session`'s own requests: an answer of
    /// success first records its broker as the session's (loss.rs,
    /// `SessionInner::answered_by`), then prompt loss judges it.
    pub(crate) async fn execute_as(
        &self,
        rb: RequestBuilder,
        session: Option<&SessionInner>,
    ) -> Result<Answer> {
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
            if let Some(s) = session.filter(|_| resp.status().is_success()) {
                s.answered_by(&resp);
            }
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
        self.send_from_as(rb, want, None).await
    }

    /// [`Client::send_from`] for one of `session`'s own requests
    /// ([`Client::execute_as`]).
    pub(crate) async fn send_from_as(
        &self,
        rb: RequestBuilder,
        want: u16,
        session: Option<&SessionInner>,
    ) -> Result<(bytes::Bytes, String)> {
        let a = self.execute_as(rb, session).await?;
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

mod route;
pub(crate) use route::Route;

#[cfg(test)]
pub(crate) mod tests;
