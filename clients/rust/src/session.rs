//! [`Session`]: a worker's liveness on one broker, kept alive by a
//! background task until closed or lost.

use crate::backoff::Backoff;
use crate::client::Client;
use crate::error::{Error, Problem, Result};
use crate::loss::{Home, Losable};
use crate::signal::Signal;
use crate::watch::Subscription;
use crate::wire::{CreateSessionRequest, Keepalive, SessionInfo};
use reqwest::Method;
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A worker's liveness on one broker: it keeps itself alive in the background
/// (a keepalive every TTL/3) until [`Session::close`], or until it is lost.
/// Every lease is acquired through a session and is lost with it.
///
/// [`Session::ended`] fires when the session ends, and
/// [`Session::error`] says why: [`Error::Closed`] after `close`,
/// [`Error::SessionLost`] otherwise, with the cause inside. A lost session is
/// never revived: create a new one and acquire again.
///
/// **Prompt loss** (docs/client-operations.md): the session is lost, with
/// every lease it holds, the moment the client learns that it ended, while
/// the answer that reveals it is handled, not at the next keepalive. Its
/// broker is the host (`host:port`) that last answered one of its requests
/// with success, after following `wrong_broker`: the one that created it, or
/// the one a planned move took its family to. It is lost when
/// - any answer or watch stream of the same [`Client`] from that broker
///   carries another epoch (`Muster-Epoch`: the broker restarted): the cause
///   is [`Error::SessionNotFound`], its detail naming both epochs;
/// - that broker answers `family_unavailable`: the cause is
///   [`Error::FamilyUnavailable`];
/// - the broker answers `session_not_found` to one of the session's
///   requests (acquire, extend, release, batch, keepalive): the cause is
///   that [`Error::SessionNotFound`];
/// - no keepalive got through within the TTL.
///
/// Another broker's answers change nothing, and neither does a connection
/// error alone: the local deadline decides then. The keepalive task stops
/// when the session ends.
///
/// **Drop**: dropping a `Session` without `close` stops its keepalive task at
/// once and ends it locally (its leases report [`Error::LeaseLost`] with
/// [`Error::Closed`] inside), but sends no DELETE (a destructor cannot wait
/// for the network): the broker ends the session when its TTL passes, and
/// releases its leases then. Call `close().await` to end it at once.
#[derive(Debug)]
pub struct Session {
    pub(crate) inner: Arc<SessionInner>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
pub(crate) struct SessionInner {
    pub client: Client,
    pub id: String,
    owner_id: String,
    incarnation: String,
    /// The broker that holds the session and its epoch: the one that last
    /// answered one of its requests with success (prompt loss: loss.rs).
    home: Mutex<Home>,
    ttl: Duration,
    state: Mutex<State>,
    done: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    err: Option<Error>,
    /// The leases held, by route.
    leases: HashMap<String, Arc<dyn Held>>,
}

/// A lease as its session sees it (lease.rs implements it): ended with the
/// session, and found again by its route when the broker answers
/// `already_held`.
pub(crate) trait Held: Any + Send + Sync + std::fmt::Debug {
    /// Records why the lease is not held, once.
    fn end(&self, cause: Error);
}

impl Client {
    /// Creates a session for `owner_id` (the application's logical owner,
    /// shown in inventory items) with the given TTL (1 s .. 10 min), and
    /// starts its keepalive task (on the current tokio runtime).
    pub async fn new_session(&self, owner_id: &str, ttl: Duration) -> Result<Session> {
        let t0 = Instant::now();
        let body = CreateSessionRequest {
            owner_id: owner_id.to_string(),
            ttl_ms: ttl.as_millis() as i64,
        };
        let rb = self
            .request(Method::POST, self.url(&["v1", "sessions"]))
            .json(&body);
        let (out, host): (SessionInfo, String) = self.call_from(rb, 201).await?;
        let ttl = Duration::from_millis(out.ttl_ms.max(0) as u64);
        let inner = Arc::new(SessionInner {
            client: self.clone(),
            id: out.session_id,
            owner_id: out.owner_id,
            incarnation: out.holder_incarnation,
            home: Mutex::new(Home {
                host,
                epoch: out.epoch,
            }),
            ttl,
            state: Mutex::new(State::default()),
            done: CancellationToken::new(),
        });
        self.inner.sessions.track(&inner);
        let stop = CancellationToken::new();
        let task = tokio::spawn(keepalive(inner.clone(), stop.clone(), t0 + ttl));
        Ok(Session {
            inner,
            stop,
            task: Mutex::new(Some(task)),
        })
    }
}

impl Session {
    /// The session id. It is a secret: whoever has it can release this
    /// session's leases. Exposed for raw calls only.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The logical owner the session was created for.
    pub fn owner_id(&self) -> &str {
        &self.inner.owner_id
    }

    /// The public, opaque id of this session, as shown in inventory items.
    pub fn holder_incarnation(&self) -> &str {
        &self.inner.incarnation
    }

    /// The lifetime (`Muster-Epoch`) of the broker that holds the session:
    /// the one that created it, or the one a planned move took its family
    /// to.
    pub fn epoch(&self) -> String {
        self.inner.home.lock().unwrap().epoch.clone()
    }

    /// The session's TTL.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The client the session was created with.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Fires when the session has ended (`session.ended().await`, or in
    /// `tokio::select!`); [`Session::error`] then says why. A read-only
    /// [`Signal`]: waiting on it cannot end the session.
    pub fn ended(&self) -> Signal {
        Signal::new(&self.inner.done)
    }

