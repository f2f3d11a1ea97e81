//! The SDK against the real broker binary, started by the shared harness
//! (its broker URL directly, without the proxy). Every test works in its own
//! realm, so the tests may run in parallel on one broker.

mod common;

use common::{harness, tokens};
use muster_client::prelude::*;
use muster_client::{AcquireOptions, ChangeKind, Client, Error, ObserveOptions, Retry};
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;

async fn client(token: &str) -> Client {
    let h = harness();
    let secret = tokens(h).await[token].clone();
    Client::builder(&h.broker).token(secret).build().unwrap()
}

fn no_wait() -> AcquireOptions {
    AcquireOptions::default()
}

#[tokio::test]
async fn session_and_lease_lifecycle() {
    let c = client("a").await;
    let s = c
        .new_session("worker-1", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(s.owner_id(), "worker-1");
    assert_eq!(s.id().len(), 32);
    assert!(!c.epoch().is_empty());
    assert_eq!(c.epoch(), s.epoch());
    let route = "lease://life/r/doc-1";
    let l = s
        .acquire(route, Duration::from_secs(10), no_wait())
        .await
        .unwrap();
    assert!(l.fencing_token() > 0);
    assert_eq!(l.route(), route);
    let st = c.get(route).await.unwrap();
    assert!(st.held);
    assert_eq!(
        st.holder_incarnation.as_deref(),
        Some(s.holder_incarnation())
    );
    // Already held by this session: the same handle.
    let again = s
        .acquire(route, Duration::from_secs(10), no_wait())
        .await
        .unwrap();
    assert_eq!(again.fencing_token(), l.fencing_token());
    // Another session: lease_held, then wait_timeout with a short wait.
    let other = c
        .new_session("worker-2", Duration::from_secs(10))
        .await
        .unwrap();
    let e = other
        .acquire(route, Duration::from_secs(10), no_wait())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::LeaseHeld(_)), "{e:?}");
    assert!(e.is_retryable());
    let e = other
        .acquire(route, Duration::from_secs(10), no_wait().wait(MS(200)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::WaitTimeout(_)), "{e:?}");
    l.extend(Duration::from_secs(10)).await.unwrap();
    assert_eq!(l.renewals(), 1);
    // A waiter is granted when the holder releases.
    let waiter = {
        let other = &other;
        async move {
            other
                .acquire(
                    route,
                    Duration::from_secs(10),
                    no_wait().wait(Duration::from_secs(5)),
                )
                .await
        }
    };
    let release = async {
        tokio::time::sleep(MS(200)).await;
        l.release().await
    };
    let (granted, released) = tokio::join!(waiter, release);
    released.unwrap();
    let granted = granted.unwrap();
    assert!(granted.fencing_token() > l.fencing_token());
    assert!(l.lost().is_cancelled());
    assert!(matches!(l.error(), Some(Error::Released)));
    l.release().await.unwrap(); // harmless
    assert!(matches!(
        l.extend(Duration::from_secs(1)).await,
        Err(Error::Released)
    ));
    // The route is the waiter's now.
    let e = s
        .acquire(route, Duration::from_secs(10), no_wait())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::LeaseHeld(_)));
    other.close().await.unwrap();
    assert!(granted.lost().is_cancelled());
    match granted.error() {
        Some(Error::LeaseLost(cause)) => assert!(matches!(*cause, Error::Closed)),
        e => panic!("{e:?}"),
    }
    assert!(
        !c.get(route).await.unwrap().held,
        "closing the session released it"
    );
    s.close().await.unwrap();
    assert!(matches!(s.error(), Some(Error::Closed)));
    let e = s
        .acquire(route, Duration::from_secs(1), no_wait())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Closed));
}

