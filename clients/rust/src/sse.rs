//! An incremental Server-Sent-Events parser, by the WHATWG "event stream
//! interpretation" rules: a leading byte-order mark is dropped; lines end
//! with CR LF, LF or CR (also when the CR and the LF arrive in different
//! chunks); a line starting with a colon is a comment; `field: value` loses
//! one space after the colon, and a line without a colon is a field with an
//! empty value; data lines are joined with LF; a blank line dispatches the
//! event unless it had no data field; `retry` with only ASCII digits sets the
//! reconnection time ([`Parser::retry`]); unknown fields are ignored; an `id`
//! containing NUL is ignored; an event not ended by a blank line before the
//! end of the stream is never dispatched.
//!
//! The parser is fed chunks as they arrive and returns every event completed
//! by a chunk: however a byte stream is cut into chunks, the same events come
//! out (a property test checks this).

use std::collections::VecDeque;
use std::time::Duration;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event type; `message` when the event had no `event` field.
    pub name: String,
    /// The stream's last event ID as of this event.
    pub id: String,
    /// The data lines joined by LF.
    pub data: String,
}

/// The parser refused the stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line or an event's data is larger than the parser's bound.
    #[error("event-stream event larger than {0} bytes")]
    TooLarge(usize),
}

/// An incremental event-stream parser. See the module documentation.
#[derive(Debug)]
pub struct Parser {
    max: usize,
    started: bool,
    skip_lf: bool,
    failed: Option<SseError>,
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    name: String,
    last_id: String,
    retry: Option<Duration>,
}

impl Parser {
    /// A parser that refuses a line or an event's data above `max` bytes.
    pub fn new(max: usize) -> Parser {
        Parser {
            max,
            started: false,
            skip_lf: false,
            failed: None,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            name: String::new(),
            last_id: String::new(),
            retry: None,
        }
    }

