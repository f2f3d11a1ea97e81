"""Watch-stream decoding where the real broker cannot be made to send it:
events this SDK does not know, a stream without its marker, a terminal event
with its revision, a dropped connection (tests/fakebroker.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

import muster

from .fakebroker import FakeBroker, Request, marker, wire_item

pytestmark = pytest.mark.anyio


async def watch_with(handler: Callable[[Request], Awaitable[None]]) -> tuple[FakeBroker, muster.Client]:
    fake = FakeBroker(handler)
    return fake, muster.Client(fake.url)


async def test_unknown_events_are_ignored_and_the_end_is_typed() -> None:
    async def handle(req: Request) -> None:
        await req.start_stream()
        await req.event("snapshot", marker("e1", 5, None))
        await req.event("from-the-future", {"x": 1})
        await req.event(
            "change",
            {
                "subscription_id": "sub-1",
                "route": "lease://acme/r/a",
                "kind": "acquired",
                "revision": 6,
                "item": wire_item("lease://acme/r/a", "w1"),
            },
        )
        await req.event("change", {"subscription_id": "sub-1", "route": "lease://acme/r/a", "kind": "x", "revision": 7})
        await req.event("superseded", {"reason": "superseded", "revision": 8})
        await req.hang()

    fake, c = await watch_with(handle)
    try:
        async with await c.watch("lease://acme/r/*") as sub:
            assert sub.marker.epoch == "e1" and sub.marker.revision == 5 and c.epoch == "e1"
            async with asyncio.timeout(5):
                changes = [ch async for ch in sub]
            assert [(ch.kind, ch.revision, ch.selector) for ch in changes] == [
                ("acquired", 6, "lease://acme/r/*"),
                ("x", 7, "lease://acme/r/*"),  # a kind newer than this SDK is kept as is
            ]
            err = sub.error
            assert isinstance(err, muster.StreamEndError) and err.reason == "superseded" and err.revision == 8
    finally:
        await c.aclose()
        fake.close()


@pytest.mark.parametrize(
    ("first", "match"),
    [
        ("change", "not snapshot"),
        ("overflow", "overflow"),
        ("snapshot-garbage", "decoding the snapshot marker"),
        ("nothing", "before its marker"),
    ],
)
async def test_the_first_event_must_be_the_marker(first: str, match: str) -> None:
    async def handle(req: Request) -> None:
        await req.start_stream()
        if first == "change":
            await req.event("change", {"subscription_id": "s", "route": "r", "kind": "acquired", "revision": 1})
        elif first == "overflow":
            await req.event("overflow", {"reason": "overflow"})
        elif first == "snapshot-garbage":
            await req.event("snapshot", {"epoch": 1})

    fake, c = await watch_with(handle)
    try:
        with pytest.raises(muster.StreamEndedError, match=match):
            await c.watch("lease://acme/r/*")
    finally:
        await c.aclose()
        fake.close()


async def test_a_dropped_connection_ends_the_stream() -> None:
    async def handle(req: Request) -> None:
        await req.start_stream()
        await req.event("snapshot", marker("e1", 5, None))
        req.writer.write(b'event: change\ndata: {"trunc')  # then the connection closes

    fake, c = await watch_with(handle)
    try:
        sub = await c.watch("lease://acme/r/*")
        async with asyncio.timeout(5):
            assert [ch async for ch in sub] == []
        assert type(sub.error) is muster.StreamEndedError
        assert muster.advice(sub.error) is muster.Retry.RESTART
        await sub.aclose()
    finally:
        await c.aclose()
        fake.close()


async def test_a_refused_watch_is_a_typed_error() -> None:
    async def handle(req: Request) -> None:
        body = b'{"type":"about:blank","title":"Forbidden","status":403,"code":"forbidden","detail":"no grant"}'
        req.writer.write(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/problem+json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    fake, c = await watch_with(handle)
    try:
        with pytest.raises(muster.ForbiddenError, match="no grant"):
            await c.watch("lease://acme/r/*")
    finally:
        await c.aclose()
        fake.close()