#[tokio::test]
async fn a_lease_is_lost_at_its_local_deadline_without_extension() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    let l = s
        .acquire("lease://deadline/r/x", MS(300), no_wait())
        .await
        .unwrap();
    let t0 = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), l.lost().cancelled())
        .await
        .expect("lost at its deadline");
    // The deadline is 300 ms after the request was sent: not before
    // (minus the answer's trip), and not much later (a loaded machine).
    let at = t0.elapsed();
    assert!(at >= MS(200) && at <= MS(800), "lost after {at:?}");
    assert!(matches!(l.error().unwrap().cause(), Error::LeaseExpired(_)));
    // Once lost, an extension is refused.
    let e = l.extend(MS(300)).await.unwrap_err();
    assert!(matches!(e, Error::LeaseLost(_)));
    s.close().await.unwrap();
}

/// A session the broker no longer knows is lost at its next keepalive, and
/// its leases with it.
#[tokio::test]
async fn a_session_ended_elsewhere_is_lost_with_its_leases() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(1)).await.unwrap();
    let l = s
        .acquire("lease://lost/r/x", Duration::from_secs(10), no_wait())
        .await
        .unwrap();
    let h = harness();
    let del = reqwest::Client::new()
        .delete(format!("{}/v1/sessions/{}", h.broker, s.id()))
        .bearer_auth(&tokens(h).await["a"])
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 204);
    tokio::time::timeout(Duration::from_secs(2), s.ended().cancelled())
        .await
        .expect("lost at the next keepalive");
    match s.error() {
        Some(Error::SessionLost(cause)) => assert!(matches!(*cause, Error::SessionNotFound(_))),
        e => panic!("{e:?}"),
    }
    assert!(l.lost().is_cancelled());
    assert!(matches!(
        l.error().unwrap().cause(),
        Error::SessionNotFound(_)
    ));
    assert_eq!(s.error().unwrap().advice(), muster_client::Retry::Restart);
    l.release().await.unwrap(); // known not held: nothing to do
    s.close().await.unwrap();
}

/// Dropping a session stops its keepalive and loses its leases locally at
/// once; the broker ends it (and releases the leases) at its TTL.
#[tokio::test]
async fn dropping_a_session_ends_it_at_its_ttl() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(1)).await.unwrap();
    let route = "lease://dropped/r/x";
    let l = s
        .acquire(route, Duration::from_secs(30), no_wait())
        .await
        .unwrap();
    drop(s);
    assert!(l.lost().is_cancelled());
    assert!(matches!(l.error().unwrap().cause(), Error::Closed));
    assert!(c.get(route).await.unwrap().held, "no DELETE was sent");
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.get(route).await.unwrap().held {
        assert!(
            Instant::now() < deadline,
            "the broker never ended the dropped session"
        );
        tokio::time::sleep(MS(100)).await;
    }
}

#[tokio::test]
async fn keepalives_keep_a_short_session_alive() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(1)).await.unwrap();
    let l = s
        .acquire(
            "lease://keepalive/r/held",
            Duration::from_secs(30),
            no_wait(),
        )
        .await
        .unwrap();
    // What a caller can do with the signals cannot end the session or the
    // lease (the SDK's own token handed out used to stop the keepalive).
    s.ended().child_token().cancel();
    l.lost().child_token().cancel();
    tokio::time::sleep(MS(2500)).await;
    assert!(s.error().is_none() && !s.ended().is_cancelled());
    assert!(l.error().is_none() && !l.lost().is_cancelled());
    s.acquire("lease://keepalive/r/x", Duration::from_secs(1), no_wait())
        .await
        .expect("the session is still alive after 2.5 TTLs");
    // A temporary signal in select! (E0716 while it was the token itself).
    let released = async {
        tokio::time::sleep(MS(50)).await;
        l.release().await
    };
    tokio::select! {
        _ = l.lost() => panic!("lost before the release"),
        r = released => r.unwrap(),
    }
    tokio::time::timeout(Duration::from_secs(1), l.lost().cancelled())
        .await
        .expect("fired by the release");
    s.close().await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), s.ended())
        .await
        .expect("fired by the close");
}

