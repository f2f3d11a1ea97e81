//! The observer: an advisory live view of the held leases matching one
//! selector, kept by the algorithm of `docs/client-operations.md` ("The
//! observer: a correct live view"), exactly as the Go SDK's `observe.go`.

use crate::backoff::{jittered, reconcile_interval, Backoff, DEFAULT_RECONCILE_JITTER};
use crate::client::Client;
use crate::error::{Error, Problem, Result};
use crate::faults::Faults;
use crate::list::ListOptions;
use crate::watch::{Change, Subscription};
use crate::wire::{ChangeKind, Item};
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Recovery backoff: 50 ms doubling to 2 s, jittered.
const RECOVER_MIN: Duration = Duration::from_millis(50);
const RECOVER_MAX: Duration = Duration::from_secs(2);
/// Bounds the changes buffered while a snapshot is paged; beyond it the
/// bootstrap starts over.
const MAX_BUFFERED: usize = 100_000;

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

/// A bootstrap's outcome: the open stream and the view it built.
struct Boot {
    sub: Subscription,
    items: BTreeMap<String, Item>,
    epoch: String,
    revision: i64,
}

type Pending = Pin<Box<dyn Future<Output = Result<Boot>> + Send>>;

/// The observer's single task and what it needs.
struct Run {
    c: Client,
    selector: String,
    interval: Duration,
    jitter: f64,
    page_size: usize,
    faults: Faults,
    sh: Arc<Shared>,
}

/// Errors that no retry fixes: they stop the observer.
fn fatal(e: &Error) -> bool {
    matches!(
        e,
        Error::InvalidSelector(_)
            | Error::InvalidRequest(_)
            | Error::Unauthenticated(_)
            | Error::Forbidden(_)
            | Error::NotFound(_)
            | Error::MethodNotAllowed(_)
            | Error::NotImplemented(_)
    )
}

