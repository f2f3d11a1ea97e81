//! The error type of the SDK: one variant per contract `code`, an
//! [`Error::Other`] for a code this SDK does not know yet, and the SDK's own
//! errors (a closed handle, a lost lease, an ended stream, a transport
//! failure).

use std::fmt;
use std::sync::Arc;

/// What the broker said about a failed request: the RFC 9457 problem body.
///
/// `status` is the HTTP status, 0 for a request the SDK refused locally with
/// the code the broker would have used. `detail` never contains a secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problem {
    /// The HTTP status; 0 for a local refusal.
    pub status: u16,
    /// The problem's title, e.g. `Conflict`.
    pub title: String,
    /// A human-readable explanation (never branch on it).
    pub detail: String,
    /// On a limit (429), the bound that was hit: `broker` (a cap shared by
    /// every family), `family` (the caller's family's quota), `session`,
    /// `route` or `root`. Empty otherwise; values may be added.
    pub scope: String,
    /// On `wrong_broker` (421), the base URL of the broker that serves the
    /// caller's family. The client follows it by itself (see
    /// [`crate::ClientBuilder::without_follow`]); it is set on the error only
    /// when following failed. Empty otherwise.
    pub owner: String,
}

impl Problem {
    /// A problem refused locally (status 0) with this detail.
    pub fn local(detail: impl Into<String>) -> Problem {
        Problem {
            status: 0,
            title: String::new(),
            detail: detail.into(),
            scope: String::new(),
            owner: String::new(),
        }
    }
}

/// The SDK's advice for what to do after an error; see [`Error::advice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The same request fails again: fix the input, the configuration or the
    /// grants.
    No,
    /// The same request may succeed later: retry with exponential backoff and
    /// jitter.
    Backoff,
    /// The state the request relied on is gone (a lease, a session, a
    /// cursor's snapshot, a broker lifetime): start over from fresh state.
    Restart,
}