#[tokio::test]
async fn with_lease_renews_and_releases() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    let route = "lease://withlease/r/x";
    let renewals = s
        .with_lease(route, MS(600), no_wait(), |l| async move {
            tokio::time::sleep(MS(1300)).await;
            assert!(l.error().is_none());
            Ok::<_, Error>(l.renewals())
        })
        .await
        .unwrap();
    assert!(renewals >= 2, "{renewals} renewals");
    assert!(!c.get(route).await.unwrap().held, "released after the work");
    s.close().await.unwrap();
}

#[tokio::test]
async fn with_lease_reports_a_loss_even_when_the_work_succeeded() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    let work = s.with_lease(
        "lease://withlease/r/lost",
        Duration::from_secs(10),
        no_wait(),
        |l| async move {
            l.lost().cancelled().await; // stops when the lease is lost
            Ok::<_, Error>(())
        },
    );
    let end = async {
        tokio::time::sleep(MS(100)).await;
        s.close().await
    };
    let (r, closed) = tokio::join!(work, end);
    closed.unwrap();
    assert!(matches!(r, Err(Error::LeaseLost(_))), "{r:?}");
}

#[tokio::test]
async fn list_pages_one_snapshot_and_checks_its_input() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    for i in 0..7 {
        s.acquire(
            &format!("lease://listing/r/doc-{i}"),
            Duration::from_secs(10),
            no_wait(),
        )
        .await
        .unwrap();
    }
    let opts = muster_client::ListOptions {
        limit: 2,
        cursor: None,
    };
    let items: Vec<_> = c.list("lease://listing/r/*", opts).collect().await;
    let routes: Vec<String> = items.into_iter().map(|i| i.unwrap().route).collect();
    let want: Vec<String> = (0..7)
        .map(|i| format!("lease://listing/r/doc-{i}"))
        .collect();
    assert_eq!(routes, want);
    let p = c
        .list_page("lease://listing/r/doc-3", &Default::default())
        .await
        .unwrap();
    assert_eq!(p.items.len(), 1);
    assert_eq!(p.next_cursor, None);
    assert_eq!(p.items[0].owner_id, "w");
    let e = c
        .list_page("lease://listing/r/**x", &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidSelector(_)), "{e:?}");
    let bad = muster_client::ListOptions {
        limit: 2,
        cursor: Some("bm90LWEtY3Vyc29y".into()),
    };
    let e = c.list_page("lease://listing/r/*", &bad).await.unwrap_err();
    assert!(matches!(e, Error::InvalidCursor(_)), "{e:?}");
    // The stream yields the error once, then ends.
    let mut errs = std::pin::pin!(c.list("lease://listing/r/*", bad));
    assert!(errs.next().await.unwrap().is_err());
    assert!(errs.next().await.is_none());
    s.close().await.unwrap();
}

#[tokio::test]
async fn watch_streams_changes_and_ends_with_a_terminal_event() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    let sel = "lease://watching/r/*";
    let mut sub = c.watch(&[sel]).await.unwrap();
    let m = sub.marker().clone();
    assert_eq!(m.selectors.len(), 1);
    assert_eq!(m.selectors[0].selector, sel);
    let l = s
        .acquire("lease://watching/r/a", Duration::from_secs(10), no_wait())
        .await
        .unwrap();
    let ch = sub.next().await.unwrap().unwrap();
    assert_eq!(
        (ch.kind, ch.route.as_str(), ch.selector.as_str()),
        (ChangeKind::Acquired, "lease://watching/r/a", sel)
    );
    assert!(ch.revision > m.revision);
    assert_eq!(ch.item.unwrap().holder_incarnation, s.holder_incarnation());
    l.release().await.unwrap();
    let ch = sub.next().await.unwrap().unwrap();
    assert_eq!(ch.kind, ChangeKind::Released);
    assert!(ch.item.is_none());
    let e = sub.unsubscribe(sel).await.unwrap_err();
    assert!(
        matches!(e, Error::InvalidRequest(_)),
        "a session-less stream: {e:?}"
    );
    // A session stream ends with `unsubscribed` when its registration goes.
    let mut own = s.watch(&[sel]).await.unwrap();
    own.unsubscribe(sel).await.unwrap();
    match own.next().await {
        Some(Err(Error::StreamEnded {
            reason: Some(r), ..
        })) => assert_eq!(r, "unsubscribed"),
        other => panic!("{other:?}"),
    }
    assert!(own.next().await.is_none());
    let e = c.watch(&[]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidSelector(_)));
    s.close().await.unwrap();
}