async fn at(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

async fn next_change(cur: &mut Option<Subscription>) -> Option<Result<Change>> {
    match cur {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

async fn finish(p: &mut Option<Pending>) -> Result<Boot> {
    match p {
        Some(f) => f.as_mut().await,
        None => std::future::pending().await,
    }
}

fn apply_change(items: &mut BTreeMap<String, Item>, ch: Change, faults: &Faults) {
    if faults.ignores(ch.kind) {
        return;
    }
    match (ch.kind, ch.item) {
        (ChangeKind::Acquired, Some(item)) => {
            items.insert(ch.route, item);
        }
        _ => {
            items.remove(&ch.route);
        }
    }
}

impl Run {
    /// Owns the current stream and starts at most one bootstrap at a time.
    async fn run(self, cancel: CancellationToken, done: CancellationToken) {
        let mut cur: Option<Subscription> = None;
        let mut pending: Option<Pending> = None;
        let mut ready_at = Instant::now();
        let mut bo = Backoff::new(RECOVER_MIN, RECOVER_MAX);
        let mut retry_at = Some(Instant::now()); // the first bootstrap starts at once
        let mut reconcile_at: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = at(retry_at) => {
                    retry_at = None;
                    if pending.is_none() {
                        pending = Some(self.start());
                    }
                }
                _ = at(reconcile_at) => {
                    reconcile_at = None;
                    if pending.is_none() {
                        self.sh.update(|st| st.stats.reconciliations += 1);
                        pending = Some(self.start());
                    }
                }
                ev = next_change(&mut cur) => {
                    let err = match ev {
                        Some(Ok(ch)) => {
                            self.apply(ch);
                            continue;
                        }
                        Some(Err(e)) => e,
                        None => Error::StreamEnded { reason: None, revision: None, detail: "the stream ended".into() },
                    };
                    cur = None;
                    if self.faults.stay_ready {
                        continue;
                    }
                    reconcile_at = None;
                    self.not_ready(err);
                    if pending.is_none() {
                        if ready_at.elapsed() >= RECOVER_MAX {
                            bo.reset(); // it was stable: recover at once
                            retry_at = Some(Instant::now());
                        } else {
                            retry_at = Some(Instant::now() + bo.next_delay());
                        }
                    }
                }
                r = finish(&mut pending) => {
                    pending = None;
                    match r {
                        Err(e) if fatal(&e) && !self.faults.retry_fatal => {
                            let mut st = self.sh.st.lock().unwrap();
                            if st.stop_err.is_none() {
                                st.stop_err = Some(e);
                            }
                            break;
                        }
                        Err(e) => {
                            if cur.is_none() {
                                self.not_ready(e);
                            }
                            retry_at = Some(Instant::now() + bo.next_delay());
                        }
                        Ok(b) => {
                            cur = Some(b.sub); // the old stream, if any, is closed here
                            let merge = self.faults.merge_views;
                            self.sh.update(|st| {
                                if merge {
                                    let mut items = std::mem::take(&mut st.items);
                                    items.extend(b.items);
                                    st.items = items;
                                } else {
                                    st.items = b.items;
                                }
                                st.epoch = b.epoch;
                                st.revision = b.revision;
                                st.ready = true;
                                st.err = None;
                                st.stats.bootstraps += 1;
                            });
                            ready_at = Instant::now();
                            if !self.faults.no_reconcile {
                                reconcile_at = Some(Instant::now() + jittered(self.interval, self.jitter));
                            }
                        }
                    }
                }
            }
        }
        if let (true, Some(p)) = (self.faults.uncancellable_pages, pending.take()) {
            let _ = p.await; // the defect: close waits for the pages
        }
        drop(pending);
        drop(cur);
        self.sh.update(|st| {
            let why = st.stop_err.clone().unwrap_or(Error::Closed);
            st.stop_err = Some(why.clone());
            st.err = Some(why);
            st.ready = false;
            st.closed = true;
        });
        done.cancel();
    }

    fn start(&self) -> Pending {
        self.sh.update(|st| st.stats.attempts += 1);
        Box::pin(bootstrap(
            self.c.clone(),
            self.selector.clone(),
            self.page_size,
            self.faults,
        ))
    }

    fn apply(&self, ch: Change) {
        let mut st = self.sh.st.lock().unwrap();
        if ch.revision <= st.revision || self.faults.ignore_live {
            return;
        }
        st.revision = ch.revision;
        apply_change(&mut st.items, ch, &self.faults);
        drop(st);
        self.sh.notify();
    }

    fn not_ready(&self, err: Error) {
        self.sh.update(|st| {
            if st.ready {
                st.stats.recoveries += 1;
            }
            st.ready = false;
            st.err = Some(err);
        });
    }
}

/// Opens a stream, pages the rest of its marker's snapshot while buffering
/// the stream's changes, and builds the view. On success the stream stays
/// open for the caller.
async fn bootstrap(c: Client, selector: String, page_size: usize, faults: Faults) -> Result<Boot> {
    let mut sub = c.watch(&[&selector]).await?;
    let m = sub.marker().clone();
    if m.selectors.len() != 1 {
        return Err(Error::Protocol(format!(
            "the marker has {} subscriptions, want 1",
            m.selectors.len()
        )));
    }
    let first = &m.selectors[0];
    let mut items: BTreeMap<String, Item> = first
        .items
        .iter()
        .map(|it| (it.route.clone(), it.clone()))
        .collect();
    let epoch = m.epoch.clone();
    let pager = page_rest(&c, &selector, page_size, first.next_cursor.clone(), &epoch);
    tokio::pin!(pager);
    let mut buf: Vec<Change> = Vec::new();
    loop {
        tokio::select! {
            ev = sub.next() => match ev {
                Some(Ok(ch)) => {
                    buf.push(ch);
                    if buf.len() > MAX_BUFFERED {
                        return Err(Error::Protocol(format!(
                            "more than {MAX_BUFFERED} changes while paging a snapshot"
                        )));
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Err(Error::StreamEnded { reason: None, revision: None, detail: "the stream ended".into() }),
            },
            paged = &mut pager => {
                items.extend(paged?.into_iter().map(|it| (it.route.clone(), it)));
                let (items, revision) = install(items, buf, m.revision, &faults);
                return Ok(Boot { sub, items, epoch: m.epoch.clone(), revision });
            }
        }
    }
}

/// Step 4 of the bootstrap: the snapshot's items (marker page and LIST
/// pages, keyed by route) with the buffered changes whose revision is above
/// the marker's applied in order; returns the view and its revision.
fn install(
    mut items: BTreeMap<String, Item>,
    mut buf: Vec<Change>,
    marker_revision: i64,
    faults: &Faults,
) -> (BTreeMap<String, Item>, i64) {
    if faults.ignore_snapshot {
        items.clear();
    }
    if faults.drop_buffered {
        buf.clear();
    }
    let mut revision = marker_revision;
    for ch in buf {
        if ch.revision > marker_revision {
            revision = revision.max(ch.revision);
            apply_change(&mut items, ch, faults);
        }
    }
    (items, revision)
}

/// Reads the rest of the marker's snapshot; every page must be of `epoch`.
async fn page_rest(
    c: &Client,
    selector: &str,
    page_size: usize,
    mut cursor: Option<String>,
    epoch: &str,
) -> Result<Vec<Item>> {
    let mut out = Vec::new();
    while let Some(cur) = cursor {
        let opts = ListOptions {
            limit: page_size,
            cursor: Some(cur),
        };
        let p = c.list_page(selector, &opts).await?;
        if p.epoch != epoch {
            return Err(Error::EpochChanged(Problem::local(
                "the broker restarted during the bootstrap",
            )));
        }
        out.extend(p.items);
        cursor = p.next_cursor;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
