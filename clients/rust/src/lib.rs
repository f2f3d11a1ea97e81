//! Rust SDK of Muster, the lease broker for worker fleets: sessions, exact
//! leases with fencing tokens, LIST, watch streams, the inventory
//! [`Observer`] and the fleet helpers. It mirrors the Go SDK (`clients/go`)
//! in behaviour, option names, defaults and validation messages.
//!
//! Everything is async on tokio; calls that start background work
//! ([`Client::new_session`], [`Session::acquire`], [`Client::observe`]) must
//! run inside a tokio runtime (they panic outside one, as `tokio::spawn`
//! does). `Client`, `Session`, `Lease`, `Observer` and `Fleet` are `Send +
//! Sync` (a `Subscription` is `Send`): share a `Session`, `Lease` or
//! `Observer` between tasks by reference or in an `Arc`.
//!
//! ```no_run
//! use muster_client::{AcquireOptions, Client, ObserveOptions};
//! use std::time::Duration;
//!
//! # async fn demo() -> muster_client::Result<()> {
//! let client = Client::builder("http://127.0.0.1:7420").token("secret").build()?;
//! let session = client.new_session("worker-1", Duration::from_secs(30)).await?;
//! let lease = session
//!     .acquire("lease://acme/renderers/doc-1", Duration::from_secs(15), AcquireOptions::default())
//!     .await?;
//! println!("holding {} with token {}", lease.route(), lease.fencing_token());
//! lease.release().await?;
//!
//! let observer = client.observe("lease://acme/renderers/*", ObserveOptions::default())?;
//! observer.ready().await?;
//! println!("{} leases held", observer.view().items.len());
//! observer.close().await;
//! session.close().await?;
//! # Ok(()) }
//! ```
//!
//! The observer's semantics, the reconciliation default and the retry advice
//! per error code are those of `docs/client-operations.md`.
#![deny(missing_docs)]

mod backoff;
mod batch;
mod client;
#[cfg(test)]
mod contract_tests;
#[cfg(doctest)]
mod doctests;
pub mod error;
mod faults;
mod fleet;
mod lease;
mod list;
mod loss;
mod observe;
mod session;
mod signal;
mod sse;
#[cfg(feature = "rustls")]
mod tls;
mod transport;
mod watch;
mod wire;

pub use backoff::{reconcile_interval, DEFAULT_RECONCILE_JITTER, MAX_RECONCILE, MIN_RECONCILE};
pub use batch::{Batch, BatchResult, MAX_BATCH_OPS};
pub use client::{Client, ClientBuilder, MAX_FOLLOWS};
pub use error::{Error, Problem, Result, Retry, CODES};
#[cfg(feature = "test-util")]
pub use faults::Faults;
pub use fleet::{Fleet, Kept, Plan, SweepResult};
pub use lease::{AcquireOptions, Lease};
pub use list::{ListOptions, Page};
pub use observe::{ObserveOptions, Observer, ObserverStats, View};
pub use session::Session;
pub use signal::Signal;
pub use tokio_util::sync::CancellationToken;
pub use watch::{Change, Marker, MarkerPage, Subscription};
pub use wire::{BatchOpKind, ChangeKind, Item, LeaseStatus, Spec};

/// The traits a caller of this crate needs in scope, so that iterating a
/// LIST, a watch stream or the observer's views needs no dependency besides
/// this crate and tokio: `use muster_client::prelude::*;`.
///
/// ```no_run
/// use muster_client::prelude::*;
///
/// # async fn demo(client: muster_client::Client) -> muster_client::Result<()> {
/// let mut items = std::pin::pin!(client.list("lease://acme/**", Default::default()));
/// while let Some(item) = items.next().await {
///     println!("{}", item?.route);
/// }
/// let routes: Vec<String> = client
///     .list("lease://acme/**", Default::default())
///     .map_ok(|item| item.route)
///     .try_collect()
///     .await?;
/// # let _ = routes;
/// # Ok(()) }
/// ```
pub mod prelude {
    pub use futures_core::Stream;
    pub use futures_util::{StreamExt, TryStreamExt};
}

#[cfg(test)]
mod tests {
    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_are_send_and_sync() {
        send_sync::<crate::Client>();
        send_sync::<crate::Session>();
        send_sync::<crate::Lease>();
        send_sync::<crate::Observer>();
        send_sync::<crate::Fleet>();
        send_sync::<crate::Error>();
    }
}
