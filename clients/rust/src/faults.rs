//! [`Faults`]: the deliberate defects with which the conformance tests prove
//! each scenario able to fail. Part of the public API only with the
//! `test-util` feature.

use crate::wire::ChangeKind;

/// Deliberate defects, for the conformance tests that prove each scenario
/// able to fail (the Go SDK's `brokenMode`, one flag per mode). All false in
/// every observer built without [`ObserveOptions::faults`](crate::ObserveOptions::faults). Public only with
/// the non-default `test-util` feature, which the crate's own tests turn
/// on; never use them otherwise.
// The client-level flags are read only by `ClientBuilder::faults`.
#[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Installs an empty snapshot: the marker's page and the LIST pages are
    /// read but dropped.
    pub ignore_snapshot: bool,
    /// Installs the snapshot without applying the changes buffered while
    /// paging it.
    pub drop_buffered: bool,
    /// Applies no change once the view is ready.
    pub ignore_live: bool,
    /// Keeps the view ready when its stream ends and starts no bootstrap.
    pub stay_ready: bool,
    /// Merges a new bootstrap into the old view instead of replacing it.
    pub merge_views: bool,
    /// Drops changes of kind `expired`.
    pub ignore_expired: bool,
    /// Drops changes of kind `session_closed`.
    pub ignore_session_closed: bool,
    /// Never starts a periodic reconciliation.
    pub no_reconcile: bool,
    /// Close lets a bootstrap in flight (its LIST pages) finish instead of
    /// dropping it.
    pub uncancellable_pages: bool,
    /// Retries errors no retry fixes (forbidden, …) instead of stopping.
    pub retry_fatal: bool,
    /// A client built with these faults ([`crate::ClientBuilder::faults`])
    /// does not follow `wrong_broker`: it is an error, not a redirect.
    pub no_follow: bool,
    /// A client built with these faults follows `wrong_broker` but keeps
    /// sending to an owner that stopped answering.
    pub sticky_owner: bool,
    /// A client built with these faults keeps sending to a broker that
    /// answers `family_unavailable` instead of moving on (it still ends that
    /// broker's sessions at once).
    pub stay_on_unavailable: bool,
    /// A client built with these faults uses only the first of its base
    /// URLs: a dead first broker is never left.
    pub single_broker: bool,
    /// A client built with these faults never reports a lease's loss:
    /// [`crate::Lease::lost`] never fires.
    pub never_lost: bool,
    /// A client built with these faults gives a grant the old local
    /// deadline, send + TTL, ignoring `expires_after_request_ms`: a lease
    /// granted after a wait in the queue is lost right after it arrives.
    pub send_plus_ttl: bool,
    /// A client built with these faults loses a session at its keepalive
    /// only: a new epoch from its broker, `family_unavailable` or
    /// `session_not_found` to another request of the session end nothing at
    /// once.
    pub late_loss: bool,
    /// A client built with these faults judges prompt loss against the
    /// broker that created a session, never against the one that last
    /// answered it (a planned move): the creator answering under a new epoch
    /// ends the session.
    pub creator_loss: bool,
}

impl Faults {
    pub(crate) fn ignores(&self, k: ChangeKind) -> bool {
        (k == ChangeKind::Expired && self.ignore_expired)
            || (k == ChangeKind::SessionClosed && self.ignore_session_closed)
    }
}
