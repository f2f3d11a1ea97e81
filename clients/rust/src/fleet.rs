//! Fleet helpers: the desired set of one fleet root (register, get, forget,
//! desired, sweep with the caller's validator), plan and gap.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::wire::{GapAnswer, PlanAnswer, PlanRequest, RegisterRequest, Spec, SpecPage};
use futures_core::Stream;
use futures_util::StreamExt;
use reqwest::Method;
use serde_json::value::RawValue;

/// The desired set of one fleet root: the durable specs of the work that
/// should run. Nothing a worker does to its leases (or its death) edits the
/// desired set; [`Fleet::forget`] is the one way out.
#[derive(Debug, Clone)]
pub struct Fleet {
    c: Client,
    root: String,
}

/// A spec that passed a [`Fleet::sweep`], decoded by the caller's validator.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept<T> {
    /// The spec's name.
    pub name: String,
    /// What the validator made of it.
    pub spec: T,
}

/// What a [`Fleet::sweep`] kept and the names it dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepResult<T> {
    /// The specs that passed, decoded.
    pub kept: Vec<Kept<T>>,
    /// The names forgotten.
    pub dropped: Vec<String>,
}

impl<T> Default for SweepResult<T> {
    fn default() -> Self {
        SweepResult {
            kept: Vec::new(),
            dropped: Vec::new(),
        }
    }
}

/// The difference between a desired and a live set of names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Desired and not live: work nobody holds.
    pub missing: Vec<String>,
    /// Live and not desired: leases of forgotten work.
    pub orphans: Vec<String>,
    /// For [`Fleet::gap`]: the inventory revision the live set was read at
    /// (0 for [`Fleet::plan`]).
    pub revision: i64,
}

impl Client {
    /// The fleet at `root`: one or more legal segments (lowercase letters,
    /// digits, `-` and `_`) joined by `/`.
    pub fn fleet(&self, root: &str) -> Fleet {
        Fleet {
            c: self.clone(),
            root: root.to_string(),
        }
    }
}

impl Fleet {
    /// The fleet's root.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Stores `spec` (any value serde can encode; a `Box<RawValue>` is sent
    /// as is) under a new name `<kind>-<n>` and returns it. Names are never
    /// reused.
    pub async fn register<S: serde::Serialize + ?Sized>(
        &self,
        kind: &str,
        spec: &S,
    ) -> Result<Spec> {
        let raw = serde_json::value::to_raw_value(spec)
            .map_err(|e| Error::invalid_request(format!("encoding the spec: {e}")))?;
        let body = RegisterRequest {
            kind: kind.to_string(),
            spec: raw,
        };
        let url = self.c.url(&["v1", "fleets", &self.root, "specs"]);
        self.c
            .call(self.c.request(Method::POST, url).json(&body), 201)
            .await
    }

    /// Reads one spec; `SpecNotFound` when the name is not in the set.
    pub async fn get(&self, name: &str) -> Result<Spec> {
        let url = self.c.url(&["v1", "fleets", &self.root, "specs", name]);
        self.c.call(self.c.request(Method::GET, url), 200).await
    }

    /// Removes one spec from the desired set; forgetting an absent name
    /// succeeds. An illegal name (such as `Repo-1`) is refused with
    /// `InvalidName` and nothing is removed.
    pub async fn forget(&self, name: &str) -> Result<()> {
        let url = self.c.url(&["v1", "fleets", &self.root, "specs", name]);
        self.c
            .send(self.c.request(Method::DELETE, url), 204)
            .await?;
        Ok(())
    }

    /// The desired set in name order, one request per page (of up to
    /// 1,000), lazily. On an error it yields it once and ends.
    pub fn desired(&self) -> impl Stream<Item = Result<Spec>> + Send + 'static {
        struct St {
            f: Fleet,
            cursor: Option<String>,
            items: std::vec::IntoIter<Spec>,
            done: bool,
        }
        let st = St {
            f: self.clone(),
            cursor: None,
            items: Vec::new().into_iter(),
            done: false,
        };
        futures_util::stream::unfold(st, |mut st| async move {
            loop {
                if let Some(s) = st.items.next() {
                    return Some((Ok(s), st));
                }
                if st.done {
                    return None;
                }
                let mut url = st.f.c.url(&["v1", "fleets", &st.f.root, "specs"]);
                {
                    let mut q = url.query_pairs_mut();
                    q.append_pair("limit", "1000");
                    if let Some(c) = &st.cursor {
                        q.append_pair("cursor", c);
                    }
                }
                match st
                    .f
                    .c
                    .call::<SpecPage>(st.f.c.request(Method::GET, url), 200)
                    .await
                {
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                    Ok(p) => {
                        st.items = p.items.into_iter();
                        st.cursor = p.next_cursor.filter(|c| !c.is_empty());
                        st.done = st.cursor.is_none();
                    }
                }
            }
        })
    }

    /// Validates every spec of the desired set with the caller's own
    /// `validate` (for instance `|raw| serde_json::from_str::<MySpec>(raw.get())`)
    /// and forgets each one it rejects: validate-or-drop. Returns the decoded
    /// specs it kept and the names it dropped. A spec registered while the
    /// sweep runs is either validated or left alone, never dropped without
    /// validation (names are never reused). On an error the sweep stops;
    /// what it dropped until then stays dropped, and the error is returned.
    pub async fn sweep<T, E, V>(&self, mut validate: V) -> Result<SweepResult<T>>
    where
        V: FnMut(&RawValue) -> std::result::Result<T, E>,
    {
        let mut out = SweepResult::default();
        let mut specs = std::pin::pin!(self.desired());
        while let Some(s) = specs.next().await {
            let s = s?;
            match validate(&s.spec) {
                Ok(v) => out.kept.push(Kept {
                    name: s.name,
                    spec: v,
                }),
                Err(_) => {
                    self.forget(&s.name).await?;
                    out.dropped.push(s.name);
                }
            }
        }
        Ok(out)
    }

    /// Asks the broker for the pure difference of `desired` and `live` (both
    /// sorted in the answer). It changes nothing.
    pub async fn plan(&self, desired: &[String], live: &[String]) -> Result<Plan> {
        let body = PlanRequest {
            desired: desired.to_vec(),
            live: live.to_vec(),
        };
        let url = self.c.url(&["v1", "fleets", "plan"]);
        let p: PlanAnswer = self
            .c
            .call(self.c.request(Method::POST, url).json(&body), 200)
            .await?;
        Ok(Plan {
            missing: p.missing,
            orphans: p.orphans,
            revision: 0,
        })
    }

    /// Plans this fleet's desired set against the live lease inventory: the
    /// resource segment of every held lease matching `live_selector`, read
    /// from one snapshot at the returned revision. The broker answers a large
    /// gap in pages (10,000 names of each side at most); `gap` reads them all
    /// and returns the whole plan. `CursorExpired` midway means the snapshot
    /// was evicted: call `gap` again.
    pub async fn gap(&self, live_selector: &str) -> Result<Plan> {
        let mut out = Plan::default();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = self.c.url(&["v1", "fleets", &self.root, "gap"]);
            {
                let mut q = url.query_pairs_mut();
                q.append_pair("live", live_selector);
                if let Some(c) = &cursor {
                    q.append_pair("cursor", c);
                }
            }
            let g: GapAnswer = self.c.call(self.c.request(Method::GET, url), 200).await?;
            out.missing.extend(g.missing);
            out.orphans.extend(g.orphans);
            out.revision = g.revision;
            match g.next_cursor {
                Some(c) if !c.is_empty() => cursor = Some(c),
                _ => return Ok(out),
            }
        }
    }
}
