//! [`Batch`]: many lease operations of one session in one request, as the
//! Go SDK's `Session.Batch`.

use crate::client::Route;
use crate::error::{Error, Problem, Result};
use crate::lease::{adopt, ownership_gone, Lease};
use crate::session::Session;
use crate::wire::{BatchOp, BatchOpKind, BatchOpResult, BatchRequest, BatchResponse};
use reqwest::Method;
use std::time::Duration;
use tokio::time::Instant;

/// The most operations one batch may carry (the contract's
/// `BatchRequest.ops` `maxItems`).
pub const MAX_BATCH_OPS: usize = 256;

/// The outcome of one operation of a batch, in the order of the batch.
#[derive(Debug, Clone)]
pub struct BatchResult {
    /// `Acquire`, `Extend` or `Release`.
    pub op: BatchOpKind,
    /// The exact route.
    pub route: String,
    /// The handle: after a successful acquire the new one (or the same one,
    /// when this session already held the route); for an extend or a release
    /// the lease it was given. `None` after a failed acquire.
    pub lease: Option<Lease>,
    /// `None` on success; otherwise what the operation on its own
    /// ([`Session::acquire`], [`Lease::extend`], [`Lease::release`]) would
    /// have returned: the [`Error`] variant of the broker's code for that
    /// operation (`Error::LeaseHeld`, with its [`Error::advice`]), or the
    /// lease's loss ([`Error::LeaseLost`]).
    pub error: Option<Error>,
}

#[derive(Debug)]
struct Entry {
    op: BatchOpKind,
    route: Option<Route>, // None after a malformed route (the batch is refused)
    key: String,
    ttl: Duration,
    lease: Option<Lease>, // extend and release
}

/// Lease operations of one session — acquisitions (which never wait),
/// extensions and releases — applied by the broker in one request and one
/// step, in the order they were added. Build it with [`Session::batch`], send
/// it with [`Batch::send`] (Go: `Do`). Adding never fails: the first local
/// refusal is what `send` returns.
#[derive(Debug)]
pub struct Batch<'s> {
    s: &'s Session,
    ops: Vec<Entry>,
    err: Option<Error>,
}

impl Session {
    /// Starts an empty batch of this session's lease operations.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            s: self,
            ops: Vec::new(),
            err: None,
        }
    }
}

impl Batch<'_> {
    /// The number of operations added so far.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no operation was added.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Adds an acquisition of the exact route for `ttl` (100 ms .. 10 min).
    /// It never waits: when another session holds the route, its result is
    /// `Error::LeaseHeld`.
    pub fn acquire(&mut self, route: &str, ttl: Duration) -> &mut Self {
        let r = match Route::parse(route) {
            Ok(r) => Some(r),
            Err(e) => {
                self.refuse(e);
                None
            }
        };
        self.add(Entry {
            op: BatchOpKind::Acquire,
            route: r,
            key: route.to_string(),
            ttl,
            lease: None,
        })
    }

    /// Adds an extension of `lease` to now + `ttl`, as [`Lease::extend`].
    pub fn extend(&mut self, lease: &Lease, ttl: Duration) -> &mut Self {
        self.add_lease(BatchOpKind::Extend, lease, ttl)
    }

    /// Adds a release of `lease`, as [`Lease::release`].
    pub fn release(&mut self, lease: &Lease) -> &mut Self {
        self.add_lease(BatchOpKind::Release, lease, Duration::ZERO)
    }

    fn add_lease(&mut self, op: BatchOpKind, lease: &Lease, ttl: Duration) -> &mut Self {
        if !std::sync::Arc::ptr_eq(lease.session_inner(), &self.s.inner) {
            self.refuse(Error::invalid_request(
                "a batch takes only leases of its own session",
            ));
            return self;
        }
        self.add(Entry {
            op,
            route: Some(lease.parsed_route().clone()),
            key: lease.route().to_string(),
            ttl,
            lease: Some(lease.clone()),
        })
    }

    fn add(&mut self, e: Entry) -> &mut Self {
        if self.ops.len() == MAX_BATCH_OPS {
            self.refuse(Error::invalid_request(format!(
                "a batch has at most {MAX_BATCH_OPS} operations"
            )));
        }
        self.ops.push(e);
        self
    }

    fn refuse(&mut self, e: Error) {
        if self.err.is_none() {
            self.err = Some(e);
        }
    }

    /// Sends the batch and returns one result per operation, in order.
    ///
    /// It fails as a whole, and nothing was applied, when the batch was
    /// refused locally (no operation, more than [`MAX_BATCH_OPS`], a
    /// malformed route, a lease of another session: `InvalidRequest` or
    /// `InvalidRoute`) or by the broker (`SessionNotFound`: the session's
    /// leases are then lost, as with [`Lease::extend`]). On a transport error
    /// or a dropped future nothing is known: the leases stay as they were
    /// (retry before their deadline), and grants the broker made for a
    /// request that left are rolled back by the broker.
    ///
    /// Operations on leases already known to be lost are not sent: their
    /// results are what `extend` and `release` would give (the error, and
    /// `None` for a release).
    pub async fn send(&self) -> Result<Vec<BatchResult>> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        if self.ops.is_empty() {
            return Err(Error::invalid_request("a batch has at least one operation"));
        }
        let s = &self.s.inner;
        if let Some(e) = s.error() {
            return Err(e);
        }
        let mut out = Vec::with_capacity(self.ops.len());
        let mut ops = Vec::new();
        let mut sent = Vec::new();
        for (i, e) in self.ops.iter().enumerate() {
            let (done, err) = settled_locally(e);
            out.push(BatchResult {
                op: e.op,
                route: e.key.clone(),
                lease: e.lease.clone(),
                error: err,
            });
            if done {
                continue;
            }
            ops.push(BatchOp {
                op: e.op,
                route: e.key.clone(),
                ttl_ms: (e.op != BatchOpKind::Release).then_some(e.ttl.as_millis() as i64),
                fencing_token: e.lease.as_ref().map(Lease::fencing_token),
            });
            sent.push(i);
        }
        if sent.is_empty() {
            return Ok(out);
        }
        let c = &s.client;
        let body = BatchRequest {
            session_id: s.id.clone(),
            ops,
        };
        let t0 = Instant::now();
        let rb = c
            .request(Method::POST, c.url(&["v1", "leases", "batch"]))
            .json(&body);
        let resp: BatchResponse = match c.call_as(rb, 200, &**s).await {
            Ok(r) => r,
            Err(e) => {
                s.not_found(&e); // ends the session and every lease of it
                if matches!(e, Error::SessionNotFound(_)) {
                    for &i in &sent {
                        if let Some(l) = &self.ops[i].lease {
                            l.end(Error::LeaseLost(Box::new(e.clone())));
                        }
                    }
                }
                return Err(e);
            }
        };
        if resp.results.len() != sent.len() {
            return Err(Error::Internal(Problem::local(format!(
                "the broker answered {} results for {} operations",
                resp.results.len(),
                sent.len()
            ))));
        }
        for (r, &i) in resp.results.into_iter().zip(&sent) {
            settle(self.s, &self.ops[i], r, t0, &mut out[i]);
        }
        Ok(out)
    }
}

