//! `Session::batch` against the real broker binary (the shared harness's
//! broker URL): one result per operation, partial success, per-operation
//! authorization and whole-batch refusals. Each test works in its own realm.

mod common;

use common::{harness, tokens};
use muster_client::{AcquireOptions, BatchOpKind, Client, Error, Lease, Retry, MAX_BATCH_OPS};
use std::time::Duration;

const SEC: fn(u64) -> Duration = Duration::from_secs;

async fn client(token: &str) -> Client {
    let h = harness();
    let secret = tokens(h).await[token].clone();
    Client::builder(&h.broker).token(secret).build().unwrap()
}

/// Sends a request of the contract outside the SDK, as token `a`.
async fn raw(method: reqwest::Method, path: &str, body: serde_json::Value) -> u16 {
    let h = harness();
    reqwest::Client::new()
        .request(method, format!("{}{path}", h.broker))
        .bearer_auth(&tokens(h).await["a"])
        .json(&body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn batch_lifecycle_one_result_per_op() {
    let c = client("a").await;
    let s = c.new_session("worker-1", SEC(10)).await.unwrap();
    let other = c.new_session("worker-2", SEC(10)).await.unwrap();
    let opts = AcquireOptions::default;
    let taken = other
        .acquire("lease://bat1/r/taken", SEC(5), opts())
        .await
        .unwrap();
    let held = s
        .acquire("lease://bat1/r/held", SEC(5), opts())
        .await
        .unwrap();

    let mut b = s.batch();
    for i in 0..5 {
        b.acquire(&format!("lease://bat1/r/d{i}"), SEC(5));
    }
    b.acquire("lease://bat1/r/taken", SEC(5))
        .acquire("lease://bat1/r/held", SEC(5));
    assert_eq!(b.len(), 7);
    let res = b.send().await.unwrap();
    assert_eq!(res.len(), 7);
    let mut mine: Vec<Lease> = Vec::new();
    for (i, r) in res[..5].iter().enumerate() {
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!(r.op, BatchOpKind::Acquire);
        assert_eq!(r.route, format!("lease://bat1/r/d{i}"));
        let l = r.lease.clone().expect("a handle");
        assert!(l.fencing_token() > 0);
        mine.push(l);
    }
    let e = res[5].error.as_ref().expect("taken: an error");
    assert!(matches!(e, Error::LeaseHeld(_)), "{e:?}");
    assert_eq!(e.advice(), Retry::Backoff);
    let p = e.problem().unwrap();
    assert_eq!(p.status, 409);
    assert!(!p.detail.is_empty());
    assert!(res[5].lease.is_none());
    assert!(res[6].error.is_none(), "{:?}", res[6]);
    let again = res[6].lease.as_ref().unwrap();
    assert_eq!(
        again.fencing_token(),
        held.fencing_token(),
        "already held: the same grant"
    );
    let st = c.get("lease://bat1/r/d3").await.unwrap();
    assert!(st.held);
    assert_eq!(st.owner_id.as_deref(), Some("worker-1"));

    // One request extends them all.
    let mut ext = s.batch();
    for l in &mine {
        ext.extend(l, SEC(8));
    }
    for (i, r) in ext.send().await.unwrap().iter().enumerate() {
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!(r.op, BatchOpKind::Extend);
        assert_eq!(mine[i].renewals(), 1);
    }

    // A handle whose token is no longer the current one (released and
    // re-acquired behind its back) is lost; the current one extends.
    let old = s
        .acquire("lease://bat1/r/fence", SEC(5), opts())
        .await
        .unwrap();
    let status = raw(
        reqwest::Method::POST,
        "/v1/leases/bat1/r/fence/release",
        serde_json::json!({"session_id": s.id(), "fencing_token": old.fencing_token()}),
    )
    .await;
    assert_eq!(status, 204);
    let res = other
        .batch()
        .acquire("lease://bat1/r/fence", SEC(5))
        .send()
        .await
        .unwrap();
    assert!(res[0].error.is_none(), "{:?}", res[0]);
    let res = s
        .batch()
        .extend(&old, SEC(1))
        .extend(&held, SEC(5))
        .send()
        .await
        .unwrap();
    let e = res[0].error.as_ref().expect("the stale extend fails");
    assert!(matches!(e, Error::LeaseLost(_)), "{e:?}");
    assert!(
        matches!(e.cause(), Error::Fenced(_) | Error::NotOwner(_)),
        "{e:?}"
    );
    assert!(old.lost().is_cancelled());
    assert!(res[1].error.is_none() && held.error().is_none());

    // The other session releases its own.
    let res = other.batch().release(&taken).send().await.unwrap();
    assert!(res[0].error.is_none());
    assert!(matches!(taken.error(), Some(Error::Released)));

    // Release them all; the second release of mine[0] is settled locally.
    let mut rel = s.batch();
    for l in &mine {
        rel.release(l);
    }
    rel.release(&mine[0]);
    for r in rel.send().await.unwrap() {
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!(r.op, BatchOpKind::Release);
    }
    for l in &mine {
        assert!(
            matches!(l.error(), Some(Error::Released)),
            "{:?}",
            l.error()
        );
    }
    assert!(!c.get("lease://bat1/r/d0").await.unwrap().held);
    s.close().await.unwrap();
    other.close().await.unwrap();
}

#[tokio::test]
async fn bad_batches_are_refused_whole() {
    let c = client("a").await;
    let s = c.new_session("worker-1", SEC(10)).await.unwrap();
    let other = c.new_session("worker-2", SEC(10)).await.unwrap();
    let theirs = other
        .acquire("lease://bat2/r/theirs", SEC(5), AcquireOptions::default())
        .await
        .unwrap();
    let mut too_many = s.batch();
    for i in 0..=MAX_BATCH_OPS {
        too_many.acquire(&format!("lease://bat2/r/x{i}"), SEC(1));
    }
    let mut bad_route = s.batch();
    bad_route
        .acquire("lease://bat2/r/x", SEC(1))
        .acquire("lease://bat2/*/x", SEC(1));
    let mut foreign = s.batch();
    foreign.release(&theirs);
    let mut long_ttl = s.batch();
    long_ttl.acquire("lease://bat2/r/x", SEC(3600));
    let cases = [
        ("empty", s.batch().send().await, "invalid_request"),
        ("too many", too_many.send().await, "invalid_request"),
        ("bad route", bad_route.send().await, "invalid_route"),
        (
            "another session's lease",
            foreign.send().await,
            "invalid_request",
        ),
        ("TTL out of range", long_ttl.send().await, "invalid_request"),
    ];
    for (name, got, code) in cases {
        match got {
            Err(e) => assert_eq!(e.code(), Some(code), "{name}: {e:?}"),
            Ok(r) => panic!("{name}: {r:?}"),
        }
    }
    assert!(
        !c.get("lease://bat2/r/x").await.unwrap().held,
        "a refused batch acquired"
    );
    assert!(theirs.error().is_none());

    // A lease of a session that ended at the broker is lost, as with extend.
    let l = s
        .acquire("lease://bat2/r/mine", SEC(5), AcquireOptions::default())
        .await
        .unwrap();
    let status = raw(
        reqwest::Method::DELETE,
        &format!("/v1/sessions/{}", s.id()),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(status, 204);
    let e = s.batch().extend(&l, SEC(1)).send().await.unwrap_err();
    assert!(
        matches!(e.cause(), Error::SessionNotFound(_)),
        "batch on an ended session: {e:?}"
    );
    assert!(
        matches!(l.error(), Some(Error::LeaseLost(_))),
        "{:?}",
        l.error()
    );

    // Families are separate universes: the route held in fam-a is free in fam-b.
    let sb = client("b")
        .await
        .new_session("worker-b", SEC(10))
        .await
        .unwrap();
    let res = sb
        .batch()
        .acquire("lease://bat2/r/theirs", SEC(1))
        .send()
        .await
        .unwrap();
    assert!(res[0].error.is_none(), "{res:?}");
    sb.close().await.unwrap();
    other.close().await.unwrap();
}

#[tokio::test]
async fn forbidden_is_per_operation() {
    // narrow: read-only on lease://acme/renderers/*.
    let s = client("narrow")
        .await
        .new_session("reader", SEC(10))
        .await
        .unwrap();
    let res = s
        .batch()
        .acquire("lease://acme/renderers/a", SEC(1))
        .acquire("lease://acme/other/a", SEC(1))
        .send()
        .await
        .unwrap();
    assert_eq!(res.len(), 2);
    for r in &res {
        let e = r.error.as_ref().expect("forbidden");
        assert!(matches!(e, Error::Forbidden(_)), "{e:?}");
        assert_eq!(e.advice(), Retry::No);
        assert_eq!(e.problem().unwrap().status, 403);
        assert!(r.lease.is_none());
    }
    s.close().await.unwrap();
}
