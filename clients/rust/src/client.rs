//! The [`Client`]: the base URLs of one broker or several, an optional
//! bearer token and an HTTP client, the rule that picks the broker of every
//! request, plus the one place that turns answers into values or errors.

use crate::error::{problem_error, Error, Result};
use crate::loss::{Losable, Sessions};
use crate::transport::{answered_by, misdirected_to, rebase, Answer};
use reqwest::{Method, RequestBuilder, Url};
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex};

mod builder;
mod route;
pub use builder::ClientBuilder;
pub(crate) use route::Route;

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
    /// The live sessions, for prompt loss (loss.rs).
    pub(crate) sessions: Sessions,
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

impl Client {
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
                self.inner
                    .sessions
                    .broker_gone(&answered_by(resp.url()), Some(e), None);
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
    /// success first records its broker as the session's
    /// (`Sessions::held_by`, loss.rs), then prompt loss judges it.
    pub(crate) async fn execute_as(
        &self,
        rb: RequestBuilder,
        session: Option<&dyn Losable>,
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
                let epoch = resp
                    .headers()
                    .get("Muster-Epoch")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                self.inner
                    .sessions
                    .held_by(s, &answered_by(resp.url()), epoch);
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
                self.inner.sessions.broker_gone(&a.host, None, Some(&p));
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
    async fn send_from_as(
        &self,
        rb: RequestBuilder,
        want: u16,
        session: Option<&dyn Losable>,
    ) -> Result<(bytes::Bytes, String)> {
        let a = self.execute_as(rb, session).await?;
        let (host, status, ct) = (a.host.clone(), a.status, a.content_type.clone());
        let body = a.body().await?;
        if status != want {
            return Err(self.problem(&host, status, &ct, &body));
        }
        Ok((body, host))
    }

    /// [`Client::send`] for one of `s`'s own requests: a success records
    /// its broker as the session's before prompt loss judges the answer.
    pub(crate) async fn send_as(
        &self,
        rb: RequestBuilder,
        want: u16,
        s: &dyn Losable,
    ) -> Result<bytes::Bytes> {
        Ok(self.send_from_as(rb, want, Some(s)).await?.0)
    }

    /// [`Client::call`] for one of `s`'s own requests ([`Client::send_as`]).
    pub(crate) async fn call_as<T: DeserializeOwned>(
        &self,
        rb: RequestBuilder,
        want: u16,
        s: &dyn Losable,
    ) -> Result<T> {
        let body = self.send_as(rb, want, s).await?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("decoding a {want} answer: {e}")))
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

    /// The error of a problem answer from `host`; a `family_unavailable`
    /// ends the sessions that broker holds (prompt loss: loss.rs).
    pub(crate) fn problem(
        &self,
        host: &str,
        status: u16,
        content_type: &str,
        body: &[u8],
    ) -> Error {
        let e = problem_error(status, content_type, body);
        if let Error::FamilyUnavailable(p) = &e {
            self.inner.sessions.broker_gone(host, None, Some(p));
        }
        e
    }
}

#[cfg(test)]
pub(crate) mod tests;