    /// `None` while the session lives, then why it ended.
    pub fn error(&self) -> Option<Error> {
        self.inner.error()
    }

    /// Ends the session at the broker (its leases are released there, each
    /// with a `session_closed` change) and locally (every lease is lost
    /// with [`Error::Closed`] inside). Closing a session that already ended
    /// only stops its keepalive. The keepalive task has stopped when this
    /// returns.
    pub async fn close(&self) -> Result<()> {
        self.stop.cancel();
        let task = self.task.lock().unwrap().take();
        if let Some(t) = task {
            let _ = t.await;
        }
        if self.inner.error().is_some() {
            self.inner.end(Error::Closed);
            return Ok(());
        }
        self.inner.end(Error::Closed);
        let c = &self.inner.client;
        let rb = c.request(Method::DELETE, c.url(&["v1", "sessions", &self.inner.id]));
        match c.send_as(rb, 204, &*self.inner).await {
            Ok(_) | Err(Error::SessionNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Opens a watch stream whose registrations belong to this session: they
    /// end with it, a duplicate open of the same selector supersedes the
    /// older stream, and [`Subscription::unsubscribe`] can remove one.
    pub async fn watch(&self, selectors: &[&str]) -> Result<Subscription> {
        self.inner
            .client
            .open_watch(selectors, Some(&self.inner.id))
            .await
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop.cancel();
        self.inner.end(Error::Closed);
    }
}

impl SessionInner {
    pub fn error(&self) -> Option<Error> {
        self.state.lock().unwrap().err.clone()
    }

    /// Records why the session ended, once, stops its keepalive and loses
    /// its leases. Called without any lock held.
    pub fn end(&self, cause: Error) {
        let leases = {
            let mut st = self.state.lock().unwrap();
            if st.err.is_some() {
                return;
            }
            st.err = Some(cause.clone());
            std::mem::take(&mut st.leases)
        };
        self.client.inner.sessions.untrack(self);
        self.done.cancel(); // the keepalive task ends
        for l in leases.into_values() {
            l.end(Error::LeaseLost(Box::new(cause.clone())));
        }
    }

    /// Registers `l`, held on `route`; false when the session has ended.
    pub fn track(&self, route: &str, l: Arc<dyn Held>) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.err.is_some() {
            return false;
        }
        st.leases.insert(route.to_string(), l);
        true
    }

    /// Forgets `l` (it ended), unless another lease holds `route` since.
    pub fn untrack(&self, route: &str, l: &dyn Held) {
        let mut st = self.state.lock().unwrap();
        if st
            .leases
            .get(route)
            .is_some_and(|h| std::ptr::addr_eq(Arc::as_ptr(h), l))
        {
            st.leases.remove(route);
        }
    }

    /// The lease held on `route`.
    pub fn handle(&self, route: &str) -> Option<Arc<dyn Held>> {
        self.state.lock().unwrap().leases.get(route).cloned()
    }

    /// Ends the session at once when `e` is the broker's `session_not_found`
    /// to one of its requests (prompt loss: loss.rs).
    pub(crate) fn not_found(&self, e: &Error) {
        if matches!(e, Error::SessionNotFound(_)) && !self.client.inner.sessions.late {
            self.end(Error::SessionLost(Box::new(e.clone())));
        }
    }
}

impl Losable for SessionInner {
    fn home(&self) -> Home {
        self.home.lock().unwrap().clone()
    }

    fn rehome(&self, h: Home) {
        *self.home.lock().unwrap() = h;
    }

    fn lose(&self, cause: Error) {
        self.end(cause);
    }
}

/// Keeps the session alive every TTL/3 until stopped. A failed keepalive is
/// retried with backoff; when none got through by the local deadline (a
/// lower bound of the broker's), the session is lost.
async fn keepalive(s: Arc<SessionInner>, stop: CancellationToken, mut deadline: Instant) {
    let interval = s.ttl / 3;
    let mut backoff = Backoff::new(Duration::from_millis(100), interval);
    let mut wait = interval;
    let mut last_err: Option<Error> = None;
    let c = s.client.clone();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = s.done.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        if let Some(e) = &last_err {
            if Instant::now() >= deadline {
                s.end(Error::SessionLost(Box::new(e.clone())));
                return;
            }
        }
        let t0 = Instant::now();
        let rb = c.request(Method::POST, c.url(&["v1", "sessions", &s.id, "keepalive"]));
        let r = tokio::select! {
            _ = stop.cancelled() => return,
            _ = s.done.cancelled() => return,
            r = tokio::time::timeout_at(deadline, c.call_as::<Keepalive>(rb, 200, &*s)) => r,
        };
        match r {
            Ok(Ok(_)) => {
                deadline = t0 + s.ttl;
                last_err = None;
                backoff.reset();
                wait = interval;
            }
            Ok(Err(e @ Error::SessionNotFound(_))) => {
                s.end(Error::SessionLost(Box::new(e)));
                return;
            }
            Ok(Err(e)) => {
                last_err = Some(e);
                wait = backoff
                    .next_delay()
                    .min(deadline.saturating_duration_since(Instant::now()));
            }
            Err(_) => {
                if last_err.is_none() {
                    last_err = Some(Error::Unavailable(Problem::local(
                        "no keepalive got through within the TTL",
                    )));
                }
                wait = Duration::ZERO;
            }
        }
    }
}
