//! Unit tests of `lease.rs`.

use crate::client::tests::fake_after;
use crate::{AcquireOptions, Client, Error};
use std::time::Duration;
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A lease's answer (`expires_at` years away on the wall clock, which
/// the local deadline must not read when the member is there).
fn grant(outcome: &str, expires_after_request_ms: Option<u64>) -> String {
    let member = expires_after_request_ms
        .map(|ms| format!(r#","expires_after_request_ms":{ms}"#))
        .unwrap_or_default();
    format!(
        r#"{{"route":"lease://acme/jobs/x","fencing_token":7,"acquired_at":"2030-01-01T00:00:00Z","expires_at":"2040-01-01T00:00:00Z","renewals":0,"outcome":"{outcome}"{member}}}"#
    )
}

/// A fake broker that creates sessions (TTL 60 s: no keepalive during a
/// test) and answers acquisitions (and batches) with `lease` after
/// `delay`.
async fn broker(delay: Duration, lease: String) -> Client {
    let (url, _) = fake_after(move |line| {
        let json = "application/json";
        if line.starts_with("POST /v1/sessions ") {
            let s = r#"{"session_id":"0123456789abcdef0123456789abcdef","holder_incarnation":"h1","owner_id":"w","ttl_ms":60000,"expires_at":"2040-01-01T00:00:00Z","epoch":"e1"}"#;
            (Duration::ZERO, (201, json, s.to_string()))
        } else if line.starts_with("POST /v1/leases/batch ") {
            let b = format!(
                r#"{{"results":[{{"op":"acquire","route":"lease://acme/jobs/x","ok":true,"lease":{lease}}}],"revision":9}}"#
            );
            (delay, (200, json, b))
        } else if line.contains("/acquire ") {
            (delay, (200, json, lease.clone()))
        } else {
            (Duration::ZERO, (204, json, String::new()))
        }
    })
    .await;
    Client::new(&url).unwrap()
}

/// Waits for the loss of `l` until `until`: whether it came.
async fn lost_by(l: &super::Lease, until: Instant) -> bool {
    tokio::time::timeout_at(until, l.lost().cancelled())
        .await
        .is_ok()
}

fn expired_locally(l: &super::Lease) -> bool {
    matches!(l.error(), Some(Error::LeaseLost(ref c)) if matches!(**c, Error::LeaseExpired(_)))
}

/// A grant after a wait of 900 ms for a TTL of 1 s: the broker's expiry
/// is 1.9 s after it took the request up. The lease stays held until
/// send + 1.9 s (send + TTL would lose it 100 ms after it arrived), and
/// is lost around then without an extension.
#[tokio::test]
async fn a_grant_after_a_wait_is_held_until_send_plus_expires_after_request() {
    let c = broker(MS(900), grant("acquired", Some(1900))).await;
    let s = c.new_session("w", Duration::from_secs(60)).await.unwrap();
    let t0 = Instant::now();
    let opts = AcquireOptions::default().wait(Duration::from_secs(5));
    let l = s
        .acquire("lease://acme/jobs/x", MS(1000), opts)
        .await
        .unwrap();
    assert!(t0.elapsed() >= MS(900), "answered after {:?}", t0.elapsed());
    // The deadline is send + 1.9 s and send came after t0: never before.
    assert!(
        !lost_by(&l, t0 + MS(1850)).await,
        "lost {:?} after the send: {:?}",
        t0.elapsed(),
        l.error()
    );
    assert!(lost_by(&l, t0 + MS(1900 + 1500)).await, "never lost");
    assert!(t0.elapsed() >= MS(1900), "lost after {:?}", t0.elapsed());
    assert!(expired_locally(&l), "{:?}", l.error());
    drop(s);
}

/// `already_held` whose grant has 400 ms left: lost then, whatever the
/// TTL asked and the broker's wall-clock `expires_at` say.
#[tokio::test]
async fn already_held_keeps_what_the_broker_says_is_left() {
    let c = broker(Duration::ZERO, grant("already_held", Some(400))).await;
    let s = c.new_session("w", Duration::from_secs(60)).await.unwrap();
    let t0 = Instant::now();
    let l = s
        .acquire("lease://acme/jobs/x", MS(10_000), AcquireOptions::default())
        .await
        .unwrap();
    assert!(!lost_by(&l, t0 + MS(380)).await, "lost early");
    assert!(lost_by(&l, t0 + MS(400 + 1500)).await, "never lost");
    assert!(expired_locally(&l), "{:?}", l.error());
}

/// An older broker sends no `expires_after_request_ms`: send + TTL.
#[tokio::test]
async fn without_the_member_the_deadline_is_send_plus_ttl() {
    let c = broker(Duration::ZERO, grant("acquired", None)).await;
    let s = c.new_session("w", Duration::from_secs(60)).await.unwrap();
    let t0 = Instant::now();
    let l = s
        .acquire("lease://acme/jobs/x", MS(500), AcquireOptions::default())
        .await
        .unwrap();
    assert!(!lost_by(&l, t0 + MS(480)).await, "lost early");
    assert!(lost_by(&l, t0 + MS(500 + 1500)).await, "never lost");
    assert!(expired_locally(&l), "{:?}", l.error());
}

/// A batch's acquisitions follow the same rule: `already_held` with
/// 1.2 s left of a grant for a longer TTL than the 200 ms asked.
#[tokio::test]
async fn a_batch_acquisition_is_held_until_send_plus_expires_after_request() {
    let c = broker(MS(300), grant("already_held", Some(1200))).await;
    let s = c.new_session("w", Duration::from_secs(60)).await.unwrap();
    let t0 = Instant::now();
    let mut b = s.batch();
    b.acquire("lease://acme/jobs/x", MS(200));
    let out = b.send().await.unwrap();
    let l = out[0].lease.clone().expect("a lease");
    assert!(!lost_by(&l, t0 + MS(1150)).await, "lost early");
    assert!(lost_by(&l, t0 + MS(1200 + 1500)).await, "never lost");
    assert!(expired_locally(&l), "{:?}", l.error());
}
