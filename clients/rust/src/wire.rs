//! Wire types of `openapi.yaml`, hand-written with serde. Field names are the
//! contract's; times are RFC 3339 ([`time::OffsetDateTime`]). Responses are
//! decoded leniently (a newer broker may add members); requests are encoded
//! with exactly the contract's members. `tests/contract_examples.rs`
//! round-trips every example of the contract through these types.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;
use time::OffsetDateTime;

/// Body of `createSession`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSessionRequest {
    /// The application's logical owner (1..512 bytes).
    pub owner_id: String,
    /// Session TTL in milliseconds (1,000..600,000).
    pub ttl_ms: i64,
}

/// Answer of `createSession`. `session_id` is a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session id (32 lowercase hex digits): a secret capability.
    pub session_id: String,
    /// The session's public, opaque id, shown in inventory items.
    pub holder_incarnation: String,
    /// The logical owner.
    pub owner_id: String,
    /// The session TTL in milliseconds.
    pub ttl_ms: i64,
    /// When the session ends without a keepalive.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// The broker lifetime.
    pub epoch: String,
}

/// Answer of `keepaliveSession`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keepalive {
    /// The new expiry.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// The session TTL in milliseconds.
    pub ttl_ms: i64,
}

/// Body of `acquireLease`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquireRequest {
    /// The acquiring session (a secret).
    pub session_id: String,
    /// Lease TTL in milliseconds (100..600,000).
    pub ttl_ms: i64,
    /// How long to wait in the FIFO queue (0..30,000, default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<i64>,
}

/// Body of `extendLease`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtendRequest {
    /// The holding session.
    pub session_id: String,
    /// The current fencing token.
    pub fencing_token: i64,
    /// The new TTL in milliseconds, from now.
    pub ttl_ms: i64,
}

/// Body of `releaseLease`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRequest {
    /// The holding session.
    pub session_id: String,
    /// The current fencing token.
    pub fencing_token: i64,
}

/// The `outcome` of an acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A new grant with a new fencing token.
    Acquired,
    /// The session already held it: same token, TTL not reset.
    AlreadyHeld,
}

/// Answer of `acquireLease` and `extendLease` (schema `Lease`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGrant {
    /// The exact route.
    pub route: String,
    /// The broker revision of the grant.
    pub fencing_token: i64,
    /// When it was granted.
    #[serde(with = "time::serde::rfc3339")]
    pub acquired_at: OffsetDateTime,
    /// When it expires without an extension.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// Successful extensions so far.
    pub renewals: i64,
    /// Set on acquire only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Set on acquire only (absent from an older broker): how long after the
    /// broker took the request up the lease expires, in milliseconds, on the
    /// broker's monotonic clock: `ttl_ms` for a grant at once, the wait in
    /// the queue plus `ttl_ms` for a grant after a wait, what is left of the
    /// existing grant for `already_held`. The send time plus this is the
    /// SDK's local deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_after_request_ms: Option<i64>,
}

/// The kind of a batch operation (schema `BatchOpKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchOpKind {
    /// An acquisition that never waits.
    Acquire,
    /// An extension of a held lease.
    Extend,
    /// A release of a held lease.
    Release,
}

impl BatchOpKind {
    /// The contract's name: `acquire`, `extend` or `release`.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchOpKind::Acquire => "acquire",
            BatchOpKind::Extend => "extend",
            BatchOpKind::Release => "release",
        }
    }
}

impl std::fmt::Display for BatchOpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operation of `batchLeases` (schema `BatchOp`): `acquire` takes
/// `ttl_ms`, `extend` takes `fencing_token` and `ttl_ms`, `release` takes
/// `fencing_token`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchOp {
    /// The kind.
    pub op: BatchOpKind,
    /// The exact route.
    pub route: String,
    /// Lease TTL in milliseconds (acquire and extend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// The current fencing token (extend and release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<i64>,
}

/// Body of `batchLeases`: 1 to 256 operations of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRequest {
    /// The session (a secret).
    pub session_id: String,
    /// The operations, applied in order.
    pub ops: Vec<BatchOp>,
}

/// The outcome of one operation of a batch (schema `BatchResult`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchOpResult {
    /// The kind.
    pub op: BatchOpKind,
    /// The route.
    pub route: String,
    /// Whether the operation succeeded.
    pub ok: bool,
    /// The holding after a successful acquire or extend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseGrant>,
    /// The error code on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The status the operation's own endpoint would answer, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Answer of `batchLeases` (schema `BatchResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResponse {
    /// One per operation, in order.
    pub results: Vec<BatchOpResult>,
    /// The broker revision after the batch.
    pub revision: i64,
}

/// Answer of `getLease`: the state of one route, never a session id or a
/// fencing token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseStatus {
    /// The exact route.
    pub route: String,
    /// Whether someone holds it.
    pub held: bool,
    /// The holder's logical owner, when held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// The holder session's public id, when held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_incarnation: Option<String>,
    /// When it was granted, when held.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub acquired_at: Option<OffsetDateTime>,
    /// When it expires, when held.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<OffsetDateTime>,
    /// Remaining TTL in milliseconds, when held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_ms: Option<i64>,
    /// Extensions so far, when held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewals: Option<i64>,
    /// Queued acquisitions.
    pub waiters: i64,
}

