//! The runner's steps: the control API, the observer ops and the clients
//! they use; every other op goes to the harness verbatim.

use crate::{matches, str_of, timeout_of, Runner, Watched, OBSERVER_OPS};
use muster_client::{Client, Error, ObserveOptions, View};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

impl Runner {
    pub(crate) async fn get_json(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<Value, String> {
        let r = self
            .http
            .get(format!("{}{path}", self.h.control))
            .query(query)
            .send()
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let status = r.status();
        let body: Value = r.json().await.map_err(|e| format!("{path}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{path}: {status} {body}"));
        }
        Ok(body)
    }

    /// POSTs body to the control API: the answer's status and text.
    pub(crate) async fn post_raw(
        &self,
        path: &str,
        body: String,
    ) -> Result<(reqwest::StatusCode, String), String> {
        let r = self
            .http
            .post(format!("{}{path}", self.h.control))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let status = r.status();
        Ok((status, r.text().await.unwrap_or_default()))
    }

    pub(crate) async fn post(&self, path: &str, body: String) -> Result<(), String> {
        match self.post_raw(path, body).await? {
            (status, _) if status.is_success() => Ok(()),
            (status, text) => Err(format!("{status} {text}")),
        }
    }

    /// POST /scenario: Some(why) when the harness skips the scenario.
    pub(crate) async fn load(&self, text: String) -> Result<Option<String>, String> {
        let (status, answer) = self.post_raw("/scenario", text).await?;
        if status.is_success() {
            return Ok(None);
        }
        let body: Value = serde_json::from_str(&answer).unwrap_or_default();
        if status.as_u16() == 409 && str_of(&body, "code") == "scenario_skipped" {
            return Ok(Some(str_of(&body, "detail").to_string()));
        }
        Err(format!("POST /scenario: {status} {answer}"))
    }

    pub(crate) fn observer(&self, st: &Value) -> Result<&Watched, String> {
        let name = str_of(st, "observer");
        self.observers
            .get(name)
            .ok_or_else(|| format!("no observer {name:?}"))
    }

