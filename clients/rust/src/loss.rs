//! Prompt loss. A session is lost the moment the client learns that it
//! ended, not at its next keepalive (docs/client-operations.md, "Prompt
//! loss"):
//! - any answer or stream from the broker that holds the session (the host
//!   that last answered one of the session's own requests with success,
//!   after following `wrong_broker`: its creator, or the broker a planned
//!   move took the family to) carries another epoch (`Muster-Epoch`) than
//!   that success: that broker restarted, or the family came back to it as
//!   a new lifetime, and its sessions are gone;
//! - that broker answers `family_unavailable`: it stopped serving the
//!   family, and its sessions with it;
//! - the broker answers `session_not_found` to a request of the session
//!   (acquire, extend, release, batch; the keepalive already did).
//!
//! A connection error alone proves nothing: the session's local deadline
//! decides then. Ending a session ends its leases, each with
//! [`Error::LeaseLost`] around the session's [`Error::SessionLost`], and
//! stops its keepalive.
//!
//! The session's own requests (keepalive, acquire, extend, release, batch,
//! delete) go through [`Client::send_as`] and [`Client::call_as`]: a success
//! records its broker and epoch before that same answer is judged, so a
//! success from the creator under a new epoch (the family moved away and
//! back) ends nothing (the Go SDK's `Session.call`).

use crate::client::Client;
use crate::error::{problem_error, Error, Problem, Result};
use crate::session::SessionInner;
use reqwest::{RequestBuilder, Url};
use serde::de::DeserializeOwned;
use std::sync::{Arc, Weak};

/// The host (`host:port`) of `url`: for an answer's URL, the broker that
/// answered it (the owner a `wrong_broker` answer was followed to, or the
/// base URL's). The port is always there (the scheme's default when the URL
/// has none), so one broker has one name.
pub(crate) fn answered_by(url: &Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => String::new(),
    }
}

impl Client {
    /// Registers `s` for prompt loss, until [`Client::untrack_session`].
    pub(crate) fn track_session(&self, s: &Arc<SessionInner>) {
        let mut reg = self.inner.sessions.lock().unwrap();
        reg.retain(|w| w.strong_count() > 0);
        reg.push(Arc::downgrade(s));
    }

    /// Forgets `s` (it ended).
    pub(crate) fn untrack_session(&self, s: &SessionInner) {
        let me: *const SessionInner = s;
        self.inner
            .sessions
            .lock()
            .unwrap()
            .retain(|w| w.strong_count() > 0 && !std::ptr::eq(Weak::as_ptr(w), me));
    }

    /// Ends, at once, every session `host` holds that the answer proves
    /// gone: those whose epoch differs from `epoch` (the broker answered for
    /// a new lifetime), or all of them when `epoch` is `None` (it answered
    /// `family_unavailable`, with `problem`). No lock is held while they end.
    pub(crate) fn broker_gone(&self, host: &str, epoch: Option<&str>, problem: Option<&Problem>) {
        if host.is_empty() || self.inner.late_loss {
            return;
        }
        let gone: Vec<Arc<SessionInner>> = {
            let reg = self.inner.sessions.lock().unwrap();
            reg.iter()
                .filter_map(Weak::upgrade)
                .filter(|s| {
                    let held = s.held.lock().unwrap();
                    held.host == host
                        && match epoch {
                            Some(e) => held.epoch != e,
                            None => true,
                        }
                })
                .collect()
        };
        for s in gone {
            let cause = match epoch {
                Some(e) => Error::SessionNotFound(Problem::local(format!(
                    "its broker {host} answered for another lifetime (epoch {e}, the session's {})",
                    s.held.lock().unwrap().epoch
                ))),
                None => {
                    let mut p = problem.cloned().unwrap_or_default();
                    p.detail = match p.detail.as_str() {
                        "" => format!("its broker {host} no longer serves the family"),
                        d => format!("its broker {host} no longer serves the family: {d}"),
                    };
                    Error::FamilyUnavailable(p)
                }
            };
            s.end(Error::SessionLost(Box::new(cause)));
        }
    }

    /// The error of a problem answer from `host`; a `family_unavailable`
    /// ends the sessions that broker holds.
    pub(crate) fn problem(
        &self,
        host: &str,
        status: u16,
        content_type: &str,
        body: &[u8],
    ) -> Error {
        let e = problem_error(status, content_type, body);
        if let Error::FamilyUnavailable(p) = &e {
            self.broker_gone(host, None, Some(p));
        }
        e
    }

    /// [`Client::send`] for one of `s`'s own requests: a success records
    /// its broker as the session's before prompt loss judges the answer.
    pub(crate) async fn send_as(
        &self,
        rb: RequestBuilder,
        want: u16,
        s: &SessionInner,
    ) -> Result<bytes::Bytes> {
        Ok(self.send_from_as(rb, want, Some(s)).await?.0)
    }

    /// [`Client::call`] for one of `s`'s own requests ([`Client::send_as`]).
    pub(crate) async fn call_as<T: DeserializeOwned>(
        &self,
        rb: RequestBuilder,
        want: u16,
        s: &SessionInner,
    ) -> Result<T> {
        let body = self.send_as(rb, want, s).await?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("decoding a {want} answer: {e}")))
    }
}

/// The broker that holds a session: the host (`host:port`) that last
/// answered one of its requests with success, and that answer's epoch (its
/// creator, or the broker a planned move took its family to).
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) host: String,
    pub(crate) epoch: String,
}

impl SessionInner {
    /// Records the broker that answered one of the session's own requests
    /// with success, and its epoch: it holds the session now
    /// (docs/client-operations.md, "Planned moves").
    pub(crate) fn answered_by(&self, resp: &reqwest::Response) {
        let epoch = resp
            .headers()
            .get("Muster-Epoch")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let host = answered_by(resp.url());
        if epoch.is_empty() || host.is_empty() || self.client.inner.creator_loss {
            return;
        }
        *self.held.lock().unwrap() = Held {
            host,
            epoch: epoch.to_string(),
        };
    }

    /// Ends the session at once when `e` is the broker's `session_not_found`
    /// to one of its requests.
    pub(crate) fn not_found(&self, e: &Error) {
        if matches!(e, Error::SessionNotFound(_)) && !self.client.inner.late_loss {
            self.end(Error::SessionLost(Box::new(e.clone())));
        }
    }
}

#[cfg(test)]
mod tests;
