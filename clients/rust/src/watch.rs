//! Watch streams: [`Client::watch`] opens one and returns a [`Subscription`],
//! a [`Stream`] of [`Change`]s that starts after its snapshot [`Marker`].

use crate::client::Client;
use crate::error::{Error, Problem, Result};
use crate::sse::{Event, Parser};
use crate::transport::BodyStream;
use crate::wire::{ChangeEvent, ChangeKind, Item, SnapshotEvent, StreamEndEvent};
use futures_core::Stream;
use futures_util::StreamExt;
use reqwest::Method;
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Bounds the bytes of one event (a marker with a full first page is far
/// below it).
const MAX_EVENT: usize = 8 << 20;

/// One change of the held set, for one selector of the stream: a plain,
/// read-only value (a hint, not a command: it grants nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The selector (as given to `watch`) whose registration matched.
    pub selector: String,
    /// The concrete route that changed.
    pub route: String,
    /// How it changed: `Acquired` puts `item` under the route, every other
    /// kind removes the route.
    pub kind: ChangeKind,
    /// The broker revision of the change.
    pub revision: i64,
    /// The new holder when `kind` is `Acquired`.
    pub item: Option<Item>,
}

/// The first event of a stream: the broker lifetime and revision at which
/// the registrations were made, and per selector the first page of its
/// snapshot at that revision. Every change after it has a higher revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The broker lifetime.
    pub epoch: String,
    /// The snapshot's revision.
    pub revision: i64,
    /// One page per selector, in the order given to `watch`.
    pub selectors: Vec<MarkerPage>,
}

/// The first snapshot page of one selector. When `next_cursor` is set,
/// [`Client::list`] with the same selector and that cursor pages the rest of
/// the same snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerPage {
    /// The selector.
    pub selector: String,
    /// The first items of its snapshot.
    pub items: Vec<Item>,
    /// Pages the rest, `None` when there is no more.
    pub next_cursor: Option<String>,
}

/// Reads events off a response body.
struct Events {
    body: BodyStream,
    parser: Parser,
    queue: VecDeque<Event>,
}

impl Events {
    /// The next event; an error when the stream failed or closed.
    async fn next(&mut self) -> Result<Event> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Ok(ev);
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self
                    .parser
                    .push(&chunk, &mut self.queue)
                    .map_err(|e| ended(None, None, e.to_string()))?,
                Some(Err(e)) => {
                    let e = e.without_url();
                    return Err(ended(None, None, format!("transport: {e}")));
                }
                None => return Err(ended(None, None, "the connection closed".into())),
            }
        }
    }
}

fn ended(reason: Option<String>, revision: Option<i64>, detail: String) -> Error {
    Error::StreamEnded {
        reason,
        revision,
        detail,
    }
}

/// The terminal event's error, `None` for any other event.
fn stream_end(ev: &Event) -> Option<Error> {
    match ev.name.as_str() {
        "overflow" | "superseded" | "unsubscribed" | "session_closed" | "shutdown" | "moved" => {
            let revision = serde_json::from_str::<StreamEndEvent>(&ev.data)
                .ok()
                .and_then(|e| e.revision);
            Some(ended(
                Some(ev.name.clone()),
                revision,
                format!("the broker ended the stream: {}", ev.name),
            ))
        }
        _ => None,
    }
}

/// One open watch stream, a [`Stream`] of `Result<Change>` in revision
/// order. When the stream ends it yields one `Err` saying why (an
/// [`Error::StreamEnded`] with the terminal event, or with `reason: None`
/// when the connection dropped), then `None`. It is never resumed: after an
/// end, open a new one and rebuild from its marker (or use
/// [`Client::observe`], which does all of this).
///
/// A consumer that stops polling makes the broker end the stream with
/// `overflow` once its queue fills; nothing is skipped silently. Dropping the
/// subscription (or [`Subscription::close`]) closes the connection; the
/// registrations of a session-less stream end with it.
pub struct Subscription {
    marker: Marker,
    session: Option<(Client, String)>,
    inner: Pin<Box<dyn Stream<Item = Result<Change>> + Send>>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("marker", &self.marker)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// The stream's first event.
    pub fn marker(&self) -> &Marker {
        &self.marker
    }

    /// Closes the stream (the same as dropping it).
    pub async fn close(self) {}

