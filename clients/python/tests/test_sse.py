"""The SSE parser: fixed cases of the WHATWG rules, and properties: any
chunking of a stream gives the same events; any line ending (CRLF, LF, CR)
gives the same events."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from muster._sse import EventTooLargeError, SSEEvent, SSEParser


def parse(data: bytes, cuts: list[int] | None = None) -> list[SSEEvent]:
    p = SSEParser()
    out: list[SSEEvent] = []
    prev = 0
    for c in sorted(set(cuts or [])):
        out += p.feed(data[prev:c])
        prev = c
    out += p.feed(data[prev:])
    return out


def test_fields_comments_retry_and_multiline_data() -> None:
    stream = (
        b"\xef\xbb\xbfretry: 2000\n"
        b": keepalive\n"
        b"\n"
        b"event: snapshot\n"
        b'data: {"a":1}\n'
        b"\n"
        b"event: change\nid: 42\ndata:first\ndata:  second\ndata\n\n"
        b"id: 4\x002\ndata: x\n\n"
        b"unknown: field\ndata: y\n\n"
        b"event: ignored-no-data\n\n"
        b"data: unterminated"
    )
    assert parse(stream) == [
        SSEEvent("snapshot", "", '{"a":1}'),
        SSEEvent("change", "42", "first\n second\n"),
        SSEEvent("message", "42", "x"),
        SSEEvent("message", "42", "y"),
    ]


def test_bom_only_at_the_start() -> None:
    assert parse(b"data: a\n\n\xef\xbb\xbfdata: b\n\n") == [SSEEvent("message", "", "a")]


def test_too_large() -> None:
    p = SSEParser(max_size=16)
    with pytest.raises(EventTooLargeError):
        p.feed(b"data: " + b"x" * 32 + b"\n")
    p = SSEParser(max_size=16)
    with pytest.raises(EventTooLargeError):
        p.feed(b"data: 0123456789\ndata: 0123456789\n")
    p = SSEParser(max_size=16)
    with pytest.raises(EventTooLargeError):
        p.feed(b"x" * 40)  # no line end yet


# A stream: events made of fields and comments, with arbitrary values.
values = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=20)
lines = st.one_of(
    st.builds(lambda v: "data: " + v, values),
    st.builds(lambda v: "data:" + v, values),
    st.just("data"),
    st.builds(lambda v: "event: " + v, values),
    st.builds(lambda v: "id: " + v, values),
    st.builds(lambda v: ": " + v, values),
    st.builds(lambda v: "retry: " + v, values),
    st.builds(lambda v: "other: " + v, values),
)
events = st.lists(st.lists(lines, max_size=5), max_size=8)


def render(evs: list[list[str]], nl: str) -> bytes:
    return "".join(nl.join(ev) + nl + nl for ev in evs).encode()


@settings(max_examples=300, deadline=None)
@given(evs=events, cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30))
def test_chunking_never_changes_the_events(evs: list[list[str]], cuts: list[int]) -> None:
    for nl in ("\n", "\r\n", "\r"):
        data = render(evs, nl)
        assert parse(data, [c % (len(data) + 1) for c in cuts]) == parse(data)


@settings(max_examples=300, deadline=None)
@given(evs=events, endings=st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=1, max_size=50))
def test_line_endings_are_equivalent(evs: list[list[str]], endings: list[str]) -> None:
    lf = render(evs, "\n")
    # The same stream with every line ending drawn from endings, in turn.
    lines_ = lf.decode().split("\n")[:-1]
    parts = []
    prev = ""
    for i, line in enumerate(lines_):
        nl = endings[i % len(endings)]
        if prev == "\r" and not line and nl == "\n":
            nl = "\r\n"  # CR then an empty line's LF would be one CRLF ending
        parts.append(line + nl)
        prev = nl
    mixed = "".join(parts).encode()
    assert parse(mixed) == parse(lf)
    # ... and fed one byte at a time.
    assert parse(mixed, list(range(len(mixed)))) == parse(lf)


@settings(max_examples=200, deadline=None)
@given(evs=events)
def test_every_event_with_data_is_dispatched(evs: list[list[str]]) -> None:
    got = parse(render(evs, "\n"))
    want = [ev for ev in evs if any(line == "data" or line.startswith("data:") for line in ev)]
    assert len(got) == len(want)
    for g, ev in zip(got, want, strict=True):
        data = [line.removeprefix("data").removeprefix(":").removeprefix(" ") for line in ev if line.startswith("data")]
        data = [
            d
            for line, d in zip([x for x in ev if x.startswith("data")], data, strict=True)
            if line == "data" or line.startswith("data:")
        ]
        assert g.data == "\n".join(data)
