//! Prompt loss. A session is lost the moment the client learns that it
//! ended, not at its next keepalive (docs/client-operations.md, "Prompt
//! loss"):
//! - any answer or stream from the broker that holds the session (the host
//!   that answered its creation, after following `wrong_broker`) carries
//!   another epoch (`Muster-Epoch`): that broker restarted, or the family
//!   came back to it as a new lifetime, and its sessions are gone;
//! - that broker answers `family_unavailable`: it stopped serving the
//!   family, and its sessions with it;
//! - the broker answers `session_not_found` to a request of the session
//!   (acquire, extend, release, batch; the keepalive already did).
//!
//! A connection error alone proves nothing: the session's local deadline
//! decides then. Ending a session ends its leases, each with
//! [`Error::LeaseLost`] around the session's [`Error::SessionLost`], and
//! stops its keepalive.

use crate::error::{Error, Problem};
use std::sync::{Arc, Mutex, Weak};

/// A live session, as prompt loss sees it (session.rs implements it).
pub(crate) trait Losable: Send + Sync {
    /// The broker that holds it (`host:port`).
    fn host(&self) -> &str;
    /// The broker lifetime it belongs to.
    fn epoch(&self) -> &str;
    /// Ends it at once with `cause` (an [`Error::SessionLost`]), and its
    /// leases with it.
    fn lose(&self, cause: Error);
}

/// The live sessions of one client, each registered at its creation until
/// it ends.
pub(crate) struct Sessions {
    live: Mutex<Vec<Weak<dyn Losable>>>,
    /// Conformance tests only: sessions are lost at their keepalive only,
    /// never promptly.
    pub(crate) late: bool,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.live.lock().unwrap().len();
        f.debug_struct("Sessions")
            .field("live", &n)
            .field("late", &self.late)
            .finish()
    }
}

impl Sessions {
    /// No session yet; `late` for the conformance tests' broken client.
    pub(crate) fn new(late: bool) -> Sessions {
        Sessions {
            live: Mutex::new(Vec::new()),
            late,
        }
    }

    /// Registers `s` for prompt loss, until [`Sessions::untrack`].
    pub(crate) fn track<S: Losable + 'static>(&self, s: &Arc<S>) {
        let w: Weak<S> = Arc::downgrade(s);
        let w: Weak<dyn Losable> = w;
        let mut live = self.live.lock().unwrap();
        live.retain(|w| w.strong_count() > 0);
        live.push(w);
    }

    /// Forgets `s` (it ended).
    pub(crate) fn untrack<S: Losable>(&self, s: &S) {
        let me: *const S = s;
        self.live
            .lock()
            .unwrap()
            .retain(|w| w.strong_count() > 0 && !std::ptr::addr_eq(Weak::as_ptr(w), me));
    }

    /// Ends, at once, every session `host` holds that the answer proves
    /// gone: those whose epoch differs from `epoch` (the broker answered for
    /// a new lifetime), or all of them when `epoch` is `None` (it answered
    /// `family_unavailable`, with `problem`). No lock is held while they end.
    pub(crate) fn broker_gone(&self, host: &str, epoch: Option<&str>, problem: Option<&Problem>) {
        if host.is_empty() || self.late {
            return;
        }
        let gone: Vec<Arc<dyn Losable>> = {
            let live = self.live.lock().unwrap();
            live.iter()
                .filter_map(Weak::upgrade)
                .filter(|s| {
                    s.host() == host
                        && match epoch {
                            Some(e) => s.epoch() != e,
                            None => true,
                        }
                })
                .collect()
        };
        for s in gone {
            let cause = match epoch {
                Some(e) => Error::SessionNotFound(Problem::local(format!(
                    "its broker {host} answered for another lifetime (epoch {e}, the session's {})",
                    s.epoch()
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
            s.lose(Error::SessionLost(Box::new(cause)));
        }
    }
}

#[cfg(test)]
mod tests;
