//! Starts the shared conformance harness (clients/conformance/run-harness.sh:
//! the real broker binary, a test proxy and the control API) once per test
//! binary. It stops when its stdin closes, i.e. when this process exits.

#![allow(dead_code)]

use serde::Deserialize;
use std::io::BufRead;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// The URLs of a running harness.
#[derive(Debug, Deserialize)]
pub struct Harness {
    pub control: String,
    pub broker: String,
    pub proxy: String,
}

struct Running {
    urls: Harness,
    _child: Mutex<(Child, ChildStdin)>,
}

static POOL: Mutex<Vec<&'static Running>> = Mutex::new(Vec::new());

/// The first harness of this test binary, started at the first call.
pub fn harness() -> &'static Harness {
    harnesses(1)[0]
}

/// `n` harnesses (each its own broker and proxy), started as needed.
pub fn harnesses(n: usize) -> Vec<&'static Harness> {
    let mut pool = POOL.lock().unwrap();
    while pool.len() < n {
        pool.push(Box::leak(Box::new(start())));
    }
    pool[..n].iter().map(|r| &r.urls).collect()
}

fn start() -> Running {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/run-harness.sh");
    let mut child = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if std::env::var_os("MUSTER_HARNESS_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("starting run-harness.sh");
    let stdin = child.stdin.take().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("reading the harness's first line");
    let h: Harness = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("the harness printed {line:?}: {e} (set MUSTER_HARNESS_LOG=1)"));
    Running {
        urls: h,
        _child: Mutex::new((child, stdin)),
    }
}

/// The bearer secret of each token name (`GET /tokens`).
pub async fn tokens(h: &Harness) -> std::collections::HashMap<String, String> {
    reqwest::get(format!("{}/tokens", h.control))
        .await
        .expect("GET /tokens")
        .json()
        .await
        .expect("GET /tokens")
}
