"""The observer's bootstrap (design §9, docs/client-operations.md "The
observer: a correct live view"), as clients/go/observe.go: open a watch
stream and read its marker, buffer the changes that follow, page the rest of
the marker's snapshot, then apply the buffered changes newer than the marker.
The Observer (_observe.py) installs the result and keeps it live."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ._broken import (
    BROKEN_DROP_BUFFERED,
    BROKEN_IGNORE_EXPIRED,
    BROKEN_IGNORE_SESSION_CLOSED,
    BROKEN_IGNORE_SNAPSHOT,
    BROKEN_UNCANCELLABLE_PAGES,
)
from ._errors import EpochChangedError, StreamEndedError
from ._types import Change, ChangeKind, Item, Marker
from ._watch import Subscription, open_watch

if TYPE_CHECKING:
    from ._conn import Conn

T = TypeVar("T")

#: Bounds the changes an observer buffers while it pages a snapshot; beyond
#: it the bootstrap starts over.
MAX_BUFFERED = 100_000


@dataclass
class Boot:
    """A bootstrap's result: the open stream and the view it built."""

    sub: Subscription
    items: dict[str, Item]
    epoch: str
    revision: int


async def bootstrap(c: Conn, selector: str, page_size: int, broken: frozenset[str]) -> Boot:
    """Opens a stream, pages the rest of its marker's snapshot while
    buffering the stream's changes, and builds the view. On success the
    stream stays open for the caller."""
    sub = await open_watch(c, None, [selector])
    try:
        m = sub.marker
        if len(m.selectors) != 1:
            raise StreamEndedError(f"muster: the marker has {len(m.selectors)} subscriptions, want 1")
        items = {it.route: it for it in m.selectors[0].items}
        buf: list[Change] = []

        async def buffer() -> None:
            while (ch := await sub.get()) is not None:
                buf.append(ch)
                if len(buf) > MAX_BUFFERED:
                    return

        buffering = asyncio.create_task(buffer(), name="muster-observer-buffer")
        paging = asyncio.create_task(_page_rest(c, selector, page_size, broken, m, items), name="muster-observer-page")
        try:
            await asyncio.wait({buffering, paging}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (buffering, paging):
                t.cancel()
            await asyncio.gather(buffering, paging, return_exceptions=True)
        if not paging.cancelled() and paging.exception() is None:
            pass  # the snapshot is complete
        elif not paging.cancelled():
            raise paging.exception()  # type: ignore[misc]
        elif len(buf) > MAX_BUFFERED:
            raise StreamEndedError(f"muster: more than {MAX_BUFFERED} changes while paging a snapshot")
        else:
            raise sub.error or StreamEndedError("muster: watch stream ended")
        if BROKEN_IGNORE_SNAPSHOT in broken:
            items.clear()
        if BROKEN_DROP_BUFFERED in broken:
            buf = []
        rev = m.revision
        for ch in buf:
            if ch.revision > m.revision:
                apply_change(items, ch, broken)
                rev = max(rev, ch.revision)
        return Boot(sub=sub, items=items, epoch=m.epoch, revision=rev)
    except BaseException:
        await sub.aclose()
        raise


async def _page_rest(
    c: Conn, selector: str, page_size: int, broken: frozenset[str], m: Marker, items: dict[str, Item]
) -> None:
    """Reads the rest of the marker's snapshot into items."""
    cursor = m.selectors[0].next_cursor
    while cursor:
        page = c.list_page(selector, limit=page_size, cursor=cursor)
        if BROKEN_UNCANCELLABLE_PAGES in broken:
            page = _uncancellable(page)
        p = await page
        if p.epoch != m.epoch:
            raise EpochChangedError(detail="the broker restarted during the bootstrap")
        for it in p.items:
            items[it.route] = it
        cursor = p.next_cursor


def apply_change(items: dict[str, Item], ch: Change, broken: frozenset[str]) -> None:
    """Applies one change to items (but those the broken flaws ignore)."""
    if (ch.kind == ChangeKind.EXPIRED and BROKEN_IGNORE_EXPIRED in broken) or (
        ch.kind == ChangeKind.SESSION_CLOSED and BROKEN_IGNORE_SESSION_CLOSED in broken
    ):
        return
    if ch.kind == ChangeKind.ACQUIRED and ch.item is not None:
        items[ch.route] = ch.item
    else:
        items.pop(ch.route, None)


async def _uncancellable(coro: Coroutine[Any, Any, T]) -> T:
    """Awaits coro ignoring cancellation (BROKEN_UNCANCELLABLE_PAGES only)."""
    inner = asyncio.ensure_future(coro)
    while not inner.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(inner)
    return inner.result()
