//! The Rust runner of the language-neutral observer scenarios in
//! `clients/conformance/` (format in its README), through the shared harness
//! (the real broker binary behind a test proxy). The runner implements the
//! observer ops and the worker ops (`worker_acquire`, `worker_extend`,
//! `worker_lost`, `worker_holds`) and forwards every other op verbatim to the harness.

mod common;

use common::{harness, Harness};
use muster_client::{
    AcquireOptions, Client, Error, Faults, Lease, ObserveOptions, Observer, Session, View,
};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// One harness per test binary, one scenario at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const OBSERVER_OPS: &[&str] = &[
    "observe",
    "wait_ready",
    "expect_not_ready",
    "expect_view",
    "mark_epoch",
    "expect_same_view",
    "expect_stopped",
    "close_observer",
    "worker_acquire",
    "worker_extend",
    "worker_lost",
    "worker_holds",
];

struct Watched {
    o: Observer,
    token: String,
    selector: String,
}

/// A worker of the scenario: one client for the whole scenario (it keeps the
/// following state), every session it made and which one is current.
struct Worker {
    c: Client,
    session: Option<usize>,
    sessions: Vec<Session>,
    /// By route: the lease the last worker_acquire got.
    leases: HashMap<String, Lease>,
}

struct Runner {
    h: &'static Harness,
    tokens: HashMap<String, String>,
    http: reqwest::Client,
    faults: Faults,
    observers: HashMap<String, Watched>,
    marks: HashMap<String, String>,
    workers: HashMap<String, Worker>,
    /// Per route, the highest fencing token a worker got.
    highest: HashMap<String, i64>,
}

/// Every scenario file, in order; only those whose file name contains
/// `MUSTER_SCENARIO` when it is set (a focused run: e.g.
/// `MUSTER_SCENARIO=21_ cargo test --test conformance`).
fn scenarios() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 12,
        "only {} scenarios in {}",
        files.len(),
        dir.display()
    );
    if let Some(only) = std::env::var_os("MUSTER_SCENARIO") {
        let only = only.to_string_lossy().to_string();
        files.retain(|f| f.file_name().unwrap().to_string_lossy().contains(&only));
    }
    files
}

fn str_of<'a>(st: &'a Value, k: &str) -> &'a str {
    st[k].as_str().unwrap_or("")
}

fn timeout_of(st: &Value) -> Duration {
    Duration::from_millis(st["timeout_ms"].as_u64().unwrap_or(5000))
}

/// The selector grammar's matching (`*` one segment, `**` zero or more),
/// for the runner only.
fn matches(sel: &str, route: &str) -> bool {
    fn m(s: &[&str], r: &[&str]) -> bool {
        match s.split_first() {
            None => r.is_empty(),
            Some((&"**", rest)) => (0..=r.len()).any(|i| m(rest, &r[i..])),
            Some((first, rest)) => {
                !r.is_empty() && (*first == "*" || *first == r[0]) && m(rest, &r[1..])
            }
        }
    }
    let s: Vec<&str> = sel.trim_start_matches("lease://").split('/').collect();
    let r: Vec<&str> = route.trim_start_matches("lease://").split('/').collect();
    m(&s, &r)
}

