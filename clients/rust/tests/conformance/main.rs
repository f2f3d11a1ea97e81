//! The Rust runner of the language-neutral observer scenarios in
//! `clients/conformance/` (format in its README), through the shared harness
//! (the real broker binary behind a test proxy). The runner implements the
//! observer ops and the worker ops (`worker_acquire`, `worker_extend`,
//! `worker_lost`, `worker_holds`) and forwards every other op verbatim to the harness:
//! the steps and the observer ops are runner.rs, the worker ops worker.rs.

#[path = "../common/mod.rs"]
mod common;
mod runner;
mod worker;

use common::{harness, Harness};
use muster_client::{Client, Faults, Lease, Observer, Session};
use serde_json::Value;
use std::collections::HashMap;
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
