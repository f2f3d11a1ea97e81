"""The observer: a correct, advisory live view of the held leases matching
one selector. The algorithm of design §9 and docs/client-operations.md
("The observer: a correct live view"), step for step as clients/go/observe.go.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ._backoff import DEFAULT_RECONCILE_JITTER, Backoff, jittered, reconcile_interval
from ._bootstrap import Boot, apply_change, bootstrap
from ._broken import (
    BROKEN_IGNORE_LIVE,
    BROKEN_MERGE_VIEWS,
    BROKEN_NO_RECONCILE,
    BROKEN_RETRY_FATAL,
    BROKEN_STAY_READY,
)
from ._errors import (
    ClosedError,
    ForbiddenError,
    InvalidRequestError,
    InvalidSelectorError,
    MethodNotAllowedError,
    MusterException,
    NotFoundError,
    NotImplementedByBrokerError,
    StreamEndedError,
    StreamEndError,
    UnauthenticatedError,
)
from ._types import Change, Item, ObserverStats, View
from ._watch import Subscription

if TYPE_CHECKING:
    from ._conn import Conn

#: Recovery backoff of the observer: 50 ms doubling to 2 s, jittered.
RECOVER_MIN = 0.05
RECOVER_MAX = 2.0
#: Errors no retry fixes: they stop the observer.
_FATAL = (
    InvalidSelectorError,
    InvalidRequestError,
    UnauthenticatedError,
    ForbiddenError,
    NotFoundError,
    MethodNotAllowedError,
    NotImplementedByBrokerError,
)


class Observer:
    """Keeps an advisory view of the held leases matching one selector. It
    owns the bootstrap (open a watch stream and read its marker, buffer the
    changes, page the rest of the marker's snapshot, install it, apply the
    buffered changes newer than the marker, then report ready) and every
    recovery.

    The view can be stale at any moment, and it never grants anything (its
    items are plain values; only ``Session.acquire`` makes a Lease). It
    becomes not ready, and a fresh bootstrap starts at once, when the stream
    ends for any reason (overflow, supersede, a dropped connection, a broker
    restart: a new epoch replaces the old view entirely). Failed bootstraps
    are retried with backoff from 50 ms doubling to 2 s, jittered; only one
    bootstrap runs at a time. While ready, the observer re-bootstraps in the
    background every reconciliation interval (by default clamp(shortest TTL
    / 2, 5 s, 60 s) ±20 %), replacing the view when the new one is installed.
    An error no retry can fix (InvalidSelectorError, ForbiddenError,
    UnauthenticatedError, NotFoundError, ...) stops it: ``done`` is set and
    ``error`` says why.

    Start one with ``Client.observe``; ``await obs.ready()`` waits for the
    first view; ``obs.view()`` reads it; ``on_change`` callbacks, ``await
    obs.changed()`` or ``async for view in obs`` follow it; ``await
    obs.aclose()`` stops it promptly, even while a request hangs, and leaves
    no task behind.
    """

    def __init__(
        self, c: Conn, selector: str, interval: float, jitter: float, page_size: int, broken: frozenset[str]
    ) -> None:
        self._c = c
        self.selector = selector
        #: The (unjittered) periodic reconciliation interval, seconds.
        self.reconcile_every = interval
        self._jitter = jitter
        self._page_size = page_size
        self._broken = broken
        self._items: dict[str, Item] = {}
        self._ready = False
        self._epoch = ""
        self._revision = 0
        self._error: MusterException | None = None
        self._stop_error: MusterException | None = None
        self._closed = False
        self._changed = asyncio.Event()
        self._callbacks: list[Callable[[Observer], None]] = []
        self._stats = ObserverStats()
        self._inbox: asyncio.Queue[tuple[str, object, int]] = asyncio.Queue()
        self._gen = {"retry": 0, "reconcile": 0}
        self.done = asyncio.Event()  #: set when the observer has stopped
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def _start(
        cls,
        c: Conn,
        selector: str,
        *,
        shortest_ttl: float = 0.0,
        reconcile_interval: float | None = None,
        reconcile_jitter: float = DEFAULT_RECONCILE_JITTER,
        page_size: int = 500,
        broken: frozenset[str] = frozenset(),
    ) -> Observer:
        errs = []
        if not shortest_ttl >= 0:  # NaN too
            errs.append("the shortest TTL must not be negative")
        if reconcile_interval is not None and not reconcile_interval >= 0.010:
            errs.append("the reconciliation interval must be at least 10ms")
        if not (0 <= reconcile_jitter < 1):
            errs.append("the reconciliation jitter must be in [0, 1)")
        if not 1 <= page_size <= 500:
            errs.append("the page size must be in 1..500")
        if errs:
            raise InvalidRequestError(detail="Observe: " + "; ".join(errs))
        interval = reconcile_interval if reconcile_interval is not None else _default_interval(shortest_ttl)
        o = cls(c, selector, interval, reconcile_jitter, page_size, broken)
        o._task = asyncio.get_running_loop().create_task(o._run(), name=f"muster-observer {selector}")
        return o

    # ---- reading the view -------------------------------------------------

    def view(self) -> View:
        """A copy of the current view, items sorted by route."""
        items = sorted(self._items.values(), key=lambda i: i.route)
        return View(ready=self._ready, epoch=self._epoch, revision=self._revision, items=items)

    @property
    def is_ready(self) -> bool:
        """Whether the view is bootstrapped and followed live."""
        return self._ready

    @property
    def error(self) -> MusterException | None:
        """None while the view is ready. Otherwise why it is not ready (the
        end of the stream, or the last failed bootstrap); once the observer
        stopped, why it stopped (ClosedError after aclose)."""
        return self._error

    @property
    def closed(self) -> bool:
        """Whether the observer has stopped."""
        return self._closed

    def stats(self) -> ObserverStats:
        """Counts of bootstraps, recoveries and reconciliations."""
        return self._stats

    async def ready(self) -> None:
        """Waits until the view is ready; raises the observer's error when it
        stops first. Bound it with ``asyncio.timeout``."""
        while True:
            if self._ready:
                return
            if self._closed:
                raise self._error or ClosedError()
            await self._changed.wait()

    async def changed(self) -> None:
        """Waits for the next change of the view, of its readiness or of its
        error; returns at once when the observer has stopped."""
        if self._closed:
            return
        await self._changed.wait()

    def on_change(self, callback: Callable[[Observer], None]) -> Callable[[], None]:
        """Calls ``callback(observer)`` in the event loop at every change of
        the view, of its readiness or of its error; returns a function that
        removes it. An exception of the callback goes to the loop's exception
        handler, never into the observer."""
        self._callbacks.append(callback)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return remove

    def __aiter__(self) -> AsyncIterator[View]:
        """Yields the current view, then a view after every change (changes
        in a burst are coalesced), until the observer stops."""
        return self._views()

    async def _views(self) -> AsyncIterator[View]:
        while True:
            ev = self._changed
            yield self.view()
            if self._closed:
                return
            await ev.wait()

    async def aclose(self) -> None:
        """Stops the observer and waits for it: its stream is closed and any
        request in flight is cancelled, so it returns promptly even while the
        broker hangs. ``error`` is ClosedError afterwards."""
        if self._stop_error is None:
            self._stop_error = ClosedError()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def __aenter__(self) -> Observer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- the state machine --------------------------------------------------

    def _notify(self) -> None:
        old, self._changed = self._changed, asyncio.Event()
        old.set()
        loop = asyncio.get_running_loop()
        for cb in list(self._callbacks):
            try:
                cb(self)
            except Exception as e:
                loop.call_exception_handler({"message": "muster observer callback failed", "exception": e})

    def _post(self, kind: str, value: object = None) -> None:
        self._inbox.put_nowait((kind, value, self._gen.get(kind, 0)))

    def _schedule(self, handles: dict[str, asyncio.TimerHandle], kind: str, delay: float) -> None:
        """(Re)arms the timer ``kind``: an earlier arming never fires after this."""
        old = handles.pop(kind, None)
        if old is not None:
            old.cancel()
        self._gen[kind] += 1
        handles[kind] = asyncio.get_running_loop().call_later(delay, self._post, kind)

    def _disarm(self, handles: dict[str, asyncio.TimerHandle], kind: str) -> None:
        old = handles.pop(kind, None)
        if old is not None:
            old.cancel()
        self._gen[kind] += 1

    async def _run(self) -> None:
        """The observer's single task: it owns the current stream and starts
        at most one bootstrap at a time."""
        loop = asyncio.get_running_loop()
        cur: Subscription | None = None
        follower: asyncio.Task[None] | None = None
        pending: asyncio.Task[Boot] | None = None
        ready_at = -math.inf
        bo = Backoff(RECOVER_MIN, RECOVER_MAX)
        timers: dict[str, asyncio.TimerHandle] = {}
        cause: MusterException | None = None

        def start() -> asyncio.Task[Boot]:
            self._stats = replace(self._stats, attempts=self._stats.attempts + 1)
            t = loop.create_task(
                bootstrap(self._c, self.selector, self._page_size, self._broken), name="muster-observer-bootstrap"
            )
            t.add_done_callback(lambda t: self._post("boot", t))
            return t

        self._schedule(timers, "retry", 0)  # the first bootstrap starts at once
        try:
            while True:
                kind, value, gen = await self._inbox.get()
                if kind in ("retry", "reconcile") and gen != self._gen[kind]:
                    continue  # a timer re-armed or disarmed since
                if kind == "retry":
                    timers.pop("retry", None)
                    if pending is None:
                        pending = start()
                elif kind == "reconcile":
                    timers.pop("reconcile", None)
                    if pending is None:
                        self._stats = replace(self._stats, reconciliations=self._stats.reconciliations + 1)
                        pending = start()
                elif kind == "ended":
                    if value is not cur or cur is None:
                        continue  # a stream already replaced
                    err = cur.error
                    await cur.aclose()
                    cur, follower = None, None
                    if BROKEN_STAY_READY in self._broken:
                        continue
                    self._disarm(timers, "reconcile")
                    self._not_ready(err)
                    if pending is None:
                        if loop.time() - ready_at >= RECOVER_MAX:
                            bo.reset()  # it was stable: recover at once
                            self._schedule(timers, "retry", 0)
                        else:
                            self._schedule(timers, "retry", bo.next())
                elif kind == "boot":
                    if value is not pending or pending is None:
                        continue
                    task, pending = pending, None
                    if task.cancelled():  # not by this loop (it cancels only when stopping): retry
                        self._schedule(timers, "retry", bo.next())
                        continue
                    exc = task.exception()
                    if exc is not None:
                        if isinstance(exc, _FATAL) and BROKEN_RETRY_FATAL not in self._broken:
                            cause = exc
                            return
                        if cur is None:
                            self._not_ready(exc if isinstance(exc, MusterException) else _wrap(exc))
                        self._schedule(timers, "retry", bo.next())
                        continue
                    r = task.result()
                    if cur is not None:
                        await _stop_follower(follower, cur)
                    cur = r.sub
                    self._install(r)
                    ready_at = loop.time()
                    follower = loop.create_task(self._follow(cur), name="muster-observer-follow")
                    if BROKEN_NO_RECONCILE not in self._broken:
                        self._schedule(timers, "reconcile", jittered(self.reconcile_every, self._jitter))
        finally:
            for h in timers.values():
                h.cancel()
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(BaseException):
                    r = await pending
                    await r.sub.aclose()
            if cur is not None:
                await _stop_follower(follower, cur)
            self._stop(cause)

    async def _follow(self, sub: Subscription) -> None:
        """Applies the stream's changes until it ends, then reports the end."""
        while (ch := await sub.get()) is not None:
            self._apply(ch)
        self._post("ended", sub)

    def _apply(self, ch: Change) -> None:
        if ch.revision <= self._revision or BROKEN_IGNORE_LIVE in self._broken:
            return
        apply_change(self._items, ch, self._broken)
        self._revision = ch.revision
        self._notify()

    def _install(self, r: Boot) -> None:
        if BROKEN_MERGE_VIEWS in self._broken:
            r.items = {**self._items, **r.items}
        self._items, self._epoch, self._revision = r.items, r.epoch, r.revision
        self._ready, self._error = True, None
        self._stats = replace(self._stats, bootstraps=self._stats.bootstraps + 1)
        self._notify()

    def _not_ready(self, err: MusterException | None) -> None:
        if self._ready:
            self._stats = replace(self._stats, recoveries=self._stats.recoveries + 1)
        self._ready, self._error = False, err
        self._notify()

    def _stop(self, cause: MusterException | None) -> None:
        """Marks the observer stopped: by aclose, or by a fatal error."""
        if self._stop_error is None:
            self._stop_error = cause or ClosedError()
        self._error = self._stop_error
        self._ready, self._closed = False, True
        self._notify()
        self.done.set()


def _default_interval(shortest_ttl: float) -> float:
    return reconcile_interval(shortest_ttl)


def _wrap(e: BaseException) -> MusterException:
    """A transport failure as the observer's (not ready) error."""
    w = StreamEndedError(f"muster: bootstrap failed: {e!r}")
    w.__cause__ = e
    return w


async def _stop_follower(follower: asyncio.Task[None] | None, sub: Subscription) -> None:
    if follower is not None:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    await sub.aclose()


__all__ = ["Observer", "StreamEndError"]
