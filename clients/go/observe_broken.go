package muster

// brokenMode selects deliberately wrong observer behaviour. It exists only
// so that the conformance tests can prove each scenario able to fail: a
// scenario that passes with a broken observer proves nothing. It is
// unexported and zero in every observer built through the public API.
type brokenMode uint

const (
	// brokenIgnoreSnapshot installs an empty snapshot: the marker's page
	// and the LIST pages are read but dropped.
	brokenIgnoreSnapshot brokenMode = 1 << iota
	// brokenDropBuffered installs the snapshot without applying the
	// changes buffered while paging it.
	brokenDropBuffered
	// brokenIgnoreLive applies no change once the view is ready.
	brokenIgnoreLive
	// brokenStayReady keeps the view ready when its stream ends and starts
	// no bootstrap (as if overflow, restart or disconnect were ignored).
	brokenStayReady
	// brokenMergeViews merges a new bootstrap into the old view instead of
	// replacing it (stale items survive a restart).
	brokenMergeViews
	// brokenIgnoreExpired drops changes of kind expired.
	brokenIgnoreExpired
	// brokenIgnoreSessionClosed drops changes of kind session_closed.
	brokenIgnoreSessionClosed
	// brokenNoReconcile never starts a periodic reconciliation.
	brokenNoReconcile
	// brokenUncancellablePages pages the snapshot with requests that Close
	// does not cancel.
	brokenUncancellablePages
	// brokenRetryFatal retries errors no retry fixes (forbidden, …)
	// instead of stopping.
	brokenRetryFatal
	// brokenNoFollow builds the observer's (and the worker's) client with
	// WithoutFollow: a wrong_broker answer is an error, not a redirect.
	brokenNoFollow
	// brokenStickyOwner follows wrong_broker but keeps sending to the owner
	// it was sent to after that owner stopped answering.
	brokenStickyOwner
	// brokenNeverLost builds the worker's client so that a lease's loss is
	// never reported: Lost is never closed, Err stays nil.
	brokenNeverLost
	// brokenSendPlusTTL builds the worker's client with the old local
	// deadline of a grant, send + TTL, which a wait in the queue makes
	// early: the lease is declared lost right after it was granted.
	brokenSendPlusTTL
	// brokenLateLoss builds the worker's client so that a session is lost
	// at its keepalive only: a new epoch from its broker, family_unavailable
	// or session_not_found to another request end nothing at once.
	brokenLateLoss
	// brokenSingleBroker builds every client on the first of its base URLs
	// only: a dead first broker is never left.
	brokenSingleBroker
	// brokenStayOnUnavailable keeps sending to a broker that answers
	// family_unavailable instead of moving on to the next one.
	brokenStayOnUnavailable
	// brokenCreatorLoss builds the worker's client so that prompt loss
	// judges a session against the broker that created it, never against
	// the one that last answered it (a planned move): its creator
	// answering under a new epoch ends it.
	brokenCreatorLoss
)

// ignores reports whether the mode drops changes of kind k.
func (m brokenMode) ignores(k ChangeKind) bool {
	return (k == Expired && m&brokenIgnoreExpired != 0) || (k == SessionClosed && m&brokenIgnoreSessionClosed != 0)
}

// withBroken builds a deliberately broken observer (conformance tests only).
func withBroken(m brokenMode) ObserveOption {
	return func(c *observeConfig) { c.broken = m }
}
