"""Watch streams (Server-Sent Events), as in clients/go/watch.go."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING

import httpx

from . import _models as m
from ._errors import (
    ClosedError,
    InvalidRequestError,
    InvalidSelectorError,
    MusterException,
    StreamEndedError,
    StreamEndError,
)
from ._http import read_body
from ._sse import SSEEvent, SSEParser
from ._types import Change, Item, Marker, MarkerPage

if TYPE_CHECKING:
    from ._conn import Conn

#: The terminal events of a stream.
END_REASONS = frozenset({"overflow", "superseded", "unsubscribed", "session_closed", "shutdown", "moved"})

#: Changes a Subscription holds for its reader; past it the stream is not
#: read, and a broker whose queue fills ends it with overflow.
QUEUE_SIZE = 64

_END = object()


async def open_watch(c: Conn, session_id: str | None, selectors: list[str]) -> Subscription:
    """Opens a watch stream over selectors, its registrations those of the
    session session_id (None: a read-only session of its own), and returns
    once the marker has arrived."""
    if not selectors:
        raise InvalidSelectorError(detail="Watch needs at least one selector")
    headers = c._headers({"Accept": "text/event-stream"})
    if session_id is not None:
        headers["Muster-Session"] = session_id
    resp = await c._send(
        "GET",
        "/v1/leases/watch",
        params=[("selector", x) for x in selectors],
        headers=headers,
        timeouts=c._timeouts(stream=True),
    )
    try:
        mt = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if resp.status_code != 200 or mt != "text/event-stream":
            body = await read_body(resp)
            if resp.status_code == 200:
                raise StreamEndedError(f"muster: watch answered {mt!r}, not an event stream")
            raise c._problem(resp, body)
        sub = Subscription(c, session_id, resp)
        await sub._read_marker()
    except BaseException:
        await resp.aclose()
        raise
    sub._start()
    return sub


class Subscription:
    """One open watch stream. ``marker`` is its first event; iterating it
    (``async for change in sub``) delivers the changes in revision order and
    stops when the stream ends; ``error`` then says why. A stream is never
    resumed: after an end, open a new one and rebuild from its marker (or use
    ``Client.observe``, which does all of this).

    A consumer that stops reading makes the broker end the stream with
    overflow once its queue fills; nothing is skipped silently.
    """

    def __init__(self, c: Conn, session_id: str | None, resp: httpx.Response) -> None:
        self._c = c
        self._session_id = session_id
        self._resp = resp
        self._parser = SSEParser()
        self._events: AsyncGenerator[SSEEvent, None] = self._sse_events()
        self._by_sub: dict[str, str] = {}
        self._q: asyncio.Queue[Change | object] = asyncio.Queue(QUEUE_SIZE)
        self._error: MusterException | None = None
        self._task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()  #: set when the stream has ended and its reader stopped
        self.marker = Marker(epoch="", revision=0, selectors=[])

    @property
    def error(self) -> MusterException | None:
        """None while the stream is open, then why it ended: a StreamEndError
        (reason overflow, superseded...), a StreamEndedError for a dropped
        connection, or ClosedError after aclose."""
        return self._error

    async def _sse_events(self) -> AsyncGenerator[SSEEvent, None]:
        async for chunk in self._resp.aiter_bytes():
            for ev in self._parser.feed(chunk):
                yield ev

    async def _read_marker(self) -> None:
        try:
            ev = await anext(self._events)
        except StopAsyncIteration:
            raise StreamEndedError("muster: watch stream ended before its marker") from None
        except (httpx.TransportError, ssl.SSLError) as e:  # an SSLError: a TLS alert httpx let through
            raise StreamEndedError(f"muster: watch stream ended before its marker: {e}") from e
        if ev.name != "snapshot":
            end = stream_end(ev)
            if end is not None:
                raise end
            raise StreamEndedError(f"muster: the first event of a watch stream is {ev.name!r}, not snapshot")
        try:
            snap = m.decode(m.SnapshotEvent, json.loads(ev.data))
        except ValueError as e:
            raise StreamEndedError(f"muster: decoding the snapshot marker: {e}") from None
        pages = []
        for sub in snap.subscriptions:
            self._by_sub[sub.id] = sub.selector
            pages.append(
                MarkerPage(
                    selector=sub.selector,
                    items=[Item.from_wire(i) for i in sub.items],
                    next_cursor=sub.next_cursor or "",
                )
            )
        self.marker = Marker(epoch=snap.epoch, revision=snap.revision, selectors=pages)

    def _start(self) -> None:
        self._task = asyncio.create_task(self._read(), name="muster-watch-reader")

    async def _read(self) -> None:
        """Forwards changes until the stream ends."""
        try:
            async for ev in self._events:
                if ev.name != "change":
                    end = stream_end(ev)
                    if end is not None:
                        self._fail(end)
                        break
                    continue  # an event this SDK does not know: ignore, for compatibility
                try:
                    ce = m.decode(m.ChangeEvent, json.loads(ev.data))
                except ValueError as e:
                    self._fail(StreamEndedError(f"muster: watch stream ended: undecodable change: {e}"))
                    break
                await self._q.put(
                    Change(
                        selector=self._by_sub.get(ce.subscription_id, ""),
                        route=ce.route,
                        kind=ce.kind,
                        revision=ce.revision,
                        item=Item.from_wire(ce.item) if ce.item is not None else None,
                    )
                )
            else:
                self._fail(StreamEndedError("muster: watch stream ended"))
        except asyncio.CancelledError:
            self._fail(ClosedError())
            raise
        except Exception as e:  # a transport failure or a malformed stream
            self._fail(StreamEndedError(f"muster: watch stream ended: {e!r}"))
        finally:
            with contextlib.suppress(BaseException):
                await self._events.aclose()
            with contextlib.suppress(BaseException):
                await self._resp.aclose()
            self._put_end()
            self.done.set()

    def _put_end(self) -> None:
        while True:
            try:
                self._q.put_nowait(_END)
                return
            except asyncio.QueueFull:
                self._q.get_nowait()  # only after a close: the consumer is gone or must stop

    def _fail(self, err: MusterException) -> None:
        if self._error is None:
            self._error = err

    async def get(self) -> Change | None:
        """The next change, or None once the stream has ended."""
        x = await self._q.get()
        if x is _END:
            self._q.put_nowait(_END)  # every later get sees the end too
            return None
        assert isinstance(x, Change)
        return x

    def __aiter__(self) -> AsyncIterator[Change]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Change]:
        while (ch := await self.get()) is not None:
            yield ch

    async def aclose(self) -> None:
        """Ends the stream and waits until its reader has stopped."""
        self._fail(ClosedError())
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        else:
            await self._resp.aclose()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def unsubscribe(self, selector: str) -> None:
        """Removes the registration of ``selector`` (the original string given
        to watch) from the session; the broker ends the stream with reason
        unsubscribed when it was the last one. A session-less stream answers
        InvalidRequestError: aclose it instead."""
        if self._session_id is None:
            raise InvalidRequestError(detail="a session-less stream has no registration to remove: Close it")
        await self._c._call(
            "DELETE", f"/v1/sessions/{self._session_id}/subscriptions", 204, params={"selector": selector}
        )


def stream_end(ev: SSEEvent) -> StreamEndError | None:
    """Decodes a terminal event, None for any other event."""
    if ev.name not in END_REASONS:
        return None
    revision = 0
    with contextlib.suppress(ValueError):
        e = m.decode(m.StreamEndEvent, json.loads(ev.data))
        revision = e.revision or 0
    return StreamEndError(ev.name, revision)
