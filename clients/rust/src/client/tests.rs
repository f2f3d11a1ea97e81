//! Unit tests of `client.rs`.

use super::*;
use std::time::Duration;

#[test]
fn routes_parse_or_are_invalid_route() {
    let r = Route::parse("lease://acme/renderers/doc-1").unwrap();
    assert_eq!(r.to_string(), "lease://acme/renderers/doc-1");
    for bad in [
        "acme/renderers/doc-1",
        "lease://acme/renderers",
        "lease://a//c",
        "lease://a/b/c/d",
    ] {
        assert!(
            matches!(Route::parse(bad), Err(Error::InvalidRoute(_))),
            "{bad}"
        );
    }
}

/// A transport error never shows the URL, whose path may hold a
/// session id (a secret).
#[tokio::test]
async fn transport_errors_hide_the_url() {
    let ln = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = ln.local_addr().unwrap();
    drop(ln); // nothing listens there now
    let c = Client::new(&format!("http://{addr}")).unwrap();
    let secret = "0123456789abcdef0123456789abcdef";
    let url = c.url(&["v1", "sessions", secret, "keepalive"]);
    let e = c.send(c.request(Method::POST, url), 200).await.unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e:?}");
    assert!(e.is_retryable());
    assert!(!format!("{e} {e:?}").contains(secret), "{e:?}");
}

#[test]
fn base_urls_are_checked_and_segments_escaped() {
    for bad in [
        "",
        "ftp://x",
        "127.0.0.1:7420",
        "http://",
        "http://a:1,",
        "http://a:1,,http://b:2",
        "http://a:1,b:2",
    ] {
        assert!(
            matches!(Client::new(bad), Err(Error::InvalidRequest(_))),
            "{bad}"
        );
    }
    let c = Client::new("http://127.0.0.1:7420/").unwrap();
    assert_eq!(
        c.url(&["v1", "fleets", "a/b", "specs"]).as_str(),
        "http://127.0.0.1:7420/v1/fleets/a%2Fb/specs"
    );
}