    pub(crate) async fn step(&mut self, st: &Value) -> Result<(), String> {
        let op = str_of(st, "op");
        if !OBSERVER_OPS.contains(&op) {
            return self.post("/step", st.to_string()).await;
        }
        match op {
            "observe" => self.observe(st).await,
            "worker_acquire" => self.worker_acquire(st).await,
            "worker_extend" => self.worker_extend(st).await,
            "worker_lost" => self.worker_lost(st).await,
            "worker_holds" => self.worker_holds(st).await,
            "wait_ready" => {
                let w = self.observer(st)?;
                match tokio::time::timeout(timeout_of(st), w.o.ready()).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(format!("stopped: {e}")),
                    Err(_) => Err(format!("not ready in time ({:?})", w.o.error())),
                }
            }
            "expect_not_ready" => {
                if self.observer(st)?.o.is_ready() {
                    return Err("the observer is ready".into());
                }
                Ok(())
            }
            "expect_view" => self.expect_view(st).await,
            "mark_epoch" => {
                let epoch = self.observer(st)?.o.view().epoch;
                self.marks.insert(str_of(st, "observer").to_string(), epoch);
                Ok(())
            }
            "expect_same_view" => self.expect_same_view(st).await,
            "expect_stopped" => {
                let w = self.observer(st)?;
                if tokio::time::timeout(timeout_of(st), w.o.stopped())
                    .await
                    .is_err()
                {
                    return Err("the observer did not stop".into());
                }
                let got = w.o.error();
                let want = str_of(st, "expect_error");
                match got.as_ref().and_then(Error::code) {
                    Some(code) if code == want => Ok(()),
                    _ => Err(format!("stopped with {got:?}, want {want}")),
                }
            }
            "close_observer" => {
                let w = self.observer(st)?;
                let max = Duration::from_millis(st["max_ms"].as_u64().unwrap_or(1000));
                if tokio::time::timeout(max, w.o.close()).await.is_err() {
                    return Err(format!("close did not return within {max:?}"));
                }
                match w.o.error() {
                    Some(Error::Closed) => Ok(()),
                    other => Err(format!("error after close: {other:?}")),
                }
            }
            _ => unreachable!(),
        }
    }

    /// A client of the proxy (or of the brokers the step names, in order:
    /// `GET /brokers` gives their URLs) with the token's secret, broken as
    /// the scenario's variant asks.
    pub(crate) async fn client(&self, st: &Value) -> Result<Client, String> {
        let token = str_of(st, "token");
        let secret = self
            .tokens
            .get(token)
            .ok_or_else(|| format!("no token {token:?}"))?;
        let names: Vec<&str> = st["brokers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| b.as_str().unwrap_or(""))
            .collect();
        let mut bases = vec![self.h.proxy.clone()];
        if !names.is_empty() {
            let urls = self.get_json("/brokers", &[]).await?;
            bases = names
                .iter()
                .map(|n| match str_of(&urls, n) {
                    "" => Err(format!("no broker {n:?} in GET /brokers")),
                    u => Ok(u.to_string()),
                })
                .collect::<Result<_, _>>()?;
        }
        Client::builder_list(bases)
            .token(secret.as_str())
            .faults(self.faults)
            .build()
            .map_err(|e| e.to_string())
    }

    pub(crate) async fn observe(&mut self, st: &Value) -> Result<(), String> {
        let token = str_of(st, "token");
        let mut opts = ObserveOptions::default().faults(self.faults);
        if let Some(n) = st["page_size"].as_u64() {
            opts = opts.page_size(n as usize);
        }
        if let Some(ms) = st["reconcile_ms"].as_u64() {
            opts = opts.reconcile_interval(Duration::from_millis(ms));
        }
        if let Some(j) = st["jitter"].as_f64() {
            opts = opts.reconcile_jitter(j);
        }
        if let Some(ms) = st["shortest_ttl_ms"].as_u64() {
            opts = opts.shortest_ttl(Duration::from_millis(ms));
        }
        let client = self.client(st).await?;
        let selector = str_of(st, "selector");
        let o = client.observe(selector, opts).map_err(|e| e.to_string())?;
        let w = Watched {
            o,
            token: token.to_string(),
            selector: selector.to_string(),
        };
        self.observers.insert(str_of(st, "observer").to_string(), w);
        Ok(())
    }

    /// Why the view does not satisfy the step, `None` when it does.
    pub(crate) async fn view_problem(
        &self,
        st: &Value,
        w: &Watched,
        v: &View,
    ) -> Result<Option<String>, String> {
        if !v.ready {
            return Ok(Some(format!("not ready ({:?})", w.o.error())));
        }
        let by_route: HashMap<&str, &muster_client::Item> =
            v.items.iter().map(|it| (it.route.as_str(), it)).collect();
        if let Some(n) = st["count"].as_u64() {
            if v.items.len() as u64 != n {
                return Ok(Some(format!("{} items, want {n}", v.items.len())));
            }
        }
        for c in st["contains"].as_array().into_iter().flatten() {
            let route = str_of(c, "route");
            let Some(it) = by_route.get(route) else {
                return Ok(Some(format!("missing {route}")));
            };
            let owner = str_of(c, "owner_id");
            if !owner.is_empty() && it.owner_id != owner {
                return Ok(Some(format!(
                    "{route} held by {}, want {owner}",
                    it.owner_id
                )));
            }
            let holder = str_of(c, "holder");
            if !holder.is_empty() {
                let h = self.get_json(&format!("/holder/{holder}"), &[]).await?;
                if it.holder_incarnation != str_of(&h, "holder_incarnation") {
                    return Ok(Some(format!(
                        "{route} not held by {holder}'s current session"
                    )));
                }
            }
        }
        for r in st["excludes"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap_or("");
            if by_route.contains_key(r) {
                return Ok(Some(format!("still has {r}")));
            }
        }
        if st["epoch_not_mark"].as_bool() == Some(true)
            && self.marks.get(str_of(st, "observer")) == Some(&v.epoch)
        {
            return Ok(Some(format!("still in the marked epoch {}", v.epoch)));
        }
        if st["matches_list"].as_bool() == Some(true) {
            let l = self
                .get_json("/list", &[("selector", &w.selector), ("token", &w.token)])
                .await?;
            if str_of(&l, "epoch") != v.epoch {
                return Ok(Some(format!(
                    "view of epoch {}, LIST answered in epoch {}",
                    v.epoch,
                    str_of(&l, "epoch")
                )));
            }
            let listed: BTreeSet<String> = l["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|it| {
                    format!(
                        "{}@{}",
                        str_of(it, "route"),
                        str_of(it, "holder_incarnation")
                    )
                })
                .collect();
            let viewed: BTreeSet<String> = v
                .items
                .iter()
                .map(|it| format!("{}@{}", it.route, it.holder_incarnation))
                .collect();
            if listed != viewed {
                return Ok(Some(format!(
                    "view ({} items) differs from LIST ({} items)",
                    viewed.len(),
                    listed.len()
                )));
            }
        }
        Ok(None)
    }

    pub(crate) async fn expect_view(&self, st: &Value) -> Result<(), String> {
        let w = self.observer(st)?;
        let deadline = Instant::now() + timeout_of(st);
        loop {
            let changed = w.o.changed();
            let Some(problem) = self.view_problem(st, w, &w.o.view()).await? else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                return Err(problem);
            }
            // LIST may lag the view: look again at the next change or soon.
            let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
        }
    }

    pub(crate) async fn expect_same_view(&self, st: &Value) -> Result<(), String> {
        let names: Vec<&str> = st["observers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if names.len() != 2 {
            return Err("expect_same_view compares two observers".into());
        }
        let within = str_of(st, "within");
        let deadline = Instant::now() + timeout_of(st);
        loop {
            let mut views = Vec::new();
            for n in &names {
                let w = self
                    .observers
                    .get(*n)
                    .ok_or_else(|| format!("no observer {n:?}"))?;
                let v = w.o.view();
                let set: BTreeSet<String> = v
                    .items
                    .iter()
                    .filter(|it| matches(within, &it.route))
                    .map(|it| format!("{}@{}", it.route, it.holder_incarnation))
                    .collect();
                views.push((v.ready, set));
            }
            if views[0].0 && views[1].0 && views[0].1 == views[1].1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("views differ:\n{:?}\n{:?}", views[0], views[1]));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
