//! One answer of the broker, below the `Client` that
//! picks where each request goes: the broker that answered it, its status,
//! its body (read whole and bounded, or as a stream), and the two things the
//! client reads in an answer to decide where a request goes (the owner a
//! `wrong_broker` names, a problem's code).

use crate::error::{media_type, problem_error, Error, Problem, Result};
use reqwest::Url;
use std::pin::Pin;

/// Bounds the bytes read from one non-streaming answer.
const MAX_BODY: usize = 32 << 20;

/// A byte stream of an answer's body.
pub(crate) type BodyStream =
    Pin<Box<dyn futures_core::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An answer of `Client::execute`: the broker that answered it
/// (`host:port`), its status and content type, and its body, unread or
/// read already (a 421 or 503, read to decide where the request goes).
pub(crate) struct Answer {
    pub(crate) host: String,
    pub(crate) status: u16,
    pub(crate) content_type: String,
    body: AnswerBody,
}

enum AnswerBody {
    Unread(reqwest::Response),
    Read(bytes::Bytes),
}

impl Answer {
    pub(crate) fn unread(resp: reqwest::Response) -> Answer {
        Answer {
            host: answered_by(resp.url()),
            status: resp.status().as_u16(),
            content_type: content_type(&resp),
            body: AnswerBody::Unread(resp),
        }
    }

    pub(crate) async fn read(resp: reqwest::Response) -> Result<Answer> {
        let mut a = Answer::unread(resp);
        if let AnswerBody::Unread(resp) = a.body {
            a.body = AnswerBody::Read(read_body(resp).await?);
        }
        Ok(a)
    }

    /// The body read already (empty when unread).
    pub(crate) fn read_body(&self) -> &[u8] {
        match &self.body {
            AnswerBody::Read(b) => b,
            AnswerBody::Unread(_) => &[],
        }
    }

    /// The problem of a problem answer (read already) of `code`.
    pub(crate) fn problem_of(&self, code: &str) -> Option<Problem> {
        if media_type(&self.content_type) != "application/problem+json" {
            return None;
        }
        let e = problem_error(self.status, &self.content_type, self.read_body());
        match (e.code(), e.problem()) {
            (Some(c), Some(p)) if c == code => Some(p.clone()),
            _ => None,
        }
    }

    /// The whole body, at most [`MAX_BODY`] bytes.
    pub(crate) async fn body(self) -> Result<bytes::Bytes> {
        match self.body {
            AnswerBody::Unread(resp) => read_body(resp).await,
            AnswerBody::Read(b) => Ok(b),
        }
    }

    /// The body as a stream of chunks (a watch stream's events).
    pub(crate) fn stream(self) -> BodyStream {
        match self.body {
            AnswerBody::Unread(resp) => Box::pin(resp.bytes_stream()),
            AnswerBody::Read(b) => Box::pin(futures_util::stream::once(async move { Ok(b) })),
        }
    }
}

/// Gives `u` the scheme, host and port of `owner`.
pub(crate) fn rebase(u: &mut Url, owner: &Url) {
    let _ = u.set_scheme(owner.scheme());
    let _ = u.set_host(owner.host_str());
    let _ = u.set_port(owner.port());
}

/// The owner a 421 answer names, when it is a `wrong_broker` problem with an
/// http(s) URL with a host; `None` otherwise.
pub(crate) fn misdirected_to(content_type: &str, body: &[u8]) -> Option<Url> {
    if media_type(content_type) != "application/problem+json" {
        return None;
    }
    let Error::WrongBroker(p) = problem_error(421, content_type, body) else {
        return None;
    };
    let u = Url::parse(&p.owner).ok()?;
    (matches!(u.scheme(), "http" | "https") && !u.host_str().unwrap_or("").is_empty()).then_some(u)
}

pub(crate) fn content_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Reads a body, at most [`MAX_BODY`] bytes.
pub(crate) async fn read_body(mut resp: reqwest::Response) -> Result<bytes::Bytes> {
    let mut buf = bytes::BytesMut::new();
    while let Some(chunk) = resp.chunk().await? {
        if buf.len() + chunk.len() > MAX_BODY {
            return Err(Error::Protocol(format!("an answer above {MAX_BODY} bytes")));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// The host (`host:port`) of `url`: for an answer's URL, the broker that
/// answered it (the owner a `wrong_broker` answer was followed to, or the
/// base URL's). The port is always there (the scheme's default when the URL
/// has none), so one broker has one name.
pub(crate) fn answered_by(url: &Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => String::new(),
    }
}
