//! LIST (one page, or every page as a lazy [`Stream`]) and the exact
//! lookup of one route.

use crate::client::{Client, Route};
use crate::error::Result;
use crate::wire::{Item, LeasePage, LeaseStatus};
use futures_core::Stream;
use reqwest::Method;

/// Tunes [`Client::list`] and [`Client::list_page`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// The page size, 1..500; 0 means the broker's default (100).
    pub limit: usize,
    /// Continues a snapshot: a [`Page`]'s `next_cursor`, or the `next_cursor`
    /// of a watch marker. It is bound to the selector string (and family,
    /// epoch and snapshot): with another selector the broker answers
    /// `invalid_cursor`.
    pub cursor: Option<String>,
}

/// One page of held leases, read from the snapshot of the broker lifetime
/// `epoch` at `revision`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The held leases, in route order.
    pub items: Vec<Item>,
    /// `None` on the last page.
    pub next_cursor: Option<String>,
    /// The broker lifetime of the snapshot.
    pub epoch: String,
    /// The revision of the snapshot.
    pub revision: i64,
}

impl Client {
    /// Reads one page of the held leases matching `selector`. An exact
    /// selector answers zero or one item and never a cursor.
    pub async fn list_page(&self, selector: &str, opts: &ListOptions) -> Result<Page> {
        let mut url = self.url(&["v1", "leases"]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("selector", selector);
            if opts.limit != 0 {
                q.append_pair("limit", &opts.limit.to_string());
            }
            if let Some(c) = &opts.cursor {
                q.append_pair("cursor", c);
            }
        }
        let p: LeasePage = self.call(self.request(Method::GET, url), 200).await?;
        Ok(Page {
            items: p.items,
            next_cursor: p.next_cursor.filter(|c| !c.is_empty()),
            epoch: p.snapshot.epoch,
            revision: p.snapshot.revision,
        })
    }

    /// The held leases matching `selector`, one request per page, lazily:
    /// dropping the stream early sends no further request. Every item comes
    /// from one snapshot (no duplicate, no omission while leases change). On
    /// an error the stream yields it once and ends; `CursorExpired` and
    /// `EpochChanged` mean "list again from the start".
    ///
    /// ```no_run
    /// # async fn f(client: muster_client::Client) -> muster_client::Result<()> {
    /// use futures_util::StreamExt;
    /// let mut items = std::pin::pin!(client.list("lease://acme/renderers/*", Default::default()));
    /// while let Some(item) = items.next().await {
    ///     let item = item?;
    ///     println!("{} {}", item.route, item.owner_id);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list(
        &self,
        selector: &str,
        opts: ListOptions,
    ) -> impl Stream<Item = Result<Item>> + Send + 'static {
        struct State {
            c: Client,
            selector: String,
            opts: ListOptions,
            items: std::vec::IntoIter<Item>,
            done: bool,
        }
        let st = State {
            c: self.clone(),
            selector: selector.to_string(),
            opts,
            items: Vec::new().into_iter(),
            done: false,
        };
        futures_util::stream::unfold(st, |mut st| async move {
            loop {
                if let Some(it) = st.items.next() {
                    return Some((Ok(it), st));
                }
                if st.done {
                    return None;
                }
                match st.c.list_page(&st.selector, &st.opts).await {
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                    Ok(p) => {
                        st.items = p.items.into_iter();
                        st.done = p.next_cursor.is_none();
                        st.opts.cursor = p.next_cursor;
                    }
                }
            }
        })
    }

    /// Reads the current state of one exact route.
    pub async fn get(&self, route: &str) -> Result<LeaseStatus> {
        let r = Route::parse(route)?;
        self.call(self.request(Method::GET, r.url(self, None)), 200)
            .await
    }
}
