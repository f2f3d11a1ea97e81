//! [`Signal`]: the read-only end of the SDK's cancellation tokens, handed
//! out by [`Session::ended`](crate::Session::ended) and
//! [`Lease::lost`](crate::Lease::lost).

use std::future::IntoFuture;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// A one-shot signal the SDK fires and the caller only waits on: a session
/// that ended ([`Session::ended`](crate::Session::ended)), a lease that is no
/// longer held ([`Lease::lost`](crate::Lease::lost)).
///
/// It cannot be fired from outside the SDK: there is no `cancel`, so no
/// caller can stop a session's keepalive or a lease's bookkeeping by
/// mistake. Await it directly, or in `tokio::select!`, without binding it
/// first; its future owns what it needs:
///
/// ```no_run
/// # async fn demo(lease: muster_client::Lease) {
/// tokio::select! {
///     _ = lease.lost() => println!("lost: {:?}", lease.error()),
///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
/// }
/// lease.lost().cancelled().await; // the same, spelled as on a token
/// # }
/// ```
///
/// For an API that takes a [`CancellationToken`], [`Signal::child_token`]
/// gives a child: cancelled with the signal, but cancelling it affects
/// nothing else.
///
/// ```compile_fail,E0599
/// # fn demo(session: &muster_client::Session) {
/// session.ended().cancel(); // no such method: the SDK alone fires it
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a signal does nothing unless awaited or polled"]
pub struct Signal(CancellationToken);

impl Signal {
    pub(crate) fn new(token: &CancellationToken) -> Signal {
        Signal(token.clone())
    }

    /// Whether the signal has fired.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    /// A future that resolves once the signal has fired. It owns its share
    /// of the signal, so `lease.lost().cancelled().await` needs no binding.
    pub fn cancelled(&self) -> WaitForCancellationFutureOwned {
        self.0.clone().cancelled_owned()
    }

    /// A new [`CancellationToken`] cancelled when the signal fires; the
    /// caller may cancel it (and its own children) without touching the SDK.
    pub fn child_token(&self) -> CancellationToken {
        self.0.child_token()
    }
}

impl IntoFuture for Signal {
    type Output = ();
    type IntoFuture = WaitForCancellationFutureOwned;

    /// `signal.await` waits until the signal has fired.
    fn into_future(self) -> Self::IntoFuture {
        self.0.cancelled_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_child_token_cannot_fire_the_signal() {
        let sdk = CancellationToken::new();
        let s = Signal::new(&sdk);
        let child = s.child_token();
        child.cancel();
        assert!(!s.is_cancelled() && !sdk.is_cancelled());
        let c2 = s.child_token();
        sdk.cancel();
        assert!(s.is_cancelled() && c2.is_cancelled());
        s.clone().await;
        s.cancelled().await;
    }

    /// The spelling that failed with E0716 while `lost()` returned the
    /// token itself: a future borrowing a temporary.
    #[tokio::test]
    async fn select_on_a_temporary_signal_compiles_and_fires() {
        let sdk = CancellationToken::new();
        let handle = Signal::new(&sdk);
        let lost = || handle.clone();
        sdk.cancel();
        tokio::select! {
            _ = lost().cancelled() => {}
            _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => panic!("not fired"),
        }
        tokio::select! {
            _ = lost() => {}
            _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => panic!("not fired"),
        }
    }
}
