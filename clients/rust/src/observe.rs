//! The observer: an advisory live view of the held leases matching one
//! selector, kept by the algorithm of `docs/client-operations.md` ("The
//! observer: a correct live view"), exactly as the Go SDK's `observe.go`.

use crate::backoff::{reconcile_interval, DEFAULT_RECONCILE_JITTER};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::wire::Item;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Options of [`Client::observe`], with the Go SDK's names and defaults.
/// Invalid values make `observe` fail with `InvalidRequest`, naming the
/// option.
#[derive(Debug, Clone)]
pub struct ObserveOptions {
    shortest_ttl: Duration,
    interval: Option<Duration>,
    jitter: f64,
    page_size: usize,
    faults: Faults,
}

impl Default for ObserveOptions {
    fn default() -> Self {
        ObserveOptions {
            shortest_ttl: Duration::ZERO,
            interval: None,
            jitter: DEFAULT_RECONCILE_JITTER,
            page_size: 500,
            faults: Faults::default(),
        }
    }
}

impl ObserveOptions {
    /// The shortest lease TTL the observed fleet uses; the default
    /// reconciliation interval is derived from it ([`reconcile_interval`]).
    /// Zero (the default) means unknown. Go: `WithShortestTTL`.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn shortest_ttl(mut self, d: Duration) -> Self {
        self.shortest_ttl = d;
        self
    }

    /// The periodic reconciliation interval instead of the default formula;
    /// at least 10 ms. Go: `WithReconcileInterval`.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn reconcile_interval(mut self, d: Duration) -> Self {
        self.interval = Some(d);
        self
    }

    /// The jitter of the reconciliation interval as a fraction: each period
    /// is drawn uniformly from `interval·[1-j, 1+j]`. In `[0, 1)`, default
    /// 0.2; 0 makes every period exact (tests). Go: `WithReconcileJitter`.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn reconcile_jitter(mut self, j: f64) -> Self {
        self.jitter = j;
        self
    }

    /// The LIST page size used to read the rest of a snapshot, 1..500
    /// (default 500). Go: `WithPageSize`.
    #[must_use = "builder methods return the changed value; use it"]
    pub fn page_size(mut self, n: usize) -> Self {
        self.page_size = n;
        self
    }

    /// Makes a deliberately broken observer (tests only: the `test-util`
    /// feature).
    #[cfg(any(test, feature = "test-util"))]
    #[must_use = "builder methods return the changed value; use it"]
    pub fn faults(mut self, f: Faults) -> Self {
        self.faults = f;
        self
    }

    fn validate(&self) -> Result<Duration> {
        let mut errs = Vec::new();
        if matches!(self.interval, Some(d) if d < Duration::from_millis(10)) {
            errs.push("the reconciliation interval must be at least 10ms");
        }
        if !(self.jitter >= 0.0 && self.jitter < 1.0) {
            errs.push("the reconciliation jitter must be in [0, 1)");
        }
        if !(1..=500).contains(&self.page_size) {
            errs.push("the page size must be in 1..500");
        }
        if !errs.is_empty() {
            return Err(Error::invalid_request(format!(
                "Observe: {}",
                errs.join("; ")
            )));
        }
        Ok(self
            .interval
            .unwrap_or_else(|| reconcile_interval(self.shortest_ttl)))
    }
}

/// A copy of an observer's view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// True once a bootstrap completed, until the next event that may have
    /// made the view stale (then `items` is the last known state).
    pub ready: bool,
    /// The broker lifetime the items belong to.
    pub epoch: String,
    /// The broker revision the items are at.
    pub revision: i64,
    /// The held leases, sorted by route.
    pub items: Vec<Item>,
}

/// Counts what an observer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObserverStats {
    /// Bootstraps started.
    pub attempts: u64,
    /// Bootstraps that completed and installed a view.
    pub bootstraps: u64,
    /// Times the view became not ready.
    pub recoveries: u64,
    /// Periodic reconciliations started.
    pub reconciliations: u64,
}

/// Keeps an advisory view of the held leases matching one selector: it owns
/// the bootstrap (open a watch stream and read its marker, buffer the
/// changes, page the rest of the marker's snapshot, install it, apply the
/// buffered changes newer than the marker, then report ready) and every
/// recovery. See [`Client::observe`].
///
/// **Drop**: dropping an observer without [`Observer::close`] stops its task
/// at its next poll (its stream and any request in flight are dropped with
/// it); `close().await` also waits until the task has ended.
#[derive(Debug)]
pub struct Observer {
    shared: Arc<Shared>,
    selector: String,
    interval: Duration,
    cancel: CancellationToken,
    done: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    st: Mutex<State>,
    changed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    items: BTreeMap<String, Item>,
    ready: bool,
    epoch: String,
    revision: i64,
    err: Option<Error>,
    stop_err: Option<Error>,
    closed: bool,
    stats: ObserverStats,
}