impl Runner {
    async fn get_json(&self, path: &str, query: &[(&str, &str)]) -> Result<Value, String> {
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
    async fn post_raw(
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

    async fn post(&self, path: &str, body: String) -> Result<(), String> {
        match self.post_raw(path, body).await? {
            (status, _) if status.is_success() => Ok(()),
            (status, text) => Err(format!("{status} {text}")),
        }
    }

    /// POST /scenario: Some(why) when the harness skips the scenario.
    async fn load(&self, text: String) -> Result<Option<String>, String> {
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

    fn observer(&self, st: &Value) -> Result<&Watched, String> {
        let name = str_of(st, "observer");
        self.observers
            .get(name)
            .ok_or_else(|| format!("no observer {name:?}"))
    }

    async fn step(&mut self, st: &Value) -> Result<(), String> {
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
    async fn client(&self, st: &Value) -> Result<Client, String> {
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

    /// worker_acquire: the worker (its client built on first use) creates a
    /// session (TTL session_ttl_ms, default 10 s) when it has none or
    /// new_session asks, and acquires route, waiting up to wait_ms in its
    /// queue when given. An error advised backoff (a transport error, a
    /// failover in progress) is retried until timeout_ms; the fencing token
    /// must be at least min_token and above every token of the route seen
    /// before.
    async fn worker_acquire(&mut self, st: &Value) -> Result<(), String> {
        let name = str_of(st, "worker").to_string();
        let route = str_of(st, "route");
        let ttl = Duration::from_millis(st["ttl_ms"].as_u64().unwrap_or(0));
        let mut opts = AcquireOptions::default();
        if let Some(ms) = st["wait_ms"].as_u64().filter(|&ms| ms > 0) {
            opts = opts.wait(Duration::from_millis(ms));
        }
        if !self.workers.contains_key(&name) {
            let c = self.client(st).await?;
            let w = Worker {
                c,
                session: None,
                sessions: Vec::new(),
                leases: HashMap::new(),
            };
            self.workers.insert(name.clone(), w);
        }
        let w = self.workers.get_mut(&name).unwrap();
        if st["new_session"].as_bool() == Some(true) {
            w.session = None;
        }
        let session_ttl = Duration::from_millis(
            st["session_ttl_ms"]
                .as_u64()
                .filter(|&ms| ms > 0)
                .unwrap_or(10_000),
        );
        let deadline = Instant::now() + timeout_of(st);
        let lease = loop {
            let got = match w.session {
                Some(i) => w.sessions[i].acquire(route, ttl, opts.clone()).await,
                None => match w.c.new_session(&name, session_ttl).await {
                    Ok(s) => {
                        w.sessions.push(s);
                        w.session = Some(w.sessions.len() - 1);
                        let s = w.sessions.last().unwrap();
                        s.acquire(route, ttl, opts.clone()).await
                    }
                    Err(e) => Err(e),
                },
            };
            match got {
                Ok(l) => break l,
                Err(e) if e.is_retryable() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(format!("acquire {route}: {e}")),
            }
        };
        let (tok, min) = (lease.fencing_token(), st["min_token"].as_i64().unwrap_or(0));
        let high = self.highest.get(route).copied().unwrap_or(0);
        if tok < min || tok <= high {
            return Err(format!(
                "fencing token {tok}, want at least {min} and above {high}"
            ));
        }
        self.highest.insert(route.to_string(), tok);
        w.leases.insert(route.to_string(), lease);
        Ok(())
    }

    /// worker_extend: the lease of route that the worker's last
    /// worker_acquire got is extended by ttl_ms (`Lease::extend`, its fencing
    /// token); an error advised backoff is retried until timeout_ms.
    async fn worker_extend(&self, st: &Value) -> Result<(), String> {
        let (name, route) = (str_of(st, "worker"), str_of(st, "route"));
        let lease = self
            .workers
            .get(name)
            .and_then(|w| w.leases.get(route))
            .ok_or_else(|| format!("worker {name:?} acquired no lease of {route}"))?;
        let ttl = Duration::from_millis(st["ttl_ms"].as_u64().unwrap_or(0));
        let deadline = Instant::now() + timeout_of(st);
        loop {
            match lease.extend(ttl).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_retryable() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(format!("extend {route}: {e}")),
            }
        }
    }

    /// worker_lost: the lease of route that the worker's last worker_acquire
    /// got reports its loss (`lost()` cancelled, `error()` a `LeaseLost`)
    /// within timeout_ms.
    async fn worker_lost(&self, st: &Value) -> Result<(), String> {
        let (name, route) = (str_of(st, "worker"), str_of(st, "route"));
        let lease = self
            .workers
            .get(name)
            .and_then(|w| w.leases.get(route))
            .ok_or_else(|| format!("worker {name:?} acquired no lease of {route}"))?;
        if tokio::time::timeout(timeout_of(st), lease.lost().cancelled())
            .await
            .is_err()
        {
            return Err(format!(
                "the lease of {route} reported no loss within {:?}",
                timeout_of(st)
            ));
        }
        match lease.error() {
            Some(Error::LeaseLost(_)) => Ok(()),
            other => Err(format!(
                "the lease of {route} ended with {other:?}, want a LeaseLost"
            )),
        }
    }

    /// worker_holds: the lease of route that the worker's last
    /// worker_acquire got reports no loss (`lost()` stays uncancelled) for
    /// for_ms.
    async fn worker_holds(&self, st: &Value) -> Result<(), String> {
        let (name, route) = (str_of(st, "worker"), str_of(st, "route"));
        let lease = self
            .workers
            .get(name)
            .and_then(|w| w.leases.get(route))
            .ok_or_else(|| format!("worker {name:?} acquired no lease of {route}"))?;
        let hold = Duration::from_millis(st["for_ms"].as_u64().unwrap_or(0));
        match tokio::time::timeout(hold, lease.lost().cancelled()).await {
            Err(_) => Ok(()),
            Ok(()) => Err(format!(
                "the lease of {route} was lost within {hold:?}: {:?}",
                lease.error()
            )),
        }
    }

    async fn observe(&mut self, st: &Value) -> Result<(), String> {
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
    async fn view_problem(
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

    async fn expect_view(&self, st: &Value) -> Result<(), String> {
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

    async fn expect_same_view(&self, st: &Value) -> Result<(), String> {
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

/// How a scenario ran when no step failed.
#[derive(Debug)]
enum Ran {
    Passed,
    /// The harness refused to run it here, saying why (`scenario_skipped`:
    /// a placed scenario with MUSTER_TEST_PG=off).
    Skipped(String),
}

/// Says that a scenario was skipped, and why, on the real stderr (which the
/// test harness does not capture): a skip must be visible.
fn report_skip(name: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIP {name}: {why}");
}

/// Runs one scenario file; Err names the failing step.
async fn run_scenario(
    h: &'static Harness,
    path: &std::path::Path,
    faults: Faults,
) -> Result<Ran, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let sc: Value = serde_json::from_str(&text).unwrap();
    let mut r = Runner {
        h,
        tokens: common::tokens(h).await,
        http: reqwest::Client::new(),
        faults,
        observers: HashMap::new(),
        marks: HashMap::new(),
        workers: HashMap::new(),
        highest: HashMap::new(),
    };
    if let Some(why) = r.load(text.clone()).await? {
        return Ok(Ran::Skipped(why));
    }
    let mut result = Ok(Ran::Passed);
    for (i, st) in sc["steps"].as_array().unwrap().iter().enumerate() {
        if let Err(e) = r.step(st).await {
            result = Err(format!("step {} ({}): {e}", i + 1, str_of(st, "op")));
            break;
        }
    }
    for w in r.observers.values() {
        // A broken observer's close may hang: dropping it is all that is left.
        let _ = tokio::time::timeout(Duration::from_secs(1), w.o.close()).await;
    }
    for w in r.workers.values() {
        // A session's broker may be dead: bounded.
        for s in &w.sessions {
            let _ = tokio::time::timeout(Duration::from_secs(1), s.close()).await;
        }
    }
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_passes() {
    let _serial = SERIAL.lock().await;
    let mut failed = Vec::new();
    for f in scenarios() {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let t0 = Instant::now();
        match run_scenario(harness(), &f, Faults::default()).await {
            Ok(Ran::Passed) => eprintln!("PASS {name} ({:?})", t0.elapsed()),
            Ok(Ran::Skipped(why)) => report_skip(&name, &why),
            Err(e) => {
                eprintln!("FAIL {name}: {e}");
                failed.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n")
    );
}

fn name_of(path: &std::path::Path) -> String {
    let sc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    str_of(&sc, "name").to_string()
}

/// The deliberately broken observer each scenario must catch (the Go
/// runner's `brokenVariants`): a scenario that passes with a broken observer
/// proves nothing.
fn broken_variant(scenario: &str) -> Option<Faults> {
    let f = Faults::default();
    Some(match scenario {
        "bootstrap-changes-before-stream" | "observation-grants-nothing" => Faults {
            ignore_snapshot: true,
            ..f
        },
        "bootstrap-changes-during-paging" => Faults {
            drop_buffered: true,
            ..f
        },
        "bootstrap-changes-right-after-ready"
        | "waiter-granted-after-release"
        | "superseded-same-session-same-selector"
        | "wildcard-registration-limit" => Faults {
            ignore_live: true,
            ..f
        },
        "steady-state-updates" | "expired-lease-leaves-view" => Faults {
            ignore_expired: true,
            ..f
        },
        "overflow-recovery" => Faults {
            stay_ready: true,
            ..f
        },
        "broker-restart-fresh-bootstrap" => Faults {
            merge_views: true,
            ..f
        },
        "holder-session-ends" => Faults {
            ignore_session_closed: true,
            ..f
        },
        "periodic-reconciliation" => Faults {
            no_reconcile: true,
            ..f
        },
        "close-while-page-hangs" => Faults {
            uncancellable_pages: true,
            ..f
        },
        "overlapping-observers-converge" => Faults {
            drop_buffered: true,
            ignore_live: true,
            ..f
        },
        "family-isolation" | "forbidden-selector-stops-observer" => Faults {
            retry_fatal: true,
            ..f
        },
        "follow-owner" => Faults {
            no_follow: true,
            ..f
        },
        "failover-follow-owner" => Faults {
            sticky_owner: true,
            ..f
        },
        "grant-after-wait-keeps-lease" => Faults {
            send_plus_ttl: true,
            ..f
        },
        "restart-loses-lease-promptly" => Faults {
            late_loss: true,
            ..f
        },
        "dead-broker-first" => Faults {
            single_broker: true,
            ..f
        },
        "unavailable-broker-moves-on" => Faults {
            stay_on_unavailable: true,
            ..f
        },
        "planned-move-keeps-session" => Faults {
            creator_loss: true,
            ..f
        },
        _ => return None,
    })
}

/// The step at which a scenario must catch its broken variant, where a
/// failure elsewhere would prove nothing: `grant-after-wait-keeps-lease`
/// checks that the lease is still held after its grant,
/// `restart-loses-lease-promptly` that it is lost within 1 s of the new
/// epoch, `planned-move-keeps-session` that the lease extends at its
/// creator's new lifetime.
fn caught_at(scenario: &str) -> Option<&'static str> {
    match scenario {
        "grant-after-wait-keeps-lease" => Some("worker_holds"),
        "restart-loses-lease-promptly" => Some("worker_lost"),
        "planned-move-keeps-session" => Some("worker_extend"),
        _ => None,
    }
}

/// Every scenario FAILS with its broken observer. Every variant also skips
/// the periodic reconciliation, which would otherwise repair most faults
/// within its interval and let a slow scenario pass by luck; the control
/// shows that skipping it alone fails only the scenario about
/// reconciliation. The failures are mostly waits running out, so the
/// variants run concurrently on four harnesses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_catches_its_broken_observer() {
    let _serial = SERIAL.lock().await;
    let files = scenarios();
    let no_reconcile = Faults {
        no_reconcile: true,
        ..Faults::default()
    };
    for f in &files {
        let name = name_of(f);
        let r = run_scenario(harness(), f, no_reconcile).await;
        if let Ok(Ran::Skipped(why)) = &r {
            report_skip(&name, why);
            continue;
        }
        assert_eq!(
            r.is_err(),
            name == "periodic-reconciliation",
            "control (no reconciliation) on {name}: {r:?}"
        );
    }
    let queue = std::sync::Mutex::new(files.clone());
    let worker = |h: &'static Harness| {
        let queue = &queue;
        async move {
            let mut passed = Vec::new();
            loop {
                let Some(f) = queue.lock().unwrap().pop() else {
                    return passed;
                };
                let name = name_of(&f);
                let Some(mut faults) = broken_variant(&name) else {
                    passed.push(format!(
                        "{name}: no broken variant: add one to broken_variant"
                    ));
                    continue;
                };
                faults.no_reconcile = true;
                match (run_scenario(h, &f, faults).await, caught_at(&name)) {
                    (Ok(Ran::Passed), _) => passed.push(format!("{name} passed with {faults:?}")),
                    (Ok(Ran::Skipped(why)), _) => report_skip(&name, &why),
                    (Err(e), Some(step)) if !e.contains(&format!("({step})")) => passed.push(
                        format!("{name} failed with {faults:?}, but not at {step}: {e}"),
                    ),
                    (Err(e), _) => eprintln!("{name} caught {faults:?}: {e}"),
                }
            }
        }
    };
    let passed: Vec<String> =
        futures_util::future::join_all(common::harnesses(4).into_iter().map(worker))
            .await
            .into_iter()
            .flatten()
            .collect();
    assert!(
        passed.is_empty(),
        "scenarios that cannot fail (or not where they should):\n{}",
        passed.join("\n")
    );
}

/// Further broken clients a scenario must catch, each at the named step.
fn more_broken_variants() -> Vec<(&'static str, Faults, &'static str)> {
    vec![
        (
            "failover-follow-owner",
            Faults {
                never_lost: true,
                ..Faults::default()
            },
            "worker_lost",
        ),
        (
            "unavailable-broker-moves-on",
            Faults {
                single_broker: true,
                ..Faults::default()
            },
            "worker_acquire",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_broken_clients_are_caught() {
    let _serial = SERIAL.lock().await;
    for (scenario, mut faults, step) in more_broken_variants() {
        let Some(f) = scenarios().into_iter().find(|f| name_of(f) == scenario) else {
            assert!(
                std::env::var_os("MUSTER_SCENARIO").is_some(),
                "no scenario {scenario}"
            );
            continue; // not in a focused run
        };
        faults.no_reconcile = true;
        match run_scenario(harness(), &f, faults).await {
            Ok(Ran::Skipped(why)) => report_skip(scenario, &why),
            Err(e) if e.contains(&format!("({step})")) => {
                eprintln!("{scenario} caught {faults:?}: {e}")
            }
            other => panic!("{scenario} with {faults:?}: {other:?}, want a failure at {step}"),
        }
    }
}

#[test]
fn runner_selector_matching() {
    assert!(matches("lease://acme/*/x", "lease://acme/r/x"));
    assert!(matches("lease://acme/**", "lease://acme/r/x"));
    assert!(!matches("lease://acme/*", "lease://acme/r/x"));
    assert!(!matches("lease://other/**", "lease://acme/r/x"));
}