/// One held lease as observed through LIST, a watch marker or a change event
/// (schema `LeaseItem`): a plain, read-only value. It carries no fencing
/// token and no session id, and nothing in this crate turns an `Item` into a
/// [`Lease`](crate::Lease); only [`Session::acquire`](crate::Session::acquire)
/// grants one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The concrete route, `lease://realm/area/resource`.
    pub route: String,
    /// The holder session's logical owner.
    pub owner_id: String,
    /// Opaque id of the holder session (new after reconnect or restart).
    pub holder_incarnation: String,
    /// When it was granted.
    #[serde(with = "time::serde::rfc3339")]
    pub acquired_at: OffsetDateTime,
    /// When it expires without an extension, as of this record.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// Remaining TTL in milliseconds when the broker produced the item.
    pub remaining_ms: i64,
    /// Extensions so far.
    pub renewals: i64,
}

impl Item {
    /// The remaining TTL when the broker produced the item.
    pub fn remaining(&self) -> Duration {
        Duration::from_millis(self.remaining_ms.max(0) as u64)
    }
}

/// The snapshot a LIST page was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The broker lifetime.
    pub epoch: String,
    /// The broker revision of the snapshot.
    pub revision: i64,
}

/// Answer of `listLeases`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeasePage {
    /// Held leases in route order.
    pub items: Vec<Item>,
    /// Absent (or null) on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The snapshot the page was read from.
    pub snapshot: Snapshot,
}

/// How the held set changed for a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A free route was granted: `item` is the new holder.
    Acquired,
    /// The holder released it.
    Released,
    /// Its TTL passed.
    Expired,
    /// The holder's session ended.
    SessionClosed,
    /// A grant that could not be handed to its requester was undone.
    RolledBack,
    /// A kind this SDK does not know (a newer broker): it removes the route,
    /// like every kind but `acquired`.
    #[serde(other)]
    Unknown,
}

/// One selector's part of a snapshot marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchSubscription {
    /// The subscription id (kept when a duplicate open supersedes a stream).
    pub id: String,
    /// The selector as given.
    pub selector: String,
    /// The first page of the selector's snapshot.
    pub items: Vec<Item>,
    /// Pages the rest of this selector's snapshot through `listLeases`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Data of `event: snapshot`, always the first event of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotEvent {
    /// The broker lifetime.
    pub epoch: String,
    /// The revision of the snapshot; every later change has a higher one.
    pub revision: i64,
    /// One entry per selector, in the order given.
    pub subscriptions: Vec<WatchSubscription>,
}

/// Data of `event: change`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeEvent {
    /// The registration that matched.
    pub subscription_id: String,
    /// The route that changed.
    pub route: String,
    /// How it changed.
    pub kind: ChangeKind,
    /// The broker revision of the change.
    pub revision: i64,
    /// The new holder for `acquired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<Item>,
}

/// Data of the terminal events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamEndEvent {
    /// `overflow`, `superseded`, `unsubscribed`, `session_closed` or `shutdown`.
    pub reason: String,
    /// The revision at which the broker ended the stream (not on `overflow`
    /// and `shutdown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
}

/// Body of `registerSpec`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegisterRequest {
    /// One legal segment: lowercase letters, digits, `-`, `_`.
    pub kind: String,
    /// Any JSON value up to 64 KiB, stored exactly as given.
    pub spec: Box<RawValue>,
}

/// One entry of a fleet's desired set (schema `SpecRow`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    /// The minted name, `<kind>-<n>`.
    pub name: String,
    /// The spec exactly as registered.
    pub spec: Box<RawValue>,
}

/// Answer of `listSpecs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpecPage {
    /// Specs in name order.
    pub items: Vec<Spec>,
    /// Absent (or null) on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Body of `sweepSpecs` (the broker-side sweep by JSON Schema).
#[cfg(test)] // a contract shape the SDK never sends nor reads: the round-trip tests only
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepRequest {
    /// A JSON Schema every kept spec satisfies.
    pub schema: Box<RawValue>,
}

/// Answer of `sweepSpecs`.
#[cfg(test)] // a contract shape the SDK never sends nor reads: the round-trip tests only
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepAnswer {
    /// The specs kept.
    pub kept: Vec<Spec>,
    /// The names dropped.
    pub dropped: Vec<String>,
}

/// Body of `planFleet`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRequest {
    /// The desired names.
    pub desired: Vec<String>,
    /// The live names.
    pub live: Vec<String>,
}

/// Answer of `planFleet`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanAnswer {
    /// Desired and not live.
    pub missing: Vec<String>,
    /// Live and not desired.
    pub orphans: Vec<String>,
}

/// Answer of `fleetGap`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapAnswer {
    /// Desired and not live.
    pub missing: Vec<String>,
    /// Live and not desired.
    pub orphans: Vec<String>,
    /// The inventory revision the live set was read at.
    pub revision: i64,
    /// Resumes after the last name this page covered; absent (or null) on
    /// the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Answer of `healthz` and `readyz`.
#[cfg(test)] // a contract shape the SDK never sends nor reads: the round-trip tests only
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// `ok` or `ready`.
    pub status: String,
    /// The broker lifetime.
    pub epoch: String,
    /// Whether the broker runs without tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev_mode: Option<bool>,
}

/// An RFC 9457 problem body (schema `Problem`).
#[cfg(test)] // a contract shape the SDK never sends nor reads: the round-trip tests only
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemBody {
    /// `about:blank`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The status's text.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The stable code.
    pub code: String,
    /// On a limit (429), which bound was hit (`broker`, `family`, `session`,
    /// `route`, `root`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}
