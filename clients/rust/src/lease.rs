//! [`Lease`]: the only ownership handle of this crate, made only by
//! [`Session::acquire`]; and [`Session::with_lease`].

use crate::client::Route;
use crate::error::{Error, Problem, Result};
use crate::session::{Held, Session, SessionInner};
use crate::signal::Signal;
use crate::wire::{AcquireRequest, ExtendRequest, LeaseGrant, Outcome, ReleaseRequest};
use reqwest::Method;
use std::any::Any;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Tunes [`Session::acquire`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    /// Wait up to this long (at most 30 s) in the route's FIFO queue when
    /// another session holds the lease, instead of failing at once with
    /// `LeaseHeld`; when the wait ends without a grant the acquisition fails
    /// with `WaitTimeout`. Dropping the acquiring future leaves the queue.
    pub wait: Option<Duration>,
}

impl AcquireOptions {
    /// Waits up to `d` in the route's queue (Go: `Wait(d)`).
    #[must_use = "builder methods return the changed value; use it"]
    pub fn wait(mut self, d: Duration) -> Self {
        self.wait = Some(d);
        self
    }
}

/// A lease held by a [`Session`]: the only ownership handle of this crate.
/// Cheap to clone (clones are the same handle); safe to use from many tasks.
///
/// [`Lease::lost`] fires when the lease is no longer held, and
/// [`Lease::error`] says why: [`Error::Released`] after its own
/// [`Lease::release`]; otherwise [`Error::LeaseLost`] with the cause inside:
/// `NotOwner`, `Fenced` or `LeaseExpired` from the broker, `LeaseExpired`
/// when the local deadline passed without a successful extension, or the
/// session's end ([`Error::SessionLost`], reported the moment the session is
/// known to have ended: see [`Session`]'s prompt loss).
///
/// The local deadline is a lower bound of the broker's expiry, measured on
/// the monotonic clock from the moment the request was sent: send +
/// `expires_after_request_ms` of the acquire's answer (the TTL, plus the
/// wait when the grant came after a wait in the queue; what is left for
/// `already_held`), send + TTL for an extension, and send + TTL after an
/// acquire answered by an older broker that does not send the member.
#[derive(Debug, Clone)]
pub struct Lease {
    inner: Arc<LeaseInner>,
}

#[derive(Debug)]
struct LeaseInner {
    session: Arc<SessionInner>,
    route: Route,
    route_str: String,
    token: i64,
    state: Mutex<State>,
    lost: CancellationToken,
    deadline_moved: Notify,
}

#[derive(Debug)]
struct State {
    acquired_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    renewals: i64,
    deadline: Instant,
    err: Option<Error>,
}

/// Answers that mean the lease is not this session's any more.
pub(crate) fn ownership_gone(e: &Error) -> bool {
    matches!(
        e,
        Error::NotOwner(_) | Error::Fenced(_) | Error::LeaseExpired(_) | Error::SessionNotFound(_)
    )
}

impl Session {
    /// Acquires the exact route (`lease://realm/area/resource`) for `ttl`
    /// (100 ms .. 10 min). When this session already holds it, returns the
    /// same handle (a new one if the first was dropped) without resetting its
    /// TTL.
    pub async fn acquire(&self, route: &str, ttl: Duration, opts: AcquireOptions) -> Result<Lease> {
        let r = Route::parse(route)?;
        let s = &self.inner;
        if let Some(e) = s.error() {
            return Err(e);
        }
        let body = AcquireRequest {
            session_id: s.id.clone(),
            ttl_ms: ttl.as_millis() as i64,
            wait_ms: opts
                .wait
                .filter(|w| !w.is_zero())
                .map(|w| w.as_millis() as i64),
        };
        let c = &s.client;
        let t0 = Instant::now();
        let rb = c
            .request(Method::POST, r.url(c, Some("acquire")))
            .json(&body);
        let out: LeaseGrant = match c.call_as(rb, 200, &**s).await {
            Ok(out) => out,
            Err(e) => {
                s.not_found(&e);
                return Err(e);
            }
        };
        Ok(adopt(s, r, out, t0, ttl))
    }

    /// Acquires `route` for `ttl`, runs `work` while holding it and releases
    /// it when `work` returns. The lease is extended every `ttl/3`; when it is
    /// lost, [`Lease::lost`] of the handle given to `work` fires and
    /// `work` should stop (it is not aborted). Returns `work`'s error; when
    /// `work` succeeded but the lease was lost while it ran, the loss
    /// ([`Error::LeaseLost`]): work done without the lease must not be taken
    /// as done.
    pub async fn with_lease<T, E, F, Fut>(
        &self,
        route: &str,
        ttl: Duration,
        opts: AcquireOptions,
        work: F,
    ) -> std::result::Result<T, E>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: From<Error>,
    {
        let l = self.acquire(route, ttl, opts).await?;
        let work = work(l.clone());
        tokio::pin!(work);
        let renew = l.renew(ttl);
        tokio::pin!(renew);
        let mut renewing = true;
        let res = loop {
            tokio::select! {
                r = &mut work => break r,
                _ = &mut renew, if renewing => renewing = false,
            }
        };
        let lost = l.error();
        let _ = tokio::time::timeout(Duration::from_secs(5), l.release()).await;
        match (res, lost) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(lost)) => Err(E::from(lost)),
            (Ok(v), None) => Ok(v),
        }
    }
}