/// A fake broker: every request (method, path and body) is recorded and
/// answered by `answer` (status line, content type, body), one request
/// per connection.
async fn fake(
    answer: impl Fn(&str) -> (u16, &'static str, String) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    fake_after(move |line| (Duration::ZERO, answer(line))).await
}

/// [`fake`] whose `answer` also says how long to wait before answering
/// (a broker that kept the request in a queue).
pub(crate) async fn fake_after(
    answer: impl Fn(&str) -> (Duration, (u16, &'static str, String)) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    fake_with(move |line| {
        let (delay, a) = answer(line);
        (delay, String::new(), a)
    })
    .await
}

/// [`fake_after`] whose `answer` also gives extra header lines of the
/// answer (each ending with `\r\n`), e.g. `Muster-Epoch: e1\r\n`.
pub(crate) async fn fake_with(
    answer: impl Fn(&str) -> (Duration, String, (u16, &'static str, String)) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ln = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", ln.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (seen2, answer) = (seen.clone(), Arc::new(answer));
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = ln.accept().await {
            let (seen, answer) = (seen2.clone(), answer.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let req = loop {
                    let n = conn.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            break text;
                        }
                    }
                };
                let (head, body) = req.split_once("\r\n\r\n").unwrap();
                let line = head.lines().next().unwrap().to_string();
                let auth = head
                    .lines()
                    .any(|l| l.eq_ignore_ascii_case("authorization: Bearer t"));
                seen.lock()
                    .unwrap()
                    .push(format!("{line} auth={auth} {body}"));
                let (delay, headers, (status, ct, out)) = answer(&line);
                tokio::time::sleep(delay).await;
                let resp = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: {ct}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{out}",
                    out.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    (url, seen)
}

pub(crate) fn misdirect(owner: &str) -> (u16, &'static str, String) {
    (
        421,
        "application/problem+json",
        format!(
            r#"{{"type":"about:blank","title":"Misdirected Request","status":421,"code":"wrong_broker","owner":"{owner}"}}"#
        ),
    )
}

#[tokio::test]
async fn follows_wrong_broker_with_the_body_and_stays_with_the_owner() {
    let (owner, at_owner) = fake(|_| {
        (
            200,
            "application/json",
            r#"{"items":[],"snapshot":{"epoch":"e","revision":1}}"#.into(),
        )
    })
    .await;
    let o = owner.clone();
    let (first, at_first) = fake(move |_| misdirect(&o)).await;
    let c = Client::builder(&first).token("t").build().unwrap();
    let url = c.url(&["v1", "sessions"]);
    let body = c
        .send(
            c.request(Method::POST, url.clone())
                .body("{\"owner_id\":\"w\"}"),
            200,
        )
        .await
        .unwrap();
    assert!(!body.is_empty());
    let seen = at_owner.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec!["POST /v1/sessions HTTP/1.1 auth=true {\"owner_id\":\"w\"}".to_string()]
    );
    c.send(c.request(Method::GET, url), 200).await.unwrap();
    assert_eq!(
        at_first.lock().unwrap().len(),
        1,
        "the second request went straight to the owner"
    );
    assert_eq!(at_owner.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_loop_ends_after_max_follows_and_without_follow_does_not_follow() {
    let (b, at_b) = fake(|_| misdirect("http://127.0.0.1:9")).await;
    let b2 = b.clone();
    let (a, at_a) = fake(move |_| misdirect(&b2)).await;
    // a → b → (b names a dead address): the third request cannot
    // connect, so the dead owner is forgotten and the request sent again
    // at once to a, whose 421 ends it (the hops are used up).
    let c = Client::new(&a).unwrap();
    let e = c
        .send(c.request(Method::GET, c.url(&["v1"])), 200)
        .await
        .unwrap_err();
    assert!(matches!(&e, Error::WrongBroker(p) if p.owner == b), "{e:?}");
    assert_eq!(
        (at_a.lock().unwrap().len(), at_b.lock().unwrap().len()),
        (2, 1)
    );
    // The dead owner is forgotten: the next request starts at a again.
    let _ = c.send(c.request(Method::GET, c.url(&["v1"])), 200).await;
    assert_eq!(at_a.lock().unwrap().len(), 4);

    let c = Client::builder(&a).without_follow().build().unwrap();
    let e = c
        .send(c.request(Method::GET, c.url(&["v1"])), 200)
        .await
        .unwrap_err();
    assert!(matches!(&e, Error::WrongBroker(p) if p.owner == b), "{e:?}");
    assert_eq!(at_a.lock().unwrap().len(), 5);

    let (x, _) = fake(|_| misdirect("http://127.0.0.1:1")).await;
    let x2 = x.clone();
    let (y, _) = fake(move |_| misdirect(&x2)).await;
    let y2 = y.clone();
    let (z, at_z) = fake(move |_| misdirect(&y2)).await;
    // z → y → x: MAX_FOLLOWS hops, then x's answer is the error.
    let c = Client::new(&z).unwrap();
    let e = c
        .send(c.request(Method::GET, c.url(&["v1"])), 200)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::WrongBroker(p) if p.owner == "http://127.0.0.1:1"),
        "{e:?}"
    );
    assert_eq!(at_z.lock().unwrap().len(), 1);
    assert_eq!(MAX_FOLLOWS, 2);
}

/// A dead address: nothing listens there (connections are refused).
fn dead() -> String {
    let ln = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = ln.local_addr().unwrap();
    drop(ln);
    format!("http://{addr}")
}

fn ok(_: &str) -> (u16, &'static str, String) {
    (200, "application/json", "{}".into())
}

fn unavailable(_: &str) -> (u16, &'static str, String) {
    (
        503,
        "application/problem+json",
        r#"{"type":"about:blank","title":"Service Unavailable","status":503,"code":"family_unavailable"}"#.into(),
    )
}

fn hosts(c: &Client) -> Vec<String> {
    c.inner.bases.iter().map(|u| u.to_string()).collect()
}

/// Several base URLs: one string with commas (spaces and a final `/`
/// allowed), or a list; order is kept; a bad one is named.
#[test]
fn several_base_urls_parse_in_order() {
    let c = Client::new(" http://b1:7420/ ,http://b2:7421,https://b3").unwrap();
    let want = ["http://b1:7420/", "http://b2:7421/", "https://b3/"];
    assert_eq!(hosts(&c), want);
    let c = Client::builder_list(["http://b1:7420", "http://b2:7421/", "https://b3"])
        .build()
        .unwrap();
    assert_eq!(hosts(&c), want);
    assert_eq!(
        c.url(&["v1", "leases"]).as_str(),
        "http://b1:7420/v1/leases"
    );
    let e = Client::builder_list(["http://b1:7420", "b2:7421"])
        .build()
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidRequest(p) if p.detail.contains("\"b2:7421\"")),
        "{e:?}"
    );
    let none: [&str; 0] = [];
    assert!(matches!(
        Client::builder_list(none).build(),
        Err(Error::InvalidRequest(_))
    ));
    let single = crate::faults::Faults {
        single_broker: true,
        ..crate::faults::Faults::default()
    };
    let c = Client::builder("http://b1:7420,http://b2:7421")
        .faults(single)
        .build()
        .unwrap();
    assert_eq!(hosts(&c), ["http://b1:7420/"]);
}