/// Whether the operation's outcome is already known without asking the
/// broker, as `Lease::extend` and `Lease::release` know it.
fn settled_locally(e: &Entry) -> (bool, Option<Error>) {
    let Some(l) = &e.lease else {
        return (false, None);
    };
    match (e.op, l.error()) {
        (BatchOpKind::Extend, Some(err)) => return (true, Some(err)),
        (BatchOpKind::Release, Some(_)) => return (true, None),
        _ => {}
    }
    if e.op == BatchOpKind::Release {
        if let Some(serr) = l.session_inner().error() {
            // The broker released it when the session ended.
            l.end(Error::LeaseLost(Box::new(serr)));
            return (true, None);
        }
    }
    (false, None)
}

/// Applies one broker result to the SDK's handles, as the single operation
/// would.
fn settle(s: &Session, e: &Entry, r: BatchOpResult, t0: Instant, out: &mut BatchResult) {
    let err = (!r.ok).then(|| result_error(&r));
    match e.op {
        BatchOpKind::Acquire => match (err, r.lease, &e.route) {
            (None, Some(grant), Some(route)) => {
                out.lease = Some(adopt(&s.inner, route.clone(), grant, t0, e.ttl));
            }
            (err, _, _) => out.error = err,
        },
        BatchOpKind::Extend => {
            let l = e.lease.as_ref().expect("an extend has a lease");
            match (err, r.lease) {
                (None, Some(grant)) => out.error = l.extended(&grant, t0, e.ttl).err(),
                (Some(err), _) if ownership_gone(&err) => {
                    l.end(Error::LeaseLost(Box::new(err)));
                    out.error = l.error();
                }
                (err, _) => out.error = err,
            }
        }
        BatchOpKind::Release => {
            let l = e.lease.as_ref().expect("a release has a lease");
            match err {
                None => l.end(Error::Released),
                Some(err) if ownership_gone(&err) => l.end(Error::LeaseLost(Box::new(err))),
                Some(err) => out.error = Some(err),
            }
        }
    }
}

/// The error of a failed result, as a problem body with the same code would
/// make it.
fn result_error(r: &BatchOpResult) -> Error {
    let status = r.status.unwrap_or(0);
    let title = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
        .to_string();
    Error::from_code(
        r.code.as_deref().unwrap_or("internal"),
        Problem {
            status,
            title,
            detail: r.detail.clone().unwrap_or_default(),
            scope: String::new(),
            owner: String::new(),
        },
    )
}