    /// Removes the registration of `selector` (the string given to `watch`)
    /// from the session; the broker ends the stream with `unsubscribed` when
    /// it was the last one. Only a session stream ([`Session::watch`](crate::Session::watch))
    /// has registrations; a session-less one answers `InvalidRequest`: drop it.
    pub async fn unsubscribe(&self, selector: &str) -> Result<()> {
        let Some((c, id)) = &self.session else {
            return Err(Error::invalid_request(
                "a session-less stream has no registration to remove: Close it",
            ));
        };
        let mut url = c.url(&["v1", "sessions", id, "subscriptions"]);
        url.query_pairs_mut().append_pair("selector", selector);
        c.send(c.request(Method::DELETE, url), 204).await?;
        Ok(())
    }
}

impl Stream for Subscription {
    type Item = Result<Change>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl Client {
    /// Opens a watch stream over `selectors` (1..32) as its own read-only
    /// session, and returns once the snapshot marker has arrived.
    pub async fn watch(&self, selectors: &[&str]) -> Result<Subscription> {
        self.open_watch(selectors, None).await
    }

    pub(crate) async fn open_watch(
        &self,
        selectors: &[&str],
        session: Option<&str>,
    ) -> Result<Subscription> {
        if selectors.is_empty() {
            return Err(Error::InvalidSelector(Problem::local(
                "Watch needs at least one selector",
            )));
        }
        let mut url = self.url(&["v1", "leases", "watch"]);
        {
            let mut q = url.query_pairs_mut();
            for s in selectors {
                q.append_pair("selector", s);
            }
        }
        let mut rb = self
            .request(Method::GET, url)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = session {
            rb = rb.header("Muster-Session", id);
        }
        let a = self.execute(rb).await?;
        let (host, status, ct) = (a.host.clone(), a.status, a.content_type.clone());
        let mt = crate::error::media_type(&ct);
        if status != 200 || mt != "text/event-stream" {
            let body = a.body().await.unwrap_or_default();
            if status == 200 {
                return Err(Error::Protocol(format!(
                    "watch answered {mt:?}, not an event stream"
                )));
            }
            return Err(self.problem(&host, status, &ct, &body));
        }
        let mut events = Events {
            body: a.stream(),
            parser: Parser::new(MAX_EVENT),
            queue: VecDeque::new(),
        };
        let first = events.next().await.map_err(|e| match e {
            Error::StreamEnded { detail, .. } => {
                ended(None, None, format!("before its marker: {detail}"))
            }
            e => e,
        })?;
        if first.name != "snapshot" {
            return Err(stream_end(&first).unwrap_or_else(|| {
                Error::Protocol(format!(
                    "the first event of a watch stream is {:?}, not snapshot",
                    first.name
                ))
            }));
        }
        let m: SnapshotEvent = serde_json::from_str(&first.data)
            .map_err(|e| Error::Protocol(format!("decoding the snapshot marker: {e}")))?;
        let by_sub: HashMap<String, String> = m
            .subscriptions
            .iter()
            .map(|s| (s.id.clone(), s.selector.clone()))
            .collect();
        let marker = Marker {
            epoch: m.epoch,
            revision: m.revision,
            selectors: m
                .subscriptions
                .into_iter()
                .map(|s| MarkerPage {
                    selector: s.selector,
                    items: s.items,
                    next_cursor: s.next_cursor.filter(|c| !c.is_empty()),
                })
                .collect(),
        };
        let inner = futures_util::stream::unfold(Some((events, by_sub)), |st| async move {
            let (mut events, by_sub) = st?;
            loop {
                let ev = match events.next().await {
                    Ok(ev) => ev,
                    Err(e) => return Some((Err(e), None)),
                };
                if ev.name != "change" {
                    if let Some(end) = stream_end(&ev) {
                        return Some((Err(end), None));
                    }
                    continue; // an event this SDK does not know: ignored
                }
                let c: ChangeEvent = match serde_json::from_str(&ev.data) {
                    Ok(c) => c,
                    Err(e) => {
                        let err = ended(None, None, format!("undecodable change: {e}"));
                        return Some((Err(err), None));
                    }
                };
                let ch = Change {
                    selector: by_sub.get(&c.subscription_id).cloned().unwrap_or_default(),
                    route: c.route,
                    kind: c.kind,
                    revision: c.revision,
                    item: c.item,
                };
                return Some((Ok(ch), Some((events, by_sub))));
            }
        });
        Ok(Subscription {
            marker,
            session: session.map(|id| (self.clone(), id.to_string())),
            inner: Box::pin(inner),
        })
    }
}
