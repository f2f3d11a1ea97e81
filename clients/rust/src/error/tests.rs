//! Unit tests of `error.rs`.

use super::*;

#[test]
fn every_code_maps_to_its_variant_and_back() {
    for code in CODES {
        let e = Error::from_code(code, Problem::default());
        assert_eq!(e.code(), Some(*code));
        assert!(!matches!(e, Error::Other { .. }), "{code}");
    }
}

#[test]
fn advice_matches_the_go_table() {
    let cases = [
        ("invalid_route", Retry::No),
        ("session_not_found", Retry::Restart),
        ("lease_held", Retry::Backoff),
        ("already_queued", Retry::No),
        ("wait_timeout", Retry::Backoff),
        ("queue_full", Retry::Backoff),
        ("not_owner", Retry::Restart),
        ("fenced", Retry::Restart),
        ("lease_expired", Retry::Restart),
        ("invalid_cursor", Retry::No),
        ("cursor_expired", Retry::Restart),
        ("epoch_changed", Retry::Restart),
        ("subscription_limit", Retry::No),
        ("inventory_unavailable", Retry::Backoff),
        ("internal", Retry::Backoff),
        ("unavailable", Retry::Backoff),
        ("session_limit", Retry::Backoff),
        ("spec_limit", Retry::No),
        ("wrong_broker", Retry::Restart),
        ("family_unavailable", Retry::Backoff),
        ("not_implemented", Retry::No),
    ];
    for (code, want) in cases {
        let e = Error::from_code(code, Problem::default());
        assert_eq!(e.advice(), want, "{code}");
        assert_eq!(e.is_retryable(), want == Retry::Backoff, "{code}");
    }
}

#[test]
fn unknown_code_is_kept_and_advised_by_status() {
    for (status, want) in [
        (503, Retry::Backoff),
        (429, Retry::Backoff),
        (409, Retry::No),
    ] {
        let e = problem_error(
            status,
            "application/problem+json",
            br#"{"type":"about:blank","title":"X","status":0,"code":"brand_new","detail":"d"}"#,
        );
        match &e {
            Error::Other { code, problem } => {
                assert_eq!(code, "brand_new");
                assert_eq!(problem.status, status);
                assert_eq!(problem.detail, "d");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.advice(), want);
        assert_eq!(e.to_string(), "muster: brand_new: d");
    }
}

#[test]
fn a_limit_keeps_its_scope() {
    let e = problem_error(
        429,
        "application/problem+json",
        br#"{"type":"about:blank","title":"Too Many Requests","status":429,"code":"spec_limit","detail":"d","scope":"root"}"#,
    );
    assert!(matches!(e, Error::SpecLimit(_)), "{e:?}");
    assert_eq!(e.problem().unwrap().scope, "root");
    assert_eq!(e.advice(), Retry::No);
    let e = problem_error(
        409,
        "application/problem+json",
        br#"{"type":"about:blank","title":"Conflict","status":409,"code":"lease_held"}"#,
    );
    assert_eq!(e.problem().unwrap().scope, "");
}

#[test]
fn answers_without_a_problem_body_get_a_code_from_the_status() {
    let cases = [
        (502, "unavailable"),
        (503, "unavailable"),
        (504, "unavailable"),
        (404, "not_found"),
        (401, "unauthenticated"),
        (403, "forbidden"),
        (413, "payload_too_large"),
        (500, "internal"),
        (418, "internal"),
    ];
    for (status, code) in cases {
        let e = problem_error(status, "text/html", b"<html>bad gateway</html>");
        assert_eq!(e.code(), Some(code), "{status}");
        assert!(e
            .problem()
            .unwrap()
            .detail
            .starts_with(&format!("HTTP {status} without a problem body")));
    }
    // A JSON body without a code is no problem body either.
    let e = problem_error(503, "application/json", b"{}");
    assert!(matches!(e, Error::Unavailable(_)));
}

#[test]
fn display_leaves_the_cause_to_source() {
    let e = Error::LeaseLost(Box::new(Error::SessionLost(Box::new(Error::from_code(
        "session_not_found",
        Problem::local("gone"),
    )))));
    assert_eq!(e.to_string(), "muster: lease lost");
    assert_eq!(format!("{e:#}"), "muster: lease lost");
    // What a chain-walking report (anyhow's `{:#}`) prints: each once.
    let mut chain = vec![e.to_string()];
    let mut cur: &dyn std::error::Error = &e;
    while let Some(next) = cur.source() {
        chain.push(next.to_string());
        cur = next;
    }
    assert_eq!(
        chain.join(": "),
        "muster: lease lost: muster: session lost: muster: session_not_found: gone"
    );
    assert_eq!(e.cause().to_string(), "muster: session_not_found: gone");
}

#[test]
fn lost_errors_advise_restart_and_expose_their_cause() {
    let e = Error::LeaseLost(Box::new(Error::from_code("fenced", Problem::default())));
    assert_eq!(e.advice(), Retry::Restart);
    assert!(matches!(e.cause(), Error::Fenced(_)));
    assert_eq!(Error::Closed.advice(), Retry::No);
    assert_eq!(Error::Protocol("x".into()).advice(), Retry::Backoff);
}
