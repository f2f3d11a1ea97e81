//! The five-minute tour of the README, run by the tests against the real
//! broker. MUSTER_URL (default http://127.0.0.1:7420) and MUSTER_TOKEN
//! (none: dev mode) say where.

use muster_client::prelude::*; // StreamExt for the LIST below
use muster_client::{AcquireOptions, Client, Error, ObserveOptions};
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let url = std::env::var("MUSTER_URL").unwrap_or_else(|_| "http://127.0.0.1:7420".into());
    let mut builder = Client::builder(&url);
    if let Ok(token) = std::env::var("MUSTER_TOKEN") {
        builder = builder.token(token);
    }
    let client = builder.build()?;

    // A worker: a session kept alive in the background, and a managed lease
    // (renewed every TTL/3, released when the work returns).
    let session = client
        .new_session("worker-1", Duration::from_secs(30))
        .await?;
    let ttl = Duration::from_secs(15);
    session
        .with_lease(
            "lease://acme/renderers/doc-123",
            ttl,
            AcquireOptions::default(),
            |lease| async move {
                // Hand the fencing token to what the lease guards, and stop
                // when the lease is lost (with_lease then returns the loss).
                let render = async {
                    println!(
                        "rendering doc-123 under fencing token {}",
                        lease.fencing_token()
                    );
                };
                tokio::select! {
                    _ = lease.lost() => {}
                    _ = render => {}
                }
                Ok::<_, Error>(())
            },
        )
        .await?;

    // A lease held by hand: extend it before its TTL passes, release it.
    let lease = session
        .acquire(
            "lease://acme/renderers/doc-456",
            ttl,
            AcquireOptions::default(),
        )
        .await?;
    lease.extend(ttl).await?;

    // A live view of who holds what, rebuilt whenever it may be stale.
    let observer = client.observe(
        "lease://acme/renderers/*",
        ObserveOptions::default().shortest_ttl(ttl),
    )?;
    observer.ready().await?;
    for item in observer.view().items {
        println!(
            "{} held by {} ({})",
            item.route, item.owner_id, item.holder_incarnation
        );
    }

    // One LIST, page by page, from one snapshot.
    let mut items = std::pin::pin!(client.list("lease://acme/**", Default::default()));
    while let Some(item) = items.next().await {
        println!("listed {}", item?.route);
    }

    observer.close().await;
    lease.release().await?;
    session.close().await?;
    Ok(())
}
