//! The SDK against the real broker serving HTTPS (docs/operations.md,
//! "TLS"), through the `rustls` feature (turned on by the dev-dependency on
//! this crate): `ClientBuilder::ca_file` for a broker whose certificate a
//! private CA signed, and `ClientBuilder::identity` for mutual TLS.
//!
//! `go run ./tests/tlsca DIR` writes the throwaway CA, the broker's
//! certificate for 127.0.0.1 and a client certificate; the broker is the
//! same `muster serve` binary the conformance harness runs (built with
//! `go build`, from Go's build cache after the harness's build), started on
//! `127.0.0.1:0` with `dev_mode: true` plus the `tls:` section, and stopped
//! when this test binary exits (its stdin closes).

use muster_client::prelude::*;
use muster_client::{AcquireOptions, Client, Error, ObserveOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// A running broker serving HTTPS.
struct Broker {
    /// `https://127.0.0.1:PORT`.
    url: String,
    /// Holds ca.pem, client.pem, client-key.pem, … (tests/tlsca).
    dir: PathBuf,
    /// The shell around the broker, and its stdin: closing it (when this
    /// test binary exits) stops the broker.
    _child: Mutex<(Child, ChildStdin)>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `cmd` in the repository root and panics with its output on failure.
fn run(cmd: &mut Command) {
    let out = cmd.current_dir(root()).output().expect("running go");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// This test binary's directory, `target/tmp/tls-PID`; the first call
/// removes those of earlier runs that have exited (Linux: their PID is gone).
fn own_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        if Path::new("/proc/self").exists() {
            for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("tls-") {
                    if !Path::new("/proc").join(pid).exists() {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
        }
        let dir = tmp.join(format!("tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// A fresh directory with tests/tlsca's files.
fn tls_dir(name: &str) -> PathBuf {
    let dir = own_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    run(Command::new("go").args(["run", "./tests/tlsca"]).arg(&dir));
    dir
}

/// The muster binary, built once per test binary.
fn muster_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = own_dir().join("muster");
        run(Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg("./cmd/muster"));
        bin
    })
}

/// Starts a dev-mode broker with tests/tlsca's `tls:` section (and
/// `client_ca_file: ca.pem` when `mutual`), and waits for its serving line.
fn start(name: &str, mutual: bool) -> Broker {
    let dir = tls_dir(name);
    let mut config = "dev_mode: true\n".to_string();
    config.push_str(&std::fs::read_to_string(dir.join("tls.yaml")).unwrap());
    if mutual {
        config.push_str(&format!(
            "  client_ca_file: {}\n",
            dir.join("ca.pem").display()
        ));
    }
    std::fs::write(dir.join("muster.yaml"), config).unwrap();
    // The shell stops the broker when our end of its stdin closes, i.e.
    // when this test binary exits.
    let mut child = Command::new("bash")
        .args([
            "-c",
            r#"bin="$1"; shift; "$bin" "$@" </dev/null & pid=$!; cat >/dev/null; kill "$pid"; wait "$pid""#,
            "muster-tls",
        ])
        .arg(muster_bin())
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.join("data"))
        .arg("--config")
        .arg(dir.join("muster.yaml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the broker");
    let stdin = child.stdin.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Reads (and drops) the log for as long as the broker runs, so it
        // never blocks on a full pipe.
        let log = std::env::var_os("MUSTER_HARNESS_LOG").is_some();
        let mut tail = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if log {
                eprintln!("broker: {line}");
            }
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if v["msg"] == "muster serving" {
                    assert_eq!(v["tls"], true, "{line}");
                    let _ = tx.send(Ok(v["addr"].as_str().unwrap().to_string()));
                }
            }
            tail.push(line);
        }
        let _ = tx.send(Err(tail.join("\n")));
    });
    let addr = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(addr)) => addr,
        other => panic!("the broker did not start: {other:?}"),
    };
    Broker {
        url: format!("https://{addr}"),
        dir,
        _child: Mutex::new((child, stdin)),
    }
}

/// The broker serving TLS, started at the first call.
fn broker() -> &'static Broker {
    static B: OnceLock<Broker> = OnceLock::new();
    B.get_or_init(|| start("server", false))
}

/// The broker serving mutual TLS, started at the first call.
fn mutual_broker() -> &'static Broker {
    static B: OnceLock<Broker> = OnceLock::new();
    B.get_or_init(|| start("mutual", true))
}

