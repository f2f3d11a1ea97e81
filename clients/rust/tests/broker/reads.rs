//! LIST, GET, watch streams, fleets, limits and grants.

use crate::common::harness;
use crate::{client, no_wait};
use muster_client::prelude::*;
use muster_client::{ChangeKind, Client, Error, ObserveOptions, Retry};
use std::time::Duration;

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
