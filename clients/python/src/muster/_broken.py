"""The deliberately broken behaviours of the conformance tests (the Go SDK's
clients/go/observe_broken.go)."""

# Deliberately wrong behaviours, the same set as the Go SDK's
# (clients/go/observe_broken.go). They exist only so that the conformance
# tests can prove each scenario able to fail: a scenario that passes with a
# broken observer proves nothing. Empty in every observer Client.observe builds.

#: Installs an empty snapshot: the marker's page and the LIST pages are read but dropped.
BROKEN_IGNORE_SNAPSHOT = "ignore_snapshot"
#: Installs the snapshot without applying the changes buffered while paging it.
BROKEN_DROP_BUFFERED = "drop_buffered"
#: Applies no change once the view is ready.
BROKEN_IGNORE_LIVE = "ignore_live"
#: Keeps the view ready when its stream ends and starts no bootstrap.
BROKEN_STAY_READY = "stay_ready"
#: Merges a new bootstrap into the old view instead of replacing it.
BROKEN_MERGE_VIEWS = "merge_views"
#: Drops changes of kind expired.
BROKEN_IGNORE_EXPIRED = "ignore_expired"
#: Drops changes of kind session_closed.
BROKEN_IGNORE_SESSION_CLOSED = "ignore_session_closed"
#: Never starts a periodic reconciliation.
BROKEN_NO_RECONCILE = "no_reconcile"
#: Pages the snapshot with requests that aclose does not cancel.
BROKEN_UNCANCELLABLE_PAGES = "uncancellable_pages"
#: Retries errors no retry fixes (forbidden, ...) instead of stopping.
BROKEN_RETRY_FATAL = "retry_fatal"
#: The runner builds its clients with without_follow: wrong_broker is an error, not a redirect.
BROKEN_NO_FOLLOW = "no_follow"
#: The runner's clients follow wrong_broker but keep an owner that stopped answering.
BROKEN_STICKY_OWNER = "sticky_owner"
#: The runner's clients never report a lease's loss (``lost`` is never set).
BROKEN_NEVER_LOST = "never_lost"
#: The runner's clients give a grant the old local deadline, send + TTL, which a
#: wait in the queue makes early: the lease is lost right after it was granted.
BROKEN_SEND_PLUS_TTL = "send_plus_ttl"
#: The runner's clients lose a session at its keepalive only: another epoch
#: from its broker, family_unavailable or session_not_found to another of its
#: requests end nothing at once (muster._loss off).
BROKEN_LATE_LOSS = "late_loss"
#: The runner's clients use only the first of their base URLs: a dead first
#: broker is never left.
BROKEN_SINGLE_BROKER = "single_broker"
#: The runner's clients keep sending to a broker that answers
#: family_unavailable instead of moving on (its sessions are still lost at once).
BROKEN_STAY_ON_UNAVAILABLE = "stay_on_unavailable"
#: The runner's clients judge prompt loss against the broker that created a
#: session, never against the one that last answered it (a planned move): the
#: creator answering under a new epoch ends the session.
BROKEN_CREATOR_LOSS = "creator_loss"
