//! Sessions and leases: lifecycle, local deadlines, prompt loss, with_lease.

use crate::common::{harness, tokens};
use crate::{client, no_wait, MS};
use muster_client::Error;
use std::time::{Duration, Instant};

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