impl Client {
    /// Starts an observer of `selector` (on the current tokio runtime) and
    /// returns at once; use [`Observer::ready`], [`Observer::view`] and
    /// [`Observer::changed`] to learn when its view is usable.
    ///
    /// The view is advisory: it can be stale at any moment, and it never
    /// grants anything (its items are plain values; only
    /// [`Session::acquire`](crate::Session::acquire) makes a lease). It
    /// becomes not ready, and a fresh bootstrap starts at once, when the
    /// stream ends for any reason: overflow (this process read too slowly),
    /// supersede, a dropped connection, a broker restart (a new epoch: the
    /// new view replaces the old one entirely). Failed bootstraps are retried
    /// with backoff from 50 ms doubling to 2 s, jittered; after a view that
    /// was ready for at least 2 s the first retry is immediate; only one
    /// bootstrap runs at a time. While ready, the observer also re-bootstraps
    /// in the background every reconciliation interval (by default
    /// `clamp(shortest TTL / 2, 5 s, 60 s)` ±20 %), replacing the view when
    /// the new one is installed, because changes are hints that a broker does
    /// not replay. The formula and its costs: `docs/client-operations.md`.
    ///
    /// An error no retry can fix (`InvalidSelector`, `InvalidRequest`,
    /// `Unauthenticated`, `Forbidden`, `NotFound`, `MethodNotAllowed`,
    /// `NotImplemented`) stops the observer; [`Observer::stopped`] then
    /// resolves and [`Observer::error`] says why.
    pub fn observe(&self, selector: &str, opts: ObserveOptions) -> Result<Observer> {
        let interval = opts.validate()?;
        let (tx, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            st: Mutex::new(State::default()),
            changed: tx,
        });
        let cancel = CancellationToken::new();
        let done = CancellationToken::new();
        let run = Run {
            c: self.clone(),
            selector: selector.to_string(),
            interval,
            jitter: opts.jitter,
            page_size: opts.page_size,
            faults: opts.faults,
            sh: shared.clone(),
        };
        let task = tokio::spawn(run.run(cancel.clone(), done.clone()));
        Ok(Observer {
            shared,
            selector: selector.to_string(),
            interval,
            cancel,
            done,
            task: Mutex::new(Some(task)),
        })
    }
}

impl Observer {
    /// The observed selector.
    pub fn selector(&self) -> &str {
        &self.selector
    }

    /// The (unjittered) periodic reconciliation interval.
    pub fn reconcile_every(&self) -> Duration {
        self.interval
    }

    /// A copy of the current view.
    pub fn view(&self) -> View {
        self.shared.view().0
    }

    /// The views as a [`Stream`](futures_core::Stream): the current view at
    /// once, then a new copy after each change of the view, of its readiness
    /// or of [`Observer::error`]. Changes that come faster than the stream is
    /// read are coalesced (the reader gets the latest view, never a
    /// backlog). The stream ends after the view the observer had when it
    /// stopped (closed, dropped, or a fatal error: see [`Observer::error`]).
    ///
    /// ```no_run
    /// use muster_client::prelude::*;
    /// # async fn demo(observer: muster_client::Observer) {
    /// let mut views = observer.views();
    /// while let Some(view) = views.next().await {
    ///     if view.ready {
    ///         println!("{} leases held", view.items.len());
    ///     }
    /// }
    /// # }
    /// ```
    pub fn views(&self) -> impl futures_core::Stream<Item = View> + Send + Unpin + 'static {
        let sh = self.shared.clone();
        let mut rx = sh.changed.subscribe();
        rx.mark_changed(); // the current view first
        Box::pin(futures_util::stream::unfold(
            (sh, rx, false),
            |(sh, mut rx, stopped)| async move {
                if stopped {
                    return None;
                }
                // The sender lives in `sh`: `changed` never fails here.
                let _ = rx.changed().await;
                let (view, stopped) = sh.view();
                Some((view, (sh, rx, stopped)))
            },
        ))
    }

    /// Whether the view is bootstrapped and followed live.
    pub fn is_ready(&self) -> bool {
        self.shared.st.lock().unwrap().ready
    }

    /// Resolves at the first change of the view, of its readiness or of
    /// [`Observer::error`] after this call (also when the observer stops).
    pub fn changed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.shared.changed.subscribe();
        async move {
            let _ = rx.changed().await;
        }
    }

    /// `None` while the view is ready. Otherwise why it is not: the end of
    /// the stream, or the last failed bootstrap; once the observer stopped,
    /// why it stopped ([`Error::Closed`] after `close`).
    pub fn error(&self) -> Option<Error> {
        self.shared.st.lock().unwrap().err.clone()
    }

    /// Counts bootstraps, recoveries and reconciliations.
    pub fn stats(&self) -> ObserverStats {
        self.shared.st.lock().unwrap().stats
    }

    /// Waits until the view is ready (`Ok`), or the observer stops (`Err`
    /// with why). Bound it with `tokio::time::timeout`.
    pub async fn ready(&self) -> Result<()> {
        loop {
            let mut rx = self.shared.changed.subscribe();
            {
                let st = self.shared.st.lock().unwrap();
                if st.ready {
                    return Ok(());
                }
                if st.closed {
                    return Err(st.err.clone().unwrap_or(Error::Closed));
                }
            }
            let _ = rx.changed().await;
        }
    }

    /// Resolves when the observer has stopped (closed, or a fatal error).
    pub async fn stopped(&self) {
        self.done.cancelled().await
    }

    /// Stops the observer and waits for its task: its stream is closed and
    /// any request in flight is dropped, so this returns promptly even while
    /// the broker hangs. [`Observer::error`] is [`Error::Closed`] afterwards.
    pub async fn close(&self) {
        {
            let mut st = self.shared.st.lock().unwrap();
            if st.stop_err.is_none() {
                st.stop_err = Some(Error::Closed);
            }
        }
        self.cancel.cancel();
        let task = self.task.lock().unwrap().take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Shared {
    /// A copy of the view, and whether the observer has stopped.
    fn view(&self) -> (View, bool) {
        let st = self.st.lock().unwrap();
        let v = View {
            ready: st.ready,
            epoch: st.epoch.clone(),
            revision: st.revision,
            items: st.items.values().cloned().collect(),
        };
        (v, st.closed)
    }

    fn notify(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.st.lock().unwrap());
        self.notify();
    }
}

mod run;
use run::Run;
#[cfg(test)]
use run::*;

#[cfg(test)]
mod tests;
