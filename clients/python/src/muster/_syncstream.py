"""Watch streams and the observer of the synchronous facade (muster.sync):
blocking views of muster.Subscription and muster.Observer, run on the
client's private event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from ._errors import MusterException
from ._syncloop import Loop
from ._types import Change, Marker, ObserverStats, View

T = TypeVar("T")

if TYPE_CHECKING:
    from ._observe import Observer as AsyncObserver
    from ._watch import Subscription as AsyncSubscription


async def _when_done(task: asyncio.Task[None] | None, event: threading.Event) -> None:
    """Sets event once task is done (at once when there is none)."""
    if task is None or task.done():
        event.set()
    else:
        task.add_done_callback(lambda _: event.set())


class Subscription:
    """A blocking view of :class:`muster.Subscription`: ``marker``, ``for
    change in sub:`` (it stops when the stream ends; ``error`` then says
    why), ``get(timeout=)``, ``unsubscribe``, ``close``. ``done`` is a
    threading.Event. Use it as ``with c.watch(selector) as sub:``."""

    def __init__(self, loop: Loop, sub: AsyncSubscription) -> None:
        self._loop = loop
        self._sub = sub
        self.marker: Marker = sub.marker
        self.done = threading.Event()  #: set when the stream has ended and its reader stopped
        loop.run(_when_done(sub._task, self.done))

    @property
    def error(self) -> MusterException | None:
        """None while the stream is open, then why it ended (see :attr:`muster.Subscription.error`)."""
        return self._sub.error

    def get(self, timeout: float | None = None) -> Change | None:
        """The next change, or None once the stream has ended; TimeoutError
        when none came within ``timeout`` seconds (the stream goes on)."""
        return self._loop.run(self._sub.get(), timeout)

    def __iter__(self) -> Iterator[Change]:
        return self._loop.iterate(aiter(self._sub))

    def unsubscribe(self, selector: str) -> None:
        """See :meth:`muster.Subscription.unsubscribe`."""
        self._loop.run(self._sub.unsubscribe(selector))

    def close(self) -> None:
        """Ends the stream and waits until its reader has stopped."""
        self._loop.run(self._sub.aclose())

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Observer:
    """A blocking view of :class:`muster.Observer`: ``ready(timeout=)``,
    ``view()``, ``is_ready``, ``error``, ``changed(timeout=)``, ``for view in
    observer:`` (the current view, then one after every change, until it
    stops), ``on_change``, ``stats()``, ``close()``. ``done`` is a
    threading.Event. Use it as ``with c.observe(selector) as o:``."""

    def __init__(self, loop: Loop, o: AsyncObserver) -> None:
        self._loop = loop
        self._o = o
        self.selector = o.selector
        self.reconcile_every = o.reconcile_every
        self.done = threading.Event()  #: set when the observer has stopped
        loop.run(_when_done(o._task, self.done))

    def view(self) -> View:
        """A copy of the current view, items sorted by route (also from an
        ``on_change`` callback)."""
        if threading.current_thread() is self._loop.thread:
            return self._o.view()
        return self._loop.run(_call(self._o.view))

    @property
    def is_ready(self) -> bool:
        return self._o.is_ready

    @property
    def error(self) -> MusterException | None:
        """See :attr:`muster.Observer.error`."""
        return self._o.error

    @property
    def closed(self) -> bool:
        return self._o.closed

    def stats(self) -> ObserverStats:
        return self._o.stats()

    def ready(self, timeout: float | None = None) -> None:
        """Waits until the view is ready; raises the observer's error when it
        stops first, TimeoutError after ``timeout`` seconds (it goes on)."""
        self._loop.run(self._o.ready(), timeout)

    def changed(self, timeout: float | None = None) -> bool:
        """Waits for the next change of the view, of its readiness or of its
        error: True when one came (or the observer has stopped), False after
        ``timeout`` seconds, as ``threading.Event.wait``."""
        try:
            self._loop.run(self._o.changed(), timeout)
        except TimeoutError:
            return False
        return True

    def on_change(self, callback: Callable[[Observer], None]) -> Callable[[], None]:
        """Calls ``callback(observer)`` at every change, **in the client's
        event loop thread**: it must return quickly, and of this client it may
        call only ``view()``, ``is_ready`` and ``error`` (the blocking
        methods would wait for the thread it runs in). Returns a function
        that removes it."""
        remove = self._o.on_change(lambda _: callback(self))

        def remove_sync() -> None:
            self._loop.run(_call(remove))

        return remove_sync

    def __iter__(self) -> Iterator[View]:
        return self._loop.iterate(aiter(self._o))

    def close(self) -> None:
        """Stops the observer and waits for it (see :meth:`muster.Observer.aclose`)."""
        self._loop.run(self._o.aclose())

    def __enter__(self) -> Observer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


async def _call(fn: Callable[[], T]) -> T:
    """Runs fn in the loop thread (the observer's state belongs to it)."""
    return fn()
