//! Unit tests of `loss.rs`.

use crate::client::tests::{fake_with, misdirect};
use crate::{AcquireOptions, Client, Error, Lease, Session};
use reqwest::Method;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PJ: &str = "application/problem+json";
const JSON: &str = "application/json";

/// A fake broker whose every answer carries `Muster-Epoch: <epoch>`
/// (a test changes it to fake a restart). It creates sessions of
/// `ttl_ms`, grants every acquisition and extension, releases, answers a
/// batch of one extension, opens watch streams (a marker, then the end)
/// and answers anything else with 200 `{}`; `special` overrides an
/// answer (by request line).
struct Fake {
    url: String,
    epoch: Arc<Mutex<String>>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    async fn start(
        epoch: &str,
        ttl_ms: u64,
        special: impl Fn(&str) -> Option<(u16, &'static str, String)> + Send + Sync + 'static,
    ) -> Fake {
        let epoch = Arc::new(Mutex::new(epoch.to_string()));
        let e = epoch.clone();
        let (url, seen) = fake_with(move |line| {
            let epoch = e.lock().unwrap().clone();
            let header = format!("Muster-Epoch: {epoch}\r\n");
            if let Some(a) = special(line) {
                return (Duration::ZERO, header, a);
            }
            let path = line.split(' ').nth(1).unwrap_or("");
            let route = |verb: &str| {
                let r = path.trim_start_matches("/v1/leases/");
                format!("lease://{}", r.trim_end_matches(verb))
            };
            let grant = |route: String| {
                format!(
                    r#"{{"route":"{route}","fencing_token":7,"acquired_at":"2030-01-01T00:00:00Z","expires_at":"2040-01-01T00:00:00Z","renewals":0,"outcome":"acquired","expires_after_request_ms":600000}}"#
                )
            };
            let a = if line.starts_with("POST /v1/sessions ") {
                let s = format!(
                    r#"{{"session_id":"0123456789abcdef0123456789abcdef","holder_incarnation":"h1","owner_id":"w","ttl_ms":{ttl_ms},"expires_at":"2040-01-01T00:00:00Z","epoch":"{epoch}"}}"#
                );
                (201, JSON, s)
            } else if line.contains("/keepalive ") {
                (200, JSON, format!(r#"{{"expires_at":"2040-01-01T00:00:00Z","ttl_ms":{ttl_ms}}}"#))
            } else if line.starts_with("POST /v1/leases/batch ") {
                let g = grant("lease://acme/jobs/x".into());
                let b = format!(
                    r#"{{"results":[{{"op":"extend","route":"lease://acme/jobs/x","ok":true,"lease":{g}}}],"revision":9}}"#
                );
                (200, JSON, b)
            } else if path.ends_with("/acquire") {
                (200, JSON, grant(route("/acquire")))
            } else if path.ends_with("/extend") {
                (200, JSON, grant(route("/extend")))
            } else if path.ends_with("/release") {
                (204, JSON, String::new())
            } else if path.starts_with("/v1/leases/watch") {
                let m = format!(r#"{{"epoch":"{epoch}","revision":1,"subscriptions":[]}}"#);
                (200, "text/event-stream", format!("event: snapshot\ndata: {m}\n\n"))
            } else {
                (200, JSON, "{}".to_string())
            };
            (Duration::ZERO, header, a)
        })
        .await;
        Fake { url, epoch, seen }
    }

    fn restart(&self, epoch: &str) {
        *self.epoch.lock().unwrap() = epoch.to_string();
    }

    fn keepalives(&self) -> usize {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|l| l.contains("/keepalive ")).count()
    }
}

fn problem(status: u16, code: &str) -> (u16, &'static str, String) {
    (
        status,
        PJ,
        format!(
            r#"{{"type":"about:blank","title":"T","status":{status},"code":"{code}","detail":"d"}}"#
        ),
    )
}

async fn get(c: &Client, path: &str) -> crate::Result<bytes::Bytes> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    c.send(c.request(Method::GET, c.url(&segs)), 200).await
}

async fn session_with(c: &Client, routes: &[&str]) -> (Session, Vec<Lease>) {
    let s = c.new_session("w", Duration::from_secs(60)).await.unwrap();
    let mut leases = Vec::new();
    for r in routes {
        let l = s
            .acquire(r, Duration::from_secs(60), AcquireOptions::default())
            .await
            .unwrap();
        leases.push(l);
    }
    (s, leases)
}

/// The session is lost now (no waiting), its error a `SessionLost`
/// saying `why`, and every lease with it.
fn lost_now(s: &Session, leases: &[Lease], why: &str) {
    assert!(s.ended().is_cancelled(), "the session still lives");
    let err = s.error();
    assert!(
        matches!(&err, Some(Error::SessionLost(_)))
            && err.as_ref().unwrap().cause().to_string().contains(why),
        "{err:?}, want a SessionLost saying {why:?}"
    );
    for l in leases {
        assert!(l.lost().is_cancelled(), "{} still held", l.route());
        match l.error() {
            Some(Error::LeaseLost(c)) => assert!(
                matches!(*c, Error::SessionLost(_)),
                "{}: {c:?}, want the session's loss",
                l.route()
            ),
            other => panic!("{}: {other:?}, want a LeaseLost", l.route()),
        }
    }
}

fn held(s: &Session, leases: &[Lease]) {
    assert!(s.error().is_none(), "{:?}", s.error());
    for l in leases {
        assert!(l.error().is_none(), "{}: {:?}", l.route(), l.error());
    }
}

const X: &str = "lease://acme/jobs/x";
const Z: &str = "lease://acme/jobs/z";

/// Rule 1: an answer of the session's broker with another epoch ends
/// the session and its leases at once (not at the keepalive, here
/// every 500 ms), and stops its keepalive; so does a watch stream's.
#[tokio::test]
async fn a_new_epoch_from_the_sessions_broker_loses_it_at_once() {
    let b = Fake::start("e1", 1500, |_| None).await;
    let c = Client::new(&b.url).unwrap();
    let s = c.new_session("w", Duration::from_secs(60)).await.unwrap();
    let x = s
        .acquire(X, Duration::from_secs(60), AcquireOptions::default())
        .await
        .unwrap();
    get(&c, "/v1/leases").await.unwrap();
    held(&s, std::slice::from_ref(&x));
    b.restart("e2");
    get(&c, "/v1/leases").await.unwrap();
    lost_now(&s, &[x], "another lifetime (epoch e2, the session's e1)");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(b.keepalives(), 0, "the keepalive went on");

    // A watch stream's answer, too.
    let (s, leases) = session_with(&c, &[X, Z]).await;
    assert_eq!(s.epoch(), "e2");
    b.restart("e3");
    c.watch(&["lease://acme/**"]).await.unwrap();
    lost_now(&s, &leases, "another lifetime (epoch e3, the session's e2)");
}

/// The session's broker is the host that answered its creation, after
/// following wrong_broker: another broker's epoch or family_unavailable
/// changes nothing; the owner's new epoch ends the session it created.
#[tokio::test]
async fn only_the_broker_that_holds_the_session_counts() {
    let b = Fake::start("b1", 60_000, |line| {
        line.starts_with("GET /v1/fu ")
            .then(|| problem(503, "family_unavailable"))
    })
    .await;
    let owner = b.url.clone();
    let a = Fake::start("a1", 60_000, move |line| {
        line.starts_with("GET /v1/other ")
            .then(|| misdirect(&owner))
    })
    .await;
    let c = Client::new(&a.url).unwrap();
    let (sa, la) = session_with(&c, &[X]).await;
    get(&c, "/v1/other").await.unwrap(); // followed to b: epoch b1
    held(&sa, &la);
    // b (the owner now) answers family_unavailable: it is forgotten
    // and a answers.
    get(&c, "/v1/fu").await.unwrap();
    held(&sa, &la);

    // Created at b (the owner again): b's new epoch ends it, not a's
    // session.
    get(&c, "/v1/other").await.unwrap();
    let (sb, lb) = session_with(&c, &[Z]).await;
    assert_eq!(sb.epoch(), "b1");
    b.restart("b2");
    get(&c, "/v1/leases").await.unwrap();
    lost_now(&sb, &lb, "another lifetime (epoch b2, the session's b1)");
    held(&sa, &la);
}

/// Rule 2: family_unavailable from the session's broker ends it.
#[tokio::test]
async fn family_unavailable_from_the_sessions_broker_loses_it() {
    let b = Fake::start("e1", 60_000, |line| {
        line.starts_with("GET /v1/fu ")
            .then(|| problem(503, "family_unavailable"))
    })
    .await;
    let c = Client::new(&b.url).unwrap();
    let (s, leases) = session_with(&c, &[X, Z]).await;
    let e = get(&c, "/v1/fu").await.unwrap_err();
    assert!(matches!(e, Error::FamilyUnavailable(_)), "{e:?}");
    lost_now(&s, &leases, "no longer serves the family");
    assert!(
        matches!(s.error().unwrap().cause(), Error::FamilyUnavailable(_)),
        "{:?}",
        s.error()
    );
}

/// A family_unavailable answer that the client did not return (it
/// moved on to the next base URL, which answered) still ends the
/// sessions of the broker that answered it, at once; so it does with
/// the conformance tests' broken client that stays on that broker.
#[tokio::test]
async fn family_unavailable_heard_on_the_way_loses_the_session() {
    for stay in [false, true] {
        let a = Fake::start("a1", 60_000, |line| {
            line.starts_with("GET /v1/fu ")
                .then(|| problem(503, "family_unavailable"))
        })
        .await;
        let b = Fake::start("b1", 60_000, |_| None).await;
        let faults = crate::faults::Faults {
            stay_on_unavailable: stay,
            ..crate::faults::Faults::default()
        };
        let c = Client::builder_list([&a.url, &b.url])
            .faults(faults)
            .build()
            .unwrap();
        let (s, leases) = session_with(&c, &[X, Z]).await;
        assert_eq!(s.epoch(), "a1");
        let got = get(&c, "/v1/fu").await;
        lost_now(&s, &leases, "no longer serves the family");
        let at_b = b.seen.lock().unwrap().len();
        if stay {
            assert!(matches!(got, Err(Error::FamilyUnavailable(_))), "{got:?}");
            assert_eq!(at_b, 0);
        } else {
            got.unwrap();
            assert_eq!(at_b, 1);
            // The next session is b's.
            let (s, _) = session_with(&c, &[X]).await;
            assert_eq!(s.epoch(), "b1");
        }
    }
}

/// Rule 3: session_not_found to an acquire, an extend, a release or a
/// batch of the session ends it, and every other lease with it.
#[tokio::test]
async fn session_not_found_to_a_request_of_the_session_loses_it() {
    for op in ["acquire", "extend", "release", "batch"] {
        let b = Fake::start("e1", 60_000, |line| {
            let gone = line.contains("/jobs/gone/acquire ")
                || line.contains("/extend ")
                || line.contains("/release ")
                || line.contains("/leases/batch ");
            gone.then(|| problem(404, "session_not_found"))
        })
        .await;
        let c = Client::new(&b.url).unwrap();
        let (s, leases) = session_with(&c, &[X, Z]).await;
        let x = &leases[0];
        match op {
            "acquire" => {
                let e = s
                    .acquire(
                        "lease://acme/jobs/gone",
                        Duration::from_secs(60),
                        AcquireOptions::default(),
                    )
                    .await
                    .unwrap_err();
                assert!(matches!(e, Error::SessionNotFound(_)), "{e:?}");
            }
            "extend" => {
                let e = x.extend(Duration::from_secs(60)).await.unwrap_err();
                assert!(matches!(e, Error::LeaseLost(_)), "{e:?}");
            }
            "release" => x.release().await.unwrap(),
            _ => {
                let mut batch = s.batch();
                batch.extend(x, Duration::from_secs(60));
                let e = batch.send().await.unwrap_err();
                assert!(matches!(e, Error::SessionNotFound(_)), "{e:?}");
            }
        }
        // z had nothing to do with the request: lost with the session.
        lost_now(&s, &leases[1..], "session_not_found");
        assert!(
            matches!(s.error().unwrap().cause(), Error::SessionNotFound(_)),
            "{op}: {:?}",
            s.error()
        );
    }
}

/// The conformance tests' broken client (`late_loss`): none of the
/// three rules ends anything at once.
#[tokio::test]
async fn a_late_loss_client_loses_nothing_at_once() {
    let b = Fake::start("e1", 60_000, |line| {
        if line.starts_with("GET /v1/fu ") {
            Some(problem(503, "family_unavailable"))
        } else {
            line.contains("/jobs/gone/acquire ")
                .then(|| problem(404, "session_not_found"))
        }
    })
    .await;
    let faults = crate::faults::Faults {
        late_loss: true,
        ..crate::faults::Faults::default()
    };
    let c = Client::builder(&b.url).faults(faults).build().unwrap();
    let (s, leases) = session_with(&c, &[X, Z]).await;
    let gone = "lease://acme/jobs/gone";
    let opts = AcquireOptions::default();
    let e = s.acquire(gone, Duration::from_secs(60), opts).await;
    assert!(matches!(e, Err(Error::SessionNotFound(_))), "{e:?}");
    let _ = get(&c, "/v1/fu").await.unwrap_err();
    b.restart("e2");
    get(&c, "/v1/leases").await.unwrap();
    held(&s, &leases);
}

#[test]
fn a_broker_is_named_by_host_and_port() {
    for (url, want) in [
        ("http://127.0.0.1:7420/v1/leases", "127.0.0.1:7420"),
        ("http://b1.example/v1", "b1.example:80"),
        ("https://b1.example", "b1.example:443"),
        ("http://[::1]:7420", "[::1]:7420"),
    ] {
        let u = reqwest::Url::parse(url).unwrap();
        assert_eq!(crate::transport::answered_by(&u), want, "{url}");
    }
}

/// A connection error, another failure (unavailable) or an answer
/// with the same epoch changes nothing: the local deadline decides.
#[tokio::test]
async fn a_connection_error_changes_nothing() {
    let b = Fake::start("e1", 60_000, |line| {
        if line.starts_with("GET /v1/dead ") {
            Some(misdirect("http://127.0.0.1:1")) // nothing listens there
        } else if line.starts_with("GET /v1/busy ") {
            Some(problem(503, "unavailable"))
        } else {
            None
        }
    })
    .await;
    let c = Client::new(&b.url).unwrap();
    let (s, leases) = session_with(&c, &[X, Z]).await;
    // Refused by the dead owner twice (each time forgotten, and b asked
    // again), then b's 421 is the answer: the hops are used up.
    let e = get(&c, "/v1/dead").await.unwrap_err();
    assert!(matches!(e, Error::WrongBroker(_)), "{e:?}");
    let e = get(&c, "/v1/busy").await.unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    get(&c, "/v1/leases").await.unwrap();
    held(&s, &leases);
}

/// A planned move: the session's broker is the one that last answered one
/// of its own requests with success, with that answer's epoch. Created at
/// a (a1), moved to b (b1: a names b); a restarts (a2) and gets the family
/// back (b names a): a's success under a2 keeps the session, a later answer
/// of a under a3 ends it. The conformance tests' broken client
/// (`creator_loss`, the old rule) loses it at a's success under a2.
#[tokio::test]
async fn a_planned_move_makes_the_answering_broker_the_sessions() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for broken in [false, true] {
        let at_b = Arc::new(AtomicBool::new(false));
        let (a_url, b_url) = (
            Arc::new(Mutex::new(String::new())),
            Arc::new(Mutex::new(String::new())),
        );
        let (to_b, to) = (at_b.clone(), b_url.clone());
        let a = Fake::start("a1", 60_000, move |line| {
            (line.contains("/extend ") && to_b.load(Ordering::SeqCst))
                .then(|| misdirect(&to.lock().unwrap()))
        })
        .await;
        let (to_b, to) = (at_b.clone(), a_url.clone());
        let b = Fake::start("b1", 60_000, move |line| {
            (line.contains("/extend ") && !to_b.load(Ordering::SeqCst))
                .then(|| misdirect(&to.lock().unwrap()))
        })
        .await;
        *a_url.lock().unwrap() = a.url.clone();
        *b_url.lock().unwrap() = b.url.clone();
        let faults = crate::faults::Faults {
            creator_loss: broken,
            ..crate::faults::Faults::default()
        };
        let c = Client::builder(&a.url).faults(faults).build().unwrap();
        let (s, leases) = session_with(&c, &[X]).await;
        at_b.store(true, Ordering::SeqCst);
        leases[0].extend(Duration::from_secs(60)).await.unwrap(); // a names b, which answers
        held(&s, &leases);
        assert_eq!(s.epoch(), if broken { "a1" } else { "b1" });
        a.restart("a2");
        at_b.store(false, Ordering::SeqCst);
        let got = leases[0].extend(Duration::from_secs(60)).await; // b names a, which answers
        if broken {
            assert!(matches!(got, Err(Error::LeaseLost(_))), "{got:?}");
            lost_now(&s, &leases, "another lifetime (epoch a2, the session's a1)");
            continue;
        }
        got.unwrap();
        held(&s, &leases);
        assert_eq!(s.epoch(), "a2");
        a.restart("a3");
        get(&c, "/v1/leases").await.unwrap();
        lost_now(&s, &leases, "another lifetime (epoch a3, the session's a2)");
    }
}

/// A success of one of the session's requests is recorded before that
/// same answer is judged: the creator answering under a new epoch (the
/// family moved away and back while the session sent nothing) keeps it; a
/// failure under yet another epoch is no success of the session: it ends
/// it.
#[tokio::test]
async fn a_success_of_the_session_is_recorded_before_it_is_judged() {
    let b = Fake::start("e1", 60_000, |line| {
        line.contains("/jobs/fail/extend ")
            .then(|| problem(503, "unavailable"))
    })
    .await;
    let c = Client::new(&b.url).unwrap();
    let (s, leases) = session_with(&c, &[X, "lease://acme/jobs/fail"]).await;
    b.restart("e2");
    leases[0].extend(Duration::from_secs(60)).await.unwrap();
    held(&s, &leases);
    assert_eq!(s.epoch(), "e2");
    b.restart("e3");
    let e = leases[1].extend(Duration::from_secs(60)).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    lost_now(&s, &leases, "another lifetime (epoch e3, the session's e2)");
}
