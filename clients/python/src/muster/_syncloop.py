"""The private event loop of the synchronous facade: an asyncio loop running
in a daemon thread that a muster.sync.Client owns."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class Loop:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="muster-sync", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Runs coro on the loop and waits for its result. When the wait ends
        otherwise (``timeout`` seconds passed: TimeoutError; a
        KeyboardInterrupt), coro is cancelled."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("muster.sync: called from its own event loop thread")
        if self.loop.is_closed() or not self.loop.is_running():
            coro.close()
            raise RuntimeError("muster.sync: the client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except BaseException:
            fut.cancel()  # nothing when coro itself raised
            raise

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self.run(anext_(agen))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(RuntimeError):  # a client closed before the iterator
                    self.run(aclose())

    def stop(self) -> None:
        """Cancels what still runs on the loop (the keepalive of a session
        left open), then stops the loop and its thread."""

        async def cancel_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _anext(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()


async def anext_(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()
