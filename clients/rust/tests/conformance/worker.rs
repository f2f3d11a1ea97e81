//! The worker ops: `worker_acquire`, `worker_extend`, `worker_lost`,
//! `worker_holds`.

use crate::{str_of, timeout_of, Runner, Worker};
use muster_client::{AcquireOptions, Error};
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

impl Runner {
    /// worker_acquire: the worker (its client built on first use) creates a
    /// session (TTL session_ttl_ms, default 10 s) when it has none or
    /// new_session asks, and acquires route, waiting up to wait_ms in its
    /// queue when given. An error advised backoff (a transport error, a
    /// failover in progress) is retried until timeout_ms; the fencing token
    /// must be at least min_token and above every token of the route seen
    /// before.
    pub(crate) async fn worker_acquire(&mut self, st: &Value) -> Result<(), String> {
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
    pub(crate) async fn worker_extend(&self, st: &Value) -> Result<(), String> {
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
    pub(crate) async fn worker_lost(&self, st: &Value) -> Result<(), String> {
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
    pub(crate) async fn worker_holds(&self, st: &Value) -> Result<(), String> {
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
}
