//! Unit tests of `observe.rs`.

use super::*;
use crate::watch::Change;
use crate::wire::ChangeKind;

#[test]
fn options_are_validated_with_the_go_messages() {
    assert_eq!(
        ObserveOptions::default().validate().unwrap(),
        Duration::from_secs(60)
    );
    assert_eq!(
        ObserveOptions::default()
            .shortest_ttl(Duration::from_secs(30))
            .validate()
            .unwrap(),
        Duration::from_secs(15)
    );
    assert_eq!(
        ObserveOptions::default()
            .reconcile_interval(Duration::from_millis(10))
            .validate()
            .unwrap(),
        Duration::from_millis(10)
    );
    let bad = ObserveOptions::default()
        .reconcile_interval(Duration::from_millis(9))
        .reconcile_jitter(1.0)
        .page_size(0);
    match bad.validate() {
        Err(Error::InvalidRequest(p)) => assert_eq!(
            p.detail,
            "Observe: the reconciliation interval must be at least 10ms; \
             the reconciliation jitter must be in [0, 1); the page size must be in 1..500"
        ),
        other => panic!("{other:?}"),
    }
    for j in [-0.1, f64::NAN] {
        assert!(ObserveOptions::default()
            .reconcile_jitter(j)
            .validate()
            .is_err());
    }
    assert!(ObserveOptions::default().page_size(501).validate().is_err());
    assert!(ObserveOptions::default().page_size(500).validate().is_ok());
}

/// A server that answers every request 503 with a problem body: the
/// only stand-in for a broker in these tests (the real broker cannot be
/// made to fail every request); it counts the requests.
async fn always_unavailable() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ln = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", ln.local_addr().unwrap());
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = ln.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => head.extend_from_slice(&buf[..k]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
                let body = r#"{"type":"about:blank","title":"Service Unavailable","status":503,"code":"unavailable","detail":"down"}"#;
                let resp = format!(
                    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    (url, n)
}

/// Failed bootstraps back off from 50 ms doubling to 2 s, jittered into
/// [d/2, d], one at a time: in 1.2 s that is 5 or 6 attempts (4 on a
/// loaded machine), never a burst. The error is kept, the observer goes
/// on (unavailable is not fatal).
#[tokio::test]
async fn failed_bootstraps_back_off() {
    use std::sync::atomic::Ordering;
    let (url, n) = always_unavailable().await;
    let o = Client::new(&url)
        .unwrap()
        .observe("lease://a/b/*", ObserveOptions::default())
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let requests = n.load(Ordering::SeqCst);
    let st = o.stats();
    assert!((4..=6).contains(&requests), "{requests} requests in 1.2 s");
    assert_eq!(st.attempts as usize, requests, "{st:?}");
    assert_eq!(st.bootstraps, 0);
    assert!(!o.is_ready());
    assert!(
        matches!(o.error(), Some(Error::Unavailable(_))),
        "{:?}",
        o.error()
    );
    o.close().await;
    assert!(matches!(o.error(), Some(Error::Closed)));
    let after = n.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(n.load(Ordering::SeqCst), after, "requests after close");
}

fn item(route: &str, owner: u8) -> Item {
    Item {
        route: route.to_string(),
        owner_id: format!("w{owner}"),
        holder_incarnation: format!("h{owner}"),
        acquired_at: time::OffsetDateTime::UNIX_EPOCH,
        expires_at: time::OffsetDateTime::UNIX_EPOCH,
        remaining_ms: 0,
        renewals: 0,
    }
}

proptest::proptest! {
    /// Whatever the history of changes and wherever the marker falls in
    /// it, the snapshot at the marker plus the buffered changes after it
    /// install as the held set after the whole history, at its last
    /// revision.
    #[test]
    fn install_is_the_state_after_the_whole_history(
        history in proptest::collection::vec((0u8..6, proptest::option::of(0u8..4)), 0..60),
        marker in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        // Change i has revision i+1: route r{n} acquired by w{o}, or released.
        let changes: Vec<Change> = history.iter().enumerate().map(|(i, (n, owner))| {
            let route = format!("lease://a/b/r{n}");
            Change {
                selector: "lease://a/b/*".into(),
                kind: if owner.is_some() { ChangeKind::Acquired } else { ChangeKind::Released },
                item: owner.map(|o| item(&route, o)),
                route,
                revision: i as i64 + 1,
            }
        }).collect();
        let cut = marker.index(changes.len() + 1);
        let none = Faults::default();
        let mut snapshot = BTreeMap::new();
        for ch in &changes[..cut] {
            apply_change(&mut snapshot, ch.clone(), &none);
        }
        let mut want = snapshot.clone();
        for ch in &changes[cut..] {
            apply_change(&mut want, ch.clone(), &none);
        }
        let buf = changes[cut..].to_vec();
        let (got, rev) = install(snapshot, buf, cut as i64, &none);
        proptest::prop_assert_eq!(got, want);
        proptest::prop_assert_eq!(rev, changes.len() as i64);
    }
}

#[tokio::test]
async fn invalid_options_start_nothing() {
    let c = Client::new("http://127.0.0.1:9").unwrap();
    let r = c.observe("lease://a/b/*", ObserveOptions::default().page_size(0));
    assert!(matches!(r, Err(Error::InvalidRequest(_))));
}