    /// The last `retry` field's reconnection time, if any was sent.
    #[cfg(test)] // parsed as the grammar asks; the SDK's own backoff decides
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Feeds one chunk, appending every event it completes to `out`. After
    /// an error every call returns it again.
    pub fn push(&mut self, chunk: &[u8], out: &mut VecDeque<Event>) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        for &b in chunk {
            if self.skip_lf {
                self.skip_lf = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.skip_lf = b == b'\r';
                    if let Err(e) = self.end_line(out) {
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                }
                _ => {
                    if self.line.len() >= self.max {
                        let e = SseError::TooLarge(self.max);
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut VecDeque<Event>) -> Result<(), SseError> {
        let mut line = std::mem::take(&mut self.line);
        if !self.started {
            self.started = true;
            if line.starts_with(b"\xEF\xBB\xBF") {
                line.drain(..3);
            }
        }
        let r = if line.is_empty() {
            self.dispatch(out);
            Ok(())
        } else {
            self.field(&line)
        };
        line.clear();
        self.line = line;
        r
    }

    fn field(&mut self, line: &[u8]) -> Result<(), SseError> {
        if line[0] == b':' {
            return Ok(());
        }
        let (name, mut value) = match line.iter().position(|&b| b == b':') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &line[line.len()..]),
        };
        if value.first() == Some(&b' ') {
            value = &value[1..];
        }
        match name {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(SseError::TooLarge(self.max));
                }
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
                self.has_data = true;
            }
            b"event" => self.name = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => {
                self.last_id = String::from_utf8_lossy(value).into_owned();
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Ok(ms) = std::str::from_utf8(value).unwrap_or("").parse::<u64>() {
                    self.retry = Some(Duration::from_millis(ms));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut VecDeque<Event>) {
        let name = std::mem::take(&mut self.name);
        if !self.has_data {
            self.data.clear();
            return;
        }
        self.has_data = false;
        self.data.pop(); // the last LF
        let data = String::from_utf8_lossy(&self.data).into_owned();
        self.data.clear();
        out.push_back(Event {
            name: if name.is_empty() {
                "message".to_string()
            } else {
                name
            },
            id: self.last_id.clone(),
            data,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(chunks: &[&[u8]]) -> (Vec<Event>, Option<Duration>) {
        let mut p = Parser::new(1 << 20);
        let mut out = VecDeque::new();
        for c in chunks {
            p.push(c, &mut out).unwrap();
        }
        (out.into_iter().collect(), p.retry())
    }

    fn ev(name: &str, id: &str, data: &str) -> Event {
        Event {
            name: name.into(),
            id: id.into(),
            data: data.into(),
        }
    }

    #[test]
    fn line_endings_comments_retry_and_multiline_data() {
        let stream = b"\xEF\xBB\xBFretry: 2000\r\n\r\n: keepalive\n\nevent: snapshot\rdata: a\r\ndata:b\ndata\n\nid: 7\nevent: change\ndata:  two spaces\n\ndata: tail-without-blank-line";
        let (got, retry) = parse(&[stream]);
        assert_eq!(
            got,
            vec![
                ev("snapshot", "", "a\nb\n"),
                ev("change", "7", " two spaces")
            ]
        );
        assert_eq!(retry, Some(Duration::from_millis(2000)));
    }

    #[test]
    fn cr_and_lf_split_across_chunks_are_one_line_ending() {
        let (got, _) = parse(&[b"data: x\r", b"\n\r", b"\ndata: y\r\r"]);
        assert_eq!(got, vec![ev("message", "", "x"), ev("message", "", "y")]);
    }

    #[test]
    fn id_with_nul_is_ignored_and_id_persists() {
        let (got, _) = parse(&[b"id: 1\ndata: a\n\nid: 2\0\ndata: b\n\ndata: c\n\n"]);
        assert_eq!(
            got,
            vec![
                ev("message", "1", "a"),
                ev("message", "1", "b"),
                ev("message", "1", "c")
            ]
        );
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_resets_its_name() {
        let (got, _) = parse(&[b"event: x\n\ndata: y\n\n"]);
        assert_eq!(got, vec![ev("message", "", "y")]);
    }

    #[test]
    fn retry_ignores_non_digits() {
        let (_, retry) = parse(&[b"retry: 12a\n\nretry:\n\n"]);
        assert_eq!(retry, None);
    }

    #[test]
    fn too_large_is_an_error_and_sticks() {
        let mut p = Parser::new(8);
        let mut out = VecDeque::new();
        assert_eq!(
            p.push(b"data: 0123456789\n", &mut out),
            Err(SseError::TooLarge(8))
        );
        assert!(p.push(b"\n", &mut out).is_err());
        let mut p = Parser::new(8);
        assert!(p.push(b"data: 12345\ndata: 12345\n", &mut out).is_err());
    }

    /// One event as a server may write it, with a chosen line ending.
    #[derive(Debug, Clone)]
    struct Written {
        name: Option<String>,
        id: Option<String>,
        data: Vec<String>,
        comment: bool,
        eol: &'static str,
    }

    fn written() -> impl Strategy<Value = Written> {
        let text = "[a-z0-9 {}\":,é]{0,12}";
        (
            proptest::option::of("[a-z_]{1,8}"),
            proptest::option::of("[0-9]{1,4}"),
            proptest::collection::vec(text, 0..4),
            any::<bool>(),
            prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
        )
            .prop_map(|(name, id, data, comment, eol)| Written {
                name,
                id,
                data,
                comment,
                eol,
            })
    }

    proptest! {
        /// Whatever the events, the line endings and the chunking, the
        /// parser yields exactly the events written.
        #[test]
        fn any_chunking_gives_the_written_events(
            events in proptest::collection::vec(written(), 0..12),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..24),
        ) {
            let mut bytes = Vec::new();
            let mut want = Vec::new();
            let mut last_id = String::new();
            for w in &events {
                let e = w.eol;
                if w.comment { bytes.extend_from_slice(format!(": keepalive{e}").as_bytes()); }
                if let Some(n) = &w.name { bytes.extend_from_slice(format!("event: {n}{e}").as_bytes()); }
                if let Some(i) = &w.id { bytes.extend_from_slice(format!("id: {i}{e}").as_bytes()); last_id = i.clone(); }
                for d in &w.data { bytes.extend_from_slice(format!("data: {d}{e}").as_bytes()); }
                bytes.extend_from_slice(e.as_bytes());
                if !w.data.is_empty() {
                    want.push(ev(w.name.as_deref().unwrap_or("message"), &last_id, &w.data.join("\n")));
                }
            }
            let whole = parse(&[&bytes]).0;
            prop_assert_eq!(&whole, &want);
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut at = 0;
            for p in points { chunks.push(&bytes[at..p]); at = p; }
            chunks.push(&bytes[at..]);
            prop_assert_eq!(parse(&chunks).0, want);
        }

        /// Arbitrary bytes never panic, and chunking never changes the result.
        #[test]
        fn arbitrary_bytes_any_chunking(bytes in proptest::collection::vec(any::<u8>(), 0..256), cut in any::<prop::sample::Index>()) {
            let at = cut.index(bytes.len() + 1);
            prop_assert_eq!(parse(&[&bytes]), parse(&[&bytes[..at], &bytes[at..]]));
        }
    }
}