/// The handle of a lease the broker granted (or answered `already_held` for)
/// to a request sent at `t0` for `ttl`: the tracked handle when it is the
/// same grant, otherwise a new one whose local deadline is
/// [`local_deadline`].
pub(crate) fn adopt(
    s: &Arc<SessionInner>,
    r: Route,
    out: LeaseGrant,
    t0: Instant,
    ttl: Duration,
) -> Lease {
    if out.outcome == Some(Outcome::AlreadyHeld) {
        if let Some(h) = s.handle(&r.to_string()) {
            let h: Arc<dyn Any + Send + Sync> = h;
            if let Ok(inner) = h.downcast::<LeaseInner>() {
                if inner.token == out.fencing_token {
                    return Lease { inner };
                }
            }
        }
    }
    let deadline = if s.client.inner.send_plus_ttl {
        t0 + ttl // the old rule: the conformance tests' broken client only
    } else {
        local_deadline(&out, t0, ttl)
    };
    let l = Lease {
        inner: Arc::new(LeaseInner {
            session: s.clone(),
            route_str: r.to_string(),
            route: r,
            token: out.fencing_token,
            state: Mutex::new(State {
                acquired_at: out.acquired_at,
                expires_at: out.expires_at,
                renewals: out.renewals,
                deadline,
                err: None,
            }),
            lost: CancellationToken::new(),
            deadline_moved: Notify::new(),
        }),
    };
    tokio::spawn(deadline_timer(l.clone()));
    if !s.track(l.route(), l.inner.clone()) {
        let cause = s.error().unwrap_or(Error::Closed);
        l.end(Error::LeaseLost(Box::new(cause)));
    }
    l
}

/// The local deadline of a lease an acquire sent at `t0` (on the monotonic
/// clock) for `ttl` was answered with: `t0 + expires_after_request_ms`, the
/// broker's expiry counted from the moment it took the request up, which
/// came after `t0`. So the deadline is never later than the broker's expiry,
/// and after a wait in the queue it stays as close to it as the round trip
/// allows (`t0 + ttl` would be the whole wait early). A broker that does not
/// send the member (an older one) gets `t0 + ttl`, and for `already_held`
/// never more than what its `expires_at` leaves (read on the wall clocks:
/// the best such a broker says).
fn local_deadline(out: &LeaseGrant, t0: Instant, ttl: Duration) -> Instant {
    if let Some(ms) = out.expires_after_request_ms {
        let after = Duration::from_millis(ms.max(0) as u64);
        // An absurd value must not panic on overflow: fall back to the TTL.
        return t0.checked_add(after).unwrap_or(t0 + ttl);
    }
    let deadline = t0 + ttl;
    if out.outcome == Some(Outcome::AlreadyHeld) {
        // The TTL was not reset: never trust more than what remains.
        let rem = out.expires_at - OffsetDateTime::now_utc();
        let rem = Duration::try_from(rem).unwrap_or(Duration::ZERO);
        return deadline.min(Instant::now() + rem);
    }
    deadline
}

impl Lease {
    /// The lease's exact route.
    pub fn route(&self) -> &str {
        &self.inner.route_str
    }

    /// The broker revision at which the lease was granted: strictly
    /// increasing per route, stable across renewals. Pass it to the resource
    /// the lease guards, which must refuse a token lower than the highest it
    /// has seen. It means nothing across routes or broker lifetimes.
    pub fn fencing_token(&self) -> i64 {
        self.inner.token
    }

    /// When the lease was granted.
    pub fn acquired_at(&self) -> OffsetDateTime {
        self.inner.state.lock().unwrap().acquired_at
    }

    /// The broker's expiry as of the last grant or extension.
    pub fn expires_at(&self) -> OffsetDateTime {
        self.inner.state.lock().unwrap().expires_at
    }

    /// The successful extensions, as the broker reports them.
    pub fn renewals(&self) -> i64 {
        self.inner.state.lock().unwrap().renewals
    }

    /// Fires when the lease is no longer held (or was released):
    /// `lease.lost().await`, or `_ = lease.lost() => …` in `tokio::select!`;
    /// [`Lease::error`] then says why. A read-only [`Signal`]: waiting on it
    /// cannot end the lease.
    pub fn lost(&self) -> Signal {
        Signal::new(&self.inner.lost)
    }