impl fmt::Display for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Retry::No => "retry-no",
            Retry::Backoff => "retry-backoff",
            Retry::Restart => "retry-restart",
        })
    }
}

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal => $advice:ident, )*) => {
        /// An error of the SDK.
        ///
        /// Every contract `code` has its own variant carrying the [`Problem`];
        /// an unknown code (from a broker newer than this SDK) is kept in
        /// [`Error::Other`], never a panic. Branch on the variant (or
        /// [`Error::code`]), never on the detail.
        #[derive(Debug, Clone)]
        #[non_exhaustive]
        pub enum Error {
            $( $(#[$doc])* $variant(Problem), )*
            /// A code this SDK does not know. Advised by its status: 5xx and
            /// 429 back off, anything else does not retry.
            Other {
                /// The code as the broker sent it.
                code: String,
                /// The rest of the problem body (boxed: it keeps every
                /// `Result` of the SDK small).
                problem: Box<Problem>,
            },
            /// The session, lease handle, subscription or observer was closed
            /// by its owner.
            Closed,
            /// A session ended other than by its own `close`: the broker
            /// answered `session_not_found` to one of its requests, the broker
            /// holding it answered with another epoch (a local
            /// `SessionNotFound`, status 0, naming both epochs) or
            /// `family_unavailable`, or no keepalive got through within the
            /// TTL. The cause is inside (see [`crate::Session`]).
            SessionLost(Box<Error>),
            /// A lease stopped being held other than by its own `release`: the
            /// cause (`NotOwner`, `Fenced`, `LeaseExpired`, `SessionNotFound`,
            /// the session's end, …) is inside.
            LeaseLost(Box<Error>),
            /// The lease was released by its own `release`.
            Released,
            /// A watch stream ended. `reason` is the terminal event
            /// (`overflow`, `superseded`, `unsubscribed`, `session_closed`,
            /// `shutdown`) with the revision the broker sent, or `None` when
            /// the stream ended without one (a dropped connection); `detail`
            /// says more.
            StreamEnded {
                /// The terminal event's name, `None` without one.
                reason: Option<String>,
                /// The revision at which the broker ended the stream, when sent.
                revision: Option<i64>,
                /// What happened, for people.
                detail: String,
            },
            /// The request did not get an answer (connection refused or reset,
            /// a timeout, …).
            Transport(Arc<reqwest::Error>),
            /// An answer the SDK could not understand (not the contract's shape).
            Protocol(String),
        }

        /// Every contract code this SDK knows, in the contract's order.
        pub const CODES: &[&str] = &[$($code,)*];

        impl Error {
            /// The error for a contract code (unknown codes become
            /// [`Error::Other`]).
            pub fn from_code(code: &str, problem: Problem) -> Error {
                match code {
                    $( $code => Error::$variant(problem), )*
                    _ => Error::Other { code: code.to_string(), problem: Box::new(problem) },
                }
            }

            /// The contract code of a broker error (or of a local refusal),
            /// `None` for the SDK's own errors.
            pub fn code(&self) -> Option<&str> {
                match self {
                    $( Error::$variant(_) => Some($code), )*
                    Error::Other { code, .. } => Some(code),
                    _ => None,
                }
            }

            /// The problem body of a broker error, `None` for the SDK's own
            /// errors.
            pub fn problem(&self) -> Option<&Problem> {
                match self {
                    $( Error::$variant(p) => Some(p), )*
                    Error::Other { problem, .. } => Some(problem.as_ref()),
                    _ => None,
                }
            }

            /// What to do after this error, as the Go SDK's `Advice`: a broker
            /// error by its code (an unknown code by its status); a lost lease
            /// or session and an ended stream: restart; a closed handle: no
            /// retry; a transport or protocol failure: backoff.
            pub fn advice(&self) -> Retry {
                match self {
                    $( Error::$variant(_) => Retry::$advice, )*
                    Error::Other { problem, .. } => {
                        if problem.status >= 500 || problem.status == 429 {
                            Retry::Backoff
                        } else {
                            Retry::No
                        }
                    }
                    Error::SessionLost(_) | Error::LeaseLost(_) | Error::StreamEnded { .. } => {
                        Retry::Restart
                    }
                    Error::Closed | Error::Released => Retry::No,
                    Error::Transport(_) | Error::Protocol(_) => Retry::Backoff,
                }
            }
        }
    };
}

codes! {
    /// `invalid_route` (400): a route is not `lease://{realm}/{area}/{resource}`,
    /// or has a `*`. Retry: no.
    InvalidRoute = "invalid_route" => No,
    /// `invalid_selector` (400): a selector breaks the grammar. Retry: no.
    InvalidSelector = "invalid_selector" => No,
    /// `invalid_request` (400): a malformed request (body, parameter, TTL out
    /// of range), or options the SDK refused locally. Retry: no.
    InvalidRequest = "invalid_request" => No,
    /// `unauthenticated` (401): no token, or one the broker does not know.
    /// Retry: no (fix the token).
    Unauthenticated = "unauthenticated" => No,
    /// `forbidden` (403): no single grant covers the route, selector or root.
    /// Retry: no (get a grant).
    Forbidden = "forbidden" => No,
    /// `session_not_found` (404): the session ended (DELETE, expiry, restart).
    /// Retry: restart with a new session and acquire again.
    SessionNotFound = "session_not_found" => Restart,
    /// `lease_held` (409): another session holds the lease and the
    /// acquisition did not wait. Retry: backoff, or acquire with a wait.
    LeaseHeld = "lease_held" => Backoff,
    /// `already_queued` (409): this session already waits for this route.
    /// Retry: no (the waiting request will answer).
    AlreadyQueued = "already_queued" => No,
    /// `wait_timeout` (409): the wait ended before a grant. Retry: backoff.
    WaitTimeout = "wait_timeout" => Backoff,
    /// `queue_full` (429): the route has its maximum of waiters. Retry: backoff.
    QueueFull = "queue_full" => Backoff,
    /// `not_owner` (409): another session holds the route; your lease is gone.
    /// Retry: restart (stop the work, acquire again).
    NotOwner = "not_owner" => Restart,
    /// `fenced` (409): your session holds the route, but not with this token.
    /// Retry: restart.
    Fenced = "fenced" => Restart,
    /// `lease_expired` (409): the lease is no longer held (also reported
    /// locally when a lease's deadline passed). Retry: restart.
    LeaseExpired = "lease_expired" => Restart,
    /// `invalid_cursor` (400): a malformed or forged cursor, or one of another
    /// selector or family. Retry: no (list from the first page).
    InvalidCursor = "invalid_cursor" => No,
    /// `cursor_expired` (410): the snapshot behind the cursor is gone. Retry:
    /// restart from the first page.
    CursorExpired = "cursor_expired" => Restart,
    /// `epoch_changed` (410): the cursor belongs to an earlier broker
    /// lifetime. Retry: restart (sessions, leases, views).
    EpochChanged = "epoch_changed" => Restart,
    /// `subscription_limit` (429): the session has 128 wildcard (1,024 in
    /// all) registrations (scope `session`), or the family its quota of
    /// streams or registrations (scope `family`), or the broker its cap
    /// (scope `broker`). Retry: no (unsubscribe or close streams first).
    SubscriptionLimit = "subscription_limit" => No,
    /// `inventory_unavailable` (503): no snapshot could be taken. Retry:
    /// backoff; never an empty result in disguise.
    InventoryUnavailable = "inventory_unavailable" => Backoff,
    /// `invalid_name` (400): an illegal fleet root, kind or spec name. Retry: no.
    InvalidName = "invalid_name" => No,
    /// `spec_not_found` (404): the fleet has no spec of that name. Retry: no.
    SpecNotFound = "spec_not_found" => No,
    /// `payload_too_large` (413): the body is above the operation's limit.
    /// Retry: no (send less).
    PayloadTooLarge = "payload_too_large" => No,
    /// `internal` (500): a broker bug. Retry: backoff; report it.
    Internal = "internal" => Backoff,
    /// `not_found` (404): no such path (wrong base URL?). Retry: no.
    NotFound = "not_found" => No,
    /// `method_not_allowed` (405): wrong method for the path. Retry: no.
    MethodNotAllowed = "method_not_allowed" => No,
    /// `not_implemented` (501): reserved. Retry: no.
    NotImplemented = "not_implemented" => No,
    /// `unavailable` (503): the broker is shutting down or a gateway answered
    /// 502/503/504 without a problem body. Retry: backoff.
    Unavailable = "unavailable" => Backoff,
    /// `session_limit` (429): the broker holds its maximum of live sessions
    /// (scope `broker`), or the caller's family its quota (scope `family`).
    /// Retry: backoff.
    SessionLimit = "session_limit" => Backoff,
    /// `spec_limit` (429): the fleet root holds its family's quota of specs
    /// (scope `root`). Retry: no (forget specs first).
    SpecLimit = "spec_limit" => No,
    /// `wrong_broker` (421): another broker of a multi-broker deployment
    /// serves the caller's family; the problem names it. Retry: restart (at
    /// the owner).
    WrongBroker = "wrong_broker" => Restart,
    /// `family_unavailable` (503): no broker serves the caller's family right
    /// now (a failover is in progress). Retry: backoff.
    FamilyUnavailable = "family_unavailable" => Backoff,
}

impl Error {
    /// True when the same request may succeed if retried with backoff
    /// ([`Retry::Backoff`]). A [`Retry::Restart`] error is not retryable as
    /// such: the state it relied on must be rebuilt first.
    pub fn is_retryable(&self) -> bool {
        self.advice() == Retry::Backoff
    }

    /// A local refusal with the `invalid_request` code.
    pub(crate) fn invalid_request(detail: impl Into<String>) -> Error {
        Error::InvalidRequest(Problem::local(detail))
    }

    /// The innermost cause of a lost lease or session (itself otherwise).
    pub fn cause(&self) -> &Error {
        match self {
            Error::LeaseLost(e) | Error::SessionLost(e) => e.cause(),
            e => e,
        }
    }
}

/// The message of this error alone, without its cause: a lost session or
/// lease, and a transport failure, give their cause as
/// [`source`](std::error::Error::source) (walk the chain, or use
/// [`Error::cause`], to show it), as the Rust API guidelines ask.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (Some(code), Some(p)) = (self.code(), self.problem()) {
            return if p.detail.is_empty() {
                write!(f, "muster: {code}")
            } else {
                write!(f, "muster: {code}: {}", p.detail)
            };
        }
        match self {
            Error::Closed => f.write_str("muster: closed"),
            // The cause is the source, not part of the message: a report
            // that walks the chain (anyhow's `{:#}`, tracing) shows it once.
            Error::SessionLost(_) => f.write_str("muster: session lost"),
            Error::LeaseLost(_) => f.write_str("muster: lease lost"),
            Error::Released => f.write_str("muster: lease released"),
            Error::StreamEnded {
                reason: Some(r), ..
            } => write!(f, "muster: watch stream ended: {r}"),
            Error::StreamEnded { detail, .. } => write!(f, "muster: watch stream ended: {detail}"),
            Error::Transport(_) => f.write_str("muster: transport error"),
            Error::Protocol(m) => write!(f, "muster: {m}"),
            _ => f.write_str("muster: error"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::SessionLost(e) | Error::LeaseLost(e) => Some(e.as_ref()),
            Error::Transport(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// The URL is dropped: paths of session operations carry the session id,
/// a secret that must not reach logs through an error message.
impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Error {
        Error::Transport(Arc::new(e.without_url()))
    }
}

/// The SDK's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The media type of a Content-Type header value, lowercase, without
/// parameters.
pub(crate) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The error for a non-success answer: the problem body's code when there is
/// one; otherwise a code derived from the status, so that a gateway's 502 is
/// still advised as retryable (as the Go SDK's `problemError`).
pub(crate) fn problem_error(status: u16, content_type: &str, body: &[u8]) -> Error {
    #[derive(serde::Deserialize)]
    struct Body {
        #[serde(default)]
        title: String,
        #[serde(default)]
        detail: String,
        #[serde(default)]
        code: String,
        #[serde(default)]
        scope: String,
        #[serde(default)]
        owner: String,
    }
    let mt = media_type(content_type);
    let title = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
        .to_string();
    if mt == "application/problem+json" || mt == "application/json" {
        if let Ok(b) = serde_json::from_slice::<Body>(body) {
            if !b.code.is_empty() {
                let title = if b.title.is_empty() { title } else { b.title };
                return Error::from_code(
                    &b.code,
                    Problem {
                        status,
                        title,
                        detail: b.detail,
                        scope: b.scope,
                        owner: b.owner,
                    },
                );
            }
        }
    }
    let code = match status {
        502..=504 => "unavailable",
        404 => "not_found",
        401 => "unauthenticated",
        403 => "forbidden",
        413 => "payload_too_large",
        _ => "internal",
    };
    let shown = String::from_utf8_lossy(&body[..body.len().min(200)]);
    Error::from_code(
        code,
        Problem {
            status,
            title,
            detail: format!("HTTP {status} without a problem body: {}", shown.trim()),
            scope: String::new(),
            owner: String::new(),
        },
    )
}

#[cfg(test)]
mod tests;
