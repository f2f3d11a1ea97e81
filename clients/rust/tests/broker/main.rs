//! The SDK against the real broker binary, started by the shared harness
//! (its broker URL directly, without the proxy). Every test works in its own
//! realm, so the tests may run in parallel on one broker: sessions and
//! leases (leases.rs), reads, watch streams and fleets (reads.rs), the
//! observer and the README's example (observer.rs).

#[path = "../common/mod.rs"]
mod common;
mod leases;
mod observer;
mod reads;

use common::{harness, tokens};
use muster_client::{AcquireOptions, Client};
use std::time::Duration;

pub(crate) const MS: fn(u64) -> Duration = Duration::from_millis;

pub(crate) async fn client(token: &str) -> Client {
    let h = harness();
    let secret = tokens(h).await[token].clone();
    Client::builder(&h.broker).token(secret).build().unwrap()
}

pub(crate) fn no_wait() -> AcquireOptions {
    AcquireOptions::default()
}