    /// `None` while the lease is held, then why it is not.
    pub fn error(&self) -> Option<Error> {
        self.inner.state.lock().unwrap().err.clone()
    }

    /// The session holding this lease.
    pub(crate) fn session_inner(&self) -> &Arc<SessionInner> {
        &self.inner.session
    }

    /// The parsed route.
    pub(crate) fn parsed_route(&self) -> &Route {
        &self.inner.route
    }

    /// Extends the lease to now + `ttl`. When the broker answers that the
    /// lease is no longer this session's (`NotOwner`, `Fenced`,
    /// `LeaseExpired`, `SessionNotFound`) the lease is lost and this returns
    /// its error. Any other failure (a transport error, `Unavailable`) leaves
    /// the lease as it was: retry before the deadline.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        let s = &self.inner.session;
        let c = &s.client;
        let body = ExtendRequest {
            session_id: s.id.clone(),
            fencing_token: self.inner.token,
            ttl_ms: ttl.as_millis() as i64,
        };
        let t0 = Instant::now();
        let rb = c
            .request(Method::POST, self.inner.route.url(c, Some("extend")))
            .json(&body);
        let out: LeaseGrant = match c.call_as(rb, 200, &**s).await {
            Ok(out) => out,
            Err(e) if ownership_gone(&e) => {
                s.not_found(&e);
                self.end(Error::LeaseLost(Box::new(e)));
                return Err(self.error().unwrap_or(Error::Closed));
            }
            Err(e) => return Err(e),
        };
        self.extended(&out, t0, ttl)
    }

    /// Records a successful extension sent at `t0` for `ttl`; the lease's
    /// error when it was lost meanwhile.
    pub(crate) fn extended(&self, out: &LeaseGrant, t0: Instant, ttl: Duration) -> Result<()> {
        let mut st = self.inner.state.lock().unwrap();
        if let Some(e) = &st.err {
            return Err(e.clone());
        }
        st.expires_at = out.expires_at;
        st.renewals = out.renewals;
        st.deadline = t0 + ttl;
        self.inner.deadline_moved.notify_one();
        Ok(())
    }

    /// Releases the lease; the next FIFO waiter (if any) is granted. Returns
    /// `Ok` once the lease is known not to be held by this session any more,
    /// including when it was already lost; an error only when that is unknown
    /// (a transport failure): the lease then ends at its TTL at the latest.
    pub async fn release(&self) -> Result<()> {
        if matches!(self.error(), Some(Error::Released)) {
            return Ok(());
        }
        let s = &self.inner.session;
        if let Some(serr) = s.error() {
            // The broker released it when the session ended.
            self.end(Error::LeaseLost(Box::new(serr)));
            return Ok(());
        }
        let c = &s.client;
        let body = ReleaseRequest {
            session_id: s.id.clone(),
            fencing_token: self.inner.token,
        };
        let rb = c
            .request(Method::POST, self.inner.route.url(c, Some("release")))
            .json(&body);
        match c.send_as(rb, 204, &**s).await {
            Ok(_) => {
                self.end(Error::Released);
                Ok(())
            }
            Err(e) if ownership_gone(&e) => {
                s.not_found(&e);
                self.end(Error::LeaseLost(Box::new(e)));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Records why the lease is not held, once.
    pub(crate) fn end(&self, cause: Error) {
        self.inner.end(cause);
    }

    /// Extends every `ttl/3` until the lease is lost; a failed extension is
    /// retried at the next tick (the local deadline decides the loss).
    async fn renew(&self, ttl: Duration) {
        let mut tick = tokio::time::interval_at(Instant::now() + ttl / 3, ttl / 3);
        loop {
            tokio::select! {
                _ = self.inner.lost.cancelled() => return,
                _ = tick.tick() => {
                    let _ = tokio::time::timeout(ttl / 3, self.extend(ttl)).await;
                }
            }
        }
    }
}

impl Held for LeaseInner {
    fn end(&self, cause: Error) {
        if self.session.client.inner.never_lost && !matches!(cause, Error::Released) {
            return;
        }
        {
            let mut st = self.state.lock().unwrap();
            if st.err.is_some() {
                return;
            }
            st.err = Some(cause);
        }
        self.lost.cancel();
        self.session.untrack(&self.route_str, self);
    }
}

/// Loses the lease when its local deadline passes; ends when it is lost.
async fn deadline_timer(l: Lease) {
    loop {
        let deadline = l.inner.state.lock().unwrap().deadline;
        tokio::select! {
            _ = l.inner.lost.cancelled() => return,
            _ = l.inner.deadline_moved.notified() => continue,
            _ = tokio::time::sleep_until(deadline) => {
                if Instant::now() >= l.inner.state.lock().unwrap().deadline {
                    l.end(Error::LeaseLost(Box::new(Error::LeaseExpired(Problem::local(
                        "the local deadline passed without a successful extension",
                    )))));
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