#[tokio::test]
async fn fleet_register_desired_sweep_plan_gap() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Repo {
        topic: String,
    }
    let c = client("b").await;
    let root = format!("sdk-rust/f{}", std::process::id());
    let f = c.fleet(&root);
    let mut names = Vec::new();
    for spec in [
        serde_json::json!({"topic": "a"}),
        serde_json::json!({"topic": "b"}),
        serde_json::json!({"nope": 1}),
    ] {
        names.push(f.register("repo", &spec).await.unwrap().name);
    }
    assert!(names[0].starts_with("repo-"));
    let got = f.get(&names[1]).await.unwrap();
    assert_eq!(got.spec.get(), r#"{"topic":"b"}"#);
    let all: Vec<_> = f.desired().collect().await;
    assert_eq!(all.len(), 3);
    let swept = f
        .sweep(|raw| serde_json::from_str::<Repo>(raw.get()))
        .await
        .unwrap();
    assert_eq!(swept.kept.len(), 2);
    assert_eq!(swept.kept[0].spec, Repo { topic: "a".into() });
    assert_eq!(swept.dropped, vec![names[2].clone()]);
    let e = f.get(&names[2]).await.unwrap_err();
    assert!(matches!(e, Error::SpecNotFound(_)), "{e:?}");
    let e = f.forget("Repo-1").await.unwrap_err();
    assert!(matches!(e, Error::InvalidName(_)), "{e:?}");
    let p = f
        .plan(&["x".into(), "y".into()], &["y".into(), "z".into()])
        .await
        .unwrap();
    assert_eq!(
        (p.missing, p.orphans),
        (vec!["x".to_string()], vec!["z".to_string()])
    );
    // Gap against live leases whose resource is the spec name.
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    s.acquire(
        &format!("lease://gap{}/r/{}", std::process::id(), names[0]),
        Duration::from_secs(10),
        no_wait(),
    )
    .await
    .unwrap();
    s.acquire(
        &format!("lease://gap{}/r/orphan-1", std::process::id()),
        Duration::from_secs(10),
        no_wait(),
    )
    .await
    .unwrap();
    let g = f
        .gap(&format!("lease://gap{}/r/*", std::process::id()))
        .await
        .unwrap();
    assert_eq!(g.missing, vec![names[1].clone()]);
    assert_eq!(g.orphans, vec!["orphan-1".to_string()]);
    assert!(g.revision > 0);
    f.forget(&names[0]).await.unwrap();
    f.forget(&names[0]).await.unwrap(); // absent: still fine
    s.close().await.unwrap();
}

