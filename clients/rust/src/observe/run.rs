//! The observer's task: one bootstrap at a time, recovery with backoff,
//! periodic reconciliation (split from `observe.rs`).

use super::Shared;
use crate::backoff::{jittered, Backoff};
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
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Recovery backoff: 50 ms doubling to 2 s, jittered.
pub(super) const RECOVER_MIN: Duration = Duration::from_millis(50);
pub(super) const RECOVER_MAX: Duration = Duration::from_secs(2);
/// Bounds the changes buffered while a snapshot is paged; beyond it the
/// bootstrap starts over.
pub(super) const MAX_BUFFERED: usize = 100_000;

/// A bootstrap's outcome: the open stream and the view it built.
pub(super) struct Boot {
    pub(super) sub: Subscription,
    pub(super) items: BTreeMap<String, Item>,
    pub(super) epoch: String,
    pub(super) revision: i64,
}

pub(super) type Pending = Pin<Box<dyn Future<Output = Result<Boot>> + Send>>;

/// The observer's single task and what it needs.
pub(super) struct Run {
    pub(super) c: Client,
    pub(super) selector: String,
    pub(super) interval: Duration,
    pub(super) jitter: f64,
    pub(super) page_size: usize,
    pub(super) faults: Faults,
    pub(super) sh: Arc<Shared>,
}

/// Errors that no retry fixes: they stop the observer.
pub(super) fn fatal(e: &Error) -> bool {
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

pub(super) async fn at(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

pub(super) async fn next_change(cur: &mut Option<Subscription>) -> Option<Result<Change>> {
    match cur {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

pub(super) async fn finish(p: &mut Option<Pending>) -> Result<Boot> {
    match p {
        Some(f) => f.as_mut().await,
        None => std::future::pending().await,
    }
}

pub(super) fn apply_change(items: &mut BTreeMap<String, Item>, ch: Change, faults: &Faults) {
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
    pub(super) async fn run(self, cancel: CancellationToken, done: CancellationToken) {
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
pub(super) async fn bootstrap(
    c: Client,
    selector: String,
    page_size: usize,
    faults: Faults,
) -> Result<Boot> {
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
pub(super) fn install(
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
pub(super) async fn page_rest(
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
