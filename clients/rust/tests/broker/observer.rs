//! The observer, and the README's example.

use crate::common::{harness, tokens};
use crate::{client, no_wait, MS};
use muster_client::prelude::*;
use muster_client::{Client, Error, ObserveOptions};
use std::time::{Duration, Instant};

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