/// A gap larger than one page (10,000 names a side) is read whole: 10,001
/// desired specs, one of them held, and one orphan that sorts after every
/// spec name, so that the plan needs the second page.
#[tokio::test]
async fn gap_reads_every_page() {
    let c = client("b").await;
    let pid = std::process::id();
    let f = c.fleet(&format!("sdk-rust/paged{pid}"));
    let mut names: Vec<String> = futures_util::stream::iter(0..10_001)
        .map(|_| {
            let f = f.clone();
            async move {
                f.register("job", &serde_json::json!({}))
                    .await
                    .unwrap()
                    .name
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    names.sort();
    let s = c.new_session("w", Duration::from_secs(30)).await.unwrap();
    let held = names.remove(5_000);
    for r in [held.as_str(), "zz-orphan"] {
        s.acquire(
            &format!("lease://paged{pid}/r/{r}"),
            Duration::from_secs(30),
            no_wait(),
        )
        .await
        .unwrap();
    }
    let g = f.gap(&format!("lease://paged{pid}/r/*")).await.unwrap();
    assert_eq!(g.missing.len(), 10_000);
    assert_eq!(g.missing, names);
    assert_eq!(g.orphans, vec!["zz-orphan".to_string()]);
    assert!(g.revision > 0);
    s.close().await.unwrap();
}

/// A limit (429) names the bound it hit: a session's 129th wildcard
/// registration is refused with `subscription_limit`, scope `session`.
#[tokio::test]
async fn a_limit_names_its_scope() {
    let c = client("a").await;
    let pid = std::process::id();
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    let mut subs = Vec::new();
    for w in 0..4 {
        let sels: Vec<String> = (0..32)
            .map(|i| format!("lease://scope{pid}/a{w}-{i}/*"))
            .collect();
        let refs: Vec<&str> = sels.iter().map(String::as_str).collect();
        subs.push(s.watch(&refs).await.unwrap());
    }
    let e = s
        .watch(&[&format!("lease://scope{pid}/over/*")])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::SubscriptionLimit(_)), "{e:?}");
    let p = e.problem().unwrap();
    assert_eq!((p.status, p.scope.as_str()), (429, "session"));
    assert_eq!(e.advice(), Retry::No);
    s.close().await.unwrap();
}

#[tokio::test]
async fn tokens_and_grants_are_typed_errors() {
    let h = harness();
    let bad = Client::builder(&h.broker)
        .token("no-such-token")
        .build()
        .unwrap();
    let e = bad
        .new_session("w", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unauthenticated(_)), "{e:?}");
    assert!(!e.is_retryable());
    let narrow = client("narrow").await;
    let e = narrow
        .list_page("lease://other/r/*", &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Forbidden(_)), "{e:?}");
    // An observer stops for good on an error no retry fixes.
    let o = narrow
        .observe("lease://other/r/*", ObserveOptions::default())
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), o.stopped())
        .await
        .expect("stopped");
    assert!(
        matches!(o.error(), Some(Error::Forbidden(_))),
        "{:?}",
        o.error()
    );
    assert!(matches!(o.ready().await, Err(Error::Forbidden(_))));
    let e = client("a").await.get("lease://a/*/c").await.unwrap_err();
    assert!(matches!(e, Error::InvalidRoute(_)), "{e:?}");
}

#[tokio::test]
async fn observer_follows_changes_and_counts_its_work() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    for i in 0..30 {
        s.acquire(
            &format!("lease://observing/r/d{i:02}"),
            Duration::from_secs(10),
            no_wait(),
        )
        .await
        .unwrap();
    }
    let o = c
        .observe(
            "lease://observing/r/*",
            ObserveOptions::default()
                .page_size(7)
                .reconcile_interval(MS(300))
                .reconcile_jitter(0.0),
        )
        .unwrap();
    assert_eq!(o.reconcile_every(), MS(300));
    tokio::time::timeout(Duration::from_secs(5), o.ready())
        .await
        .unwrap()
        .unwrap();
    let v = o.view();
    assert_eq!(v.items.len(), 30);
    assert!(
        v.items.windows(2).all(|w| w[0].route < w[1].route),
        "sorted by route"
    );
    let changed = o.changed();
    s.acquire(
        "lease://observing/r/new",
        Duration::from_secs(10),
        no_wait(),
    )
    .await
    .unwrap();
    tokio::time::timeout(Duration::from_secs(5), changed)
        .await
        .expect("a change");
    let deadline = Instant::now() + Duration::from_secs(5);
    while o.view().items.len() != 31 {
        assert!(
            Instant::now() < deadline,
            "the view never showed the new lease"
        );
        tokio::time::sleep(MS(20)).await;
    }
    tokio::time::sleep(MS(800)).await;
    let st = o.stats();
    assert!(st.reconciliations >= 2, "{st:?}");
    assert!(st.bootstraps >= 3, "{st:?}");
    assert_eq!(st.recoveries, 0, "{st:?}");
    assert!(o.is_ready());
    o.close().await;
    assert!(!o.is_ready());
    assert!(matches!(o.error(), Some(Error::Closed)));
    s.close().await.unwrap();
}