/// A refused first base URL: the request (with its body) is sent at once
/// to the next one, which stays the current one.
#[tokio::test]
async fn a_refused_first_base_url_reaches_the_next() {
    let (b, at_b) = fake(ok).await;
    let c = Client::builder(&format!("{},{b}", dead()))
        .token("t")
        .build()
        .unwrap();
    let url = c.url(&["v1", "sessions"]);
    c.send(c.request(Method::POST, url.clone()).body("{}"), 200)
        .await
        .unwrap();
    assert_eq!(
        *at_b.lock().unwrap(),
        ["POST /v1/sessions HTTP/1.1 auth=true {}"]
    );
    assert_eq!(c.target().0, Target::Base(1));
    c.send(c.request(Method::GET, url), 200).await.unwrap();
    assert_eq!(at_b.lock().unwrap().len(), 2);
}

/// family_unavailable from the current base URL moves the client on
/// and the request is sent again at once; the broker that answered it
/// is not asked again by the next request.
#[tokio::test]
async fn family_unavailable_moves_on_and_resends() {
    let (a, at_a) = fake(unavailable).await;
    let (b, at_b) = fake(ok).await;
    let c = Client::builder_list([&a, &b]).build().unwrap();
    for _ in 0..2 {
        c.send(c.request(Method::POST, c.url(&["v1", "x"])).body("{}"), 200)
            .await
            .unwrap();
    }
    assert_eq!(
        (at_a.lock().unwrap().len(), at_b.lock().unwrap().len()),
        (1, 2)
    );

    // Every broker unavailable: each request fails at most
    // (base URLs + MAX_FOLLOWS) times, then the answer is the error.
    let (b2, at_b2) = fake(unavailable).await;
    let c = Client::builder_list([&a, &b2]).build().unwrap();
    let e = c
        .send(c.request(Method::GET, c.url(&["v1"])), 200)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::FamilyUnavailable(_)), "{e:?}");
    assert_eq!(
        (at_a.lock().unwrap().len(), at_b2.lock().unwrap().len()),
        (3, 2)
    );

    // One base URL that answers family_unavailable itself: not asked
    // again at once.
    let c = Client::new(&a).unwrap();
    let e = c
        .send(c.request(Method::GET, c.url(&["v1"])), 200)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::FamilyUnavailable(_)), "{e:?}");
    assert_eq!(at_a.lock().unwrap().len(), 4);

    // The conformance tests' broken client (stay_on_unavailable): it
    // keeps sending there.
    let stay = crate::faults::Faults {
        stay_on_unavailable: true,
        ..crate::faults::Faults::default()
    };
    let c = Client::builder_list([&a, &b]).faults(stay).build().unwrap();
    for _ in 0..2 {
        let e = c.send(c.request(Method::GET, c.url(&["v1"])), 200).await;
        assert!(matches!(e, Err(Error::FamilyUnavailable(_))), "{e:?}");
    }
    assert_eq!(at_a.lock().unwrap().len(), 6);
}

