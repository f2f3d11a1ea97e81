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
//! delete) go through `Client::send_as` and `Client::call_as`: a success
//! records its broker and epoch ([`Sessions::held_by`]) before that same
//! answer is judged, so a success from the creator under a new epoch (the
//! family moved away and back) ends nothing (the Go SDK's `Session.call`).

use crate::error::{Error, Problem};
use std::sync::{Arc, Mutex, Weak};

/// The broker that holds a session: the host (`host:port`) that last
/// answered one of its requests with success, and that answer's epoch (its
/// creator, or the broker a planned move took its family to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Home {
    pub(crate) host: String,
    pub(crate) epoch: String,
}

/// A live session, as prompt loss sees it (session.rs implements it).
pub(crate) trait Losable: Send + Sync {
    /// The broker that holds it and that broker's lifetime.
    fn home(&self) -> Home;
    /// Records `h` as the broker that holds it now ([`Sessions::held_by`]).
    fn rehome(&self, h: Home);
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
    /// Conformance tests only: a session's broker stays its creator.
    creator: bool,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.live.lock().unwrap().len();
        f.debug_struct("Sessions")
            .field("live", &n)
            .field("late", &self.late)
            .field("creator", &self.creator)
            .finish()
    }
}

impl Sessions {
    /// No session yet; `late` and `creator` for the conformance tests'
    /// broken clients.
    pub(crate) fn new(late: bool, creator: bool) -> Sessions {
        Sessions {
            live: Mutex::new(Vec::new()),
            late,
            creator,
        }
    }

    /// Records `host`, answering one of `s`'s own requests with success
    /// under `epoch`, as the broker that holds `s` now
    /// (docs/client-operations.md, "Planned moves"). The client calls it
    /// before it judges that same answer ([`Sessions::broker_gone`]).
    pub(crate) fn held_by(&self, s: &dyn Losable, host: &str, epoch: &str) {
        if host.is_empty() || epoch.is_empty() || self.creator {
            return;
        }
        s.rehome(Home {
            host: host.to_string(),
            epoch: epoch.to_string(),
        });
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
        let gone: Vec<(Arc<dyn Losable>, Home)> = {
            let live = self.live.lock().unwrap();
            live.iter()
                .filter_map(Weak::upgrade)
                .map(|s| {
                    let h = s.home();
                    (s, h)
                })
                .filter(|(_, h)| {
                    h.host == host
                        && match epoch {
                            Some(e) => h.epoch != e,
                            None => true,
                        }
                })
                .collect()
        };
        for (s, h) in gone {
            let cause = match epoch {
                Some(e) => Error::SessionNotFound(Problem::local(format!(
                    "its broker {host} answered for another lifetime (epoch {e}, the session's {})",
                    h.epoch
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