/// The next ready view of the stream, within 5 s.
async fn next_ready(
    views: &mut (impl Stream<Item = muster_client::View> + Unpin),
) -> muster_client::View {
    let fut = async {
        loop {
            let v = views.next().await.expect("the stream ended early");
            if v.ready {
                return v;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .expect("a ready view within 5 s")
}

/// `views()` yields the current view, then one per change, and ends after
/// the observer stopped.
#[tokio::test]
async fn observer_views_are_a_stream() {
    let c = client("a").await;
    let s = c.new_session("w", Duration::from_secs(10)).await.unwrap();
    s.acquire("lease://viewing/r/a", Duration::from_secs(10), no_wait())
        .await
        .unwrap();
    let o = c
        .observe("lease://viewing/r/*", ObserveOptions::default())
        .unwrap();
    let mut views = o.views();
    let first = views.next().await.expect("the current view at once");
    let v = if first.ready {
        first
    } else {
        next_ready(&mut views).await
    };
    assert_eq!(v.items.len(), 1, "{v:?}");
    s.acquire("lease://viewing/r/b", Duration::from_secs(10), no_wait())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = next_ready(&mut views).await;
        if v.items.len() == 2 {
            assert_eq!(v.items[1].route, "lease://viewing/r/b");
            break;
        }
        assert!(Instant::now() < deadline, "the new lease never showed");
    }
    // A second reader starts from the current view.
    let now = o.views().next().await.unwrap();
    assert_eq!(now.items.len(), 2);
    o.close().await;
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(2), views.collect::<Vec<_>>())
        .await
        .expect("the stream ends once the observer stopped");
    assert!(!rest.last().expect("the final view").ready);
    assert!(o.views().next().await.is_some_and(|v| !v.ready));
    s.close().await.unwrap();
}

/// A server that accepts and never answers: close is prompt anyway, and the
/// observer's socket does not outlive it.
#[tokio::test]
async fn observer_close_is_prompt_while_a_request_hangs() {
    use tokio::io::AsyncReadExt;
    let ln = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", ln.local_addr().unwrap());
    let c = Client::new(&url).unwrap();
    let o = c
        .observe("lease://hang/r/*", ObserveOptions::default())
        .unwrap();
    let (mut conn, _) = tokio::time::timeout(Duration::from_secs(5), ln.accept())
        .await
        .unwrap()
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("GET /v1/leases/watch?selector="));
    assert!(!o.is_ready());
    let t0 = Instant::now();
    o.close().await;
    assert!(t0.elapsed() < MS(500), "close took {:?}", t0.elapsed());
    let eof = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            if conn.read(&mut buf).await.unwrap_or(0) == 0 {
                break;
            }
        }
    })
    .await;
    assert!(
        eof.is_ok(),
        "the observer's connection is still open after close"
    );
}

/// The README's five-minute example is examples/five_minutes.rs, verbatim,
/// and it runs against the real broker.
#[tokio::test]
async fn the_readme_example_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(dir.join("examples/five_minutes.rs")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let body = example.split_once("\n\n").unwrap().1; // without its header comment
    assert!(
        readme.contains(body),
        "README.md does not show examples/five_minutes.rs"
    );
    // cargo test builds the examples next to the test binaries' deps/ folder.
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/five_minutes");
    let h = harness();
    let out = tokio::process::Command::new(&bin)
        .env("MUSTER_URL", &h.broker)
        .env("MUSTER_TOKEN", &tokens(h).await["a"])
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (a whole `cargo test` builds the examples; or `cargo build --examples`)",
                bin.display()
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "rendering doc-123 under fencing token ",
        "lease://acme/renderers/doc-456 held by worker-1 (",
        "listed lease://acme/renderers/doc-456",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(
        !stdout.contains("listed lease://acme/renderers/doc-123"),
        "released after the work"
    );
}