/// With one base URL, an owner that answers family_unavailable is
/// forgotten and the base URL asked again, at once.
#[tokio::test]
async fn an_unavailable_owner_is_forgotten() {
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let g = gone.clone();
    let (b, at_b) = fake(move |l| {
        if g.load(std::sync::atomic::Ordering::SeqCst) {
            unavailable(l)
        } else {
            ok(l)
        }
    })
    .await;
    let o = b.clone();
    let (a, at_a) = fake(move |l| {
        if l.starts_with("GET /v1/x ") {
            misdirect(&o)
        } else {
            ok(l)
        }
    })
    .await;
    let c = Client::new(&a).unwrap();
    c.send(c.request(Method::GET, c.url(&["v1", "x"])), 200)
        .await
        .unwrap();
    gone.store(true, std::sync::atomic::Ordering::SeqCst);
    c.send(c.request(Method::GET, c.url(&["v1", "y"])), 200)
        .await
        .unwrap();
    assert_eq!(
        (at_a.lock().unwrap().len(), at_b.lock().unwrap().len()),
        (2, 2)
    );
    assert_eq!(c.target().0, Target::Base(0));
}

/// Concurrent requests failing at the same broker move the client once:
/// every one of them ends at the second base URL, none at the third.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_failures_move_once() {
    let (b, at_b) = fake(ok).await;
    let (x, at_x) = fake(ok).await;
    let c = Client::builder_list([dead(), b, x]).build().unwrap();
    let reqs = (0..16).map(|_| {
        let c = c.clone();
        async move { c.send(c.request(Method::GET, c.url(&["v1"])), 200).await }
    });
    for r in futures_util::future::join_all(reqs).await {
        r.unwrap();
    }
    assert_eq!(
        (at_b.lock().unwrap().len(), at_x.lock().unwrap().len()),
        (16, 0)
    );
    assert_eq!(c.target().0, Target::Base(1));

    // The same, step by step: a stale failure moves nothing.
    let (t0, _) = c.target();
    c.move_on(t0);
    c.move_on(t0);
    assert_eq!(c.target().0, Target::Base(2));
    *c.inner.to.lock().unwrap() = Towards {
        owner: Some(Url::parse("http://o:1").unwrap()),
        owner_set: 7,
        cur: 2,
    };
    c.move_on(Target::Owner(6)); // an owner named before
    c.move_on(Target::Base(2)); // the owner is the target now
    assert_eq!(c.target().0, Target::Owner(7));
    c.move_on(Target::Owner(7));
    assert_eq!(c.target().0, Target::Base(2));
}

#[test]
fn misdirected_to_follows_only_an_http_owner_of_wrong_broker() {
    let pj = "application/problem+json";
    for (body, ct, ok) in [
        (
            r#"{"code":"wrong_broker","owner":"http://10.0.0.2:7420"}"#,
            pj,
            true,
        ),
        (
            r#"{"code":"wrong_broker","owner":"javascript:alert(1)"}"#,
            pj,
            false,
        ),
        (r#"{"code":"wrong_broker"}"#, pj, false),
        (r#"{"code":"not_owner","owner":"http://x"}"#, pj, false),
        ("not json", "text/plain", false),
    ] {
        assert_eq!(misdirected_to(ct, body.as_bytes()).is_some(), ok, "{body}");
    }
}