/// `e` is the SDK's transport error, and its cause (rustls's) says `why`.
#[track_caller]
fn assert_transport(e: &Error, why: &str) {
    let cause = format!("{:?}", std::error::Error::source(e));
    assert!(
        matches!(e, Error::Transport(_)) && cause.contains(why),
        "want a transport error for {why}: {e:?}"
    );
}

#[tokio::test]
async fn with_ca_file_sessions_leases_watches_and_observers_work_over_https() {
    let b = broker();
    assert!(b.url.starts_with("https://127.0.0.1:"), "{}", b.url);
    let c = Client::builder(&b.url)
        .ca_file(b.dir.join("ca.pem"))
        .build()
        .unwrap();
    let s = c
        .new_session("tls-worker", Duration::from_secs(10))
        .await
        .unwrap();
    let sel = "lease://tls/r/*";
    let mut sub = c.watch(&[sel]).await.unwrap();
    assert_eq!(sub.marker().selectors[0].selector, sel);
    assert!(!sub.marker().epoch.is_empty());
    let l = s
        .acquire(
            "lease://tls/r/a",
            Duration::from_secs(10),
            AcquireOptions::default(),
        )
        .await
        .unwrap();
    assert!(l.fencing_token() > 0);
    let ch = sub.next().await.unwrap().unwrap();
    assert_eq!(ch.route, "lease://tls/r/a");
    let o = c.observe(sel, ObserveOptions::default()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), o.ready())
        .await
        .expect("the observer got ready")
        .unwrap();
    assert_eq!(o.view().items.len(), 1, "{:?}", o.view());
    l.release().await.unwrap();
    assert!(!c.get("lease://tls/r/a").await.unwrap().held);
    o.close().await;
    s.close().await.unwrap();
}

#[tokio::test]
async fn without_the_ca_the_calls_fail_with_a_transport_error() {
    let b = broker();
    // The built-in roots do not know the test CA.
    let e = Client::new(&b.url)
        .unwrap()
        .new_session("w", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert_transport(&e, "UnknownIssuer");
    assert!(e.is_retryable(), "{e:?}");
    let e = Client::new(&b.url)
        .unwrap()
        .watch(&["lease://tls/r/*"])
        .await
        .unwrap_err();
    assert_transport(&e, "UnknownIssuer");
    // Another CA (the mutual broker's) is not the broker's either.
    let other = mutual_broker();
    let c = Client::builder(&b.url)
        .ca_file(other.dir.join("ca.pem"))
        .build()
        .unwrap();
    let e = c.get("lease://tls/r/a").await.unwrap_err();
    assert_transport(&e, "BadSignature");
}

#[tokio::test]
async fn mutual_tls_needs_the_identity() {
    let b = mutual_broker();
    let ca = b.dir.join("ca.pem");
    let c = Client::builder(&b.url)
        .ca_file(&ca)
        .identity(b.dir.join("client.pem"), b.dir.join("client-key.pem"))
        .build()
        .unwrap();
    let s = c
        .new_session("mtls", Duration::from_secs(10))
        .await
        .unwrap();
    let l = s
        .acquire(
            "lease://mtls/r/a",
            Duration::from_secs(10),
            AcquireOptions::default(),
        )
        .await
        .unwrap();
    l.release().await.unwrap();
    s.close().await.unwrap();
    // Without a client certificate the handshake fails.
    let c = Client::builder(&b.url).ca_file(&ca).build().unwrap();
    let e = c
        .new_session("mtls", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert_transport(&e, "CertificateRequired");
}

#[test]
fn bad_tls_files_are_refused_at_build() {
    let dir = own_dir();
    let refused = |b: muster_client::ClientBuilder, want: &str| match b.build() {
        Err(e @ Error::InvalidRequest(_)) => {
            assert!(e.to_string().contains(want), "{e} lacks {want:?}")
        }
        other => panic!("{other:?}"),
    };
    let url = "https://127.0.0.1:1";
    refused(
        Client::builder(url).ca_file(dir.join("absent.pem")),
        "CA file",
    );
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    refused(
        Client::builder(url).ca_file(&empty),
        "no PEM certificate in it",
    );
    refused(
        Client::builder(url)
            .ca_file(&empty)
            .http_client(reqwest::Client::new()),
        "http_client",
    );
    refused(
        Client::builder(url).identity(&empty, dir.join("absent-key.pem")),
        "client",
    );
}
