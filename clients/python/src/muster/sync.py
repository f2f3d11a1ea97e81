"""The synchronous facade, for scripts: session, acquire/extend/release,
with_lease, list, get and fleet, with the same behaviour as the asyncio API
(it *is* the asyncio API, run on a private event loop in a daemon thread that
the Client owns, so the session keepalive runs in the background while the
script blocks).

    with muster.sync.Client("http://127.0.0.1:7420", token="...") as c:
        with c.new_session("worker-1", ttl=10) as s:
            lease = s.acquire("lease://acme/renderers/doc-1", ttl=30)
            ...
            lease.release()

Watch streams and the observer are asyncio only.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from . import _batch, _client, _fleet, _session
from ._errors import LeaseLostError, MusterException
from ._types import Item, LeaseStatus, Page, Plan, Spec, SweepResult

T = TypeVar("T")

__all__ = ["Batch", "BatchResult", "Client", "Fleet", "Lease", "Session"]


class _Loop:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="muster-sync", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("muster.sync: called from its own event loop thread")
        if self.loop.is_closed() or not self.loop.is_running():
            coro.close()
            raise RuntimeError("muster.sync: the client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self.run(_anext(agen))
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


class Client:
    """A blocking client of the broker at ``base_url``, or of several brokers
    (a list of base URLs, or one string with them separated by commas); see
    :class:`muster.Client`."""

    def __init__(self, base_url: str | Sequence[str], *, token: str = "", without_follow: bool = False) -> None:
        self._loop = _Loop()

        async def make() -> _client.Client:
            return _client.Client(base_url, token=token, without_follow=without_follow)

        try:
            self._c = self._loop.run(make())
        except BaseException:
            self._loop.stop()
            raise

    def close(self) -> None:
        """Closes the HTTP client and stops the private event loop."""
        try:
            self._loop.run(self._c.aclose())
        finally:
            self._loop.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def epoch(self) -> str:
        return self._c.epoch

    def new_session(self, owner_id: str, ttl: float) -> Session:
        """Creates a session; its keepalive runs in the background until close."""
        return Session(self._loop, self._loop.run(self._c.new_session(owner_id, ttl)))

    def list_page(self, selector: str, *, limit: int = 0, cursor: str = "") -> Page:
        return self._loop.run(self._c.list_page(selector, limit=limit, cursor=cursor))

    def list(self, selector: str, *, limit: int = 0, cursor: str = "") -> Iterator[Item]:
        """Iterates over the held leases matching ``selector``, one request per page, lazily."""
        return self._loop.iterate(self._c.list(selector, limit=limit, cursor=cursor))

    def get(self, route: str) -> LeaseStatus:
        return self._loop.run(self._c.get(route))

    def fleet(self, root: str) -> Fleet:
        return Fleet(self._loop, self._c.fleet(root))


class Session:
    """A blocking view of :class:`muster.Session`; ``done`` is a threading.Event."""

    def __init__(self, loop: _Loop, s: _session.Session) -> None:
        self._loop = loop
        self._s = s
        self.id = s.id
        self.owner_id = s.owner_id
        self.holder_incarnation = s.holder_incarnation
        self.epoch = s.epoch
        self.ttl = s.ttl
        self.done = threading.Event()
        s._on_end.append(self.done.set)
        if s.error is not None:
            self.done.set()

    @property
    def error(self) -> MusterException | None:
        return self._s.error

    def close(self) -> None:
        self._loop.run(self._s.close())

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def acquire(self, route: str, ttl: float, *, wait: float = 0.0) -> Lease:
        """See :meth:`muster.Session.acquire`."""
        return Lease(self._loop, self._loop.run(self._s.acquire(route, ttl, wait=wait)))

    def batch(self) -> Batch:
        """See :meth:`muster.Session.batch`: lease operations sent in one request."""
        return Batch(self._loop, self._s.batch())

    def with_lease(self, route: str, ttl: float, fn: Callable[[Lease], T], *, wait: float = 0.0) -> T:
        """Acquires ``route``, runs ``fn(lease)`` in this thread while the
        lease is extended every ttl/3 in the background, and releases it when
        fn returns. A blocking fn cannot be cancelled: it should check
        ``lease.lost``. When the lease was lost while fn ran, the loss (a
        LeaseLostError) is raised instead of fn's result."""
        lease = self.acquire(route, ttl, wait=wait)
        renew = asyncio.run_coroutine_threadsafe(lease._l._renew(ttl), self._loop.loop)
        try:
            result = fn(lease)
        finally:
            renew.cancel()
            # On a failure the lease ends at its TTL at the latest.
            with contextlib.suppress(Exception):
                self._loop.run(asyncio.wait_for(lease._l.release(), 5))
        err = lease._l.error
        if isinstance(err, LeaseLostError):
            raise err
        return result


class Lease:
    """A blocking view of :class:`muster.Lease`; ``lost`` is a threading.Event."""

    def __init__(self, loop: _Loop, lease: _session.Lease) -> None:
        self._loop = loop
        self._l = lease
        self.route = lease.route
        self.fencing_token = lease.fencing_token
        self.acquired_at = lease.acquired_at
        self.lost = threading.Event()
        lease._on_end.append(self.lost.set)
        if lease.error is not None:
            self.lost.set()

    @property
    def expires_at(self) -> datetime:
        return self._l.expires_at

    @property
    def renewals(self) -> int:
        return self._l.renewals

    @property
    def error(self) -> MusterException | None:
        return self._l.error

    def extend(self, ttl: float) -> None:
        self._loop.run(self._l.extend(ttl))

    def release(self) -> None:
        self._loop.run(self._l.release())


@dataclass(frozen=True)
class BatchResult:
    """See :class:`muster.BatchResult`; ``lease`` is a blocking :class:`Lease`
    (the very one given to extend or release)."""

    op: str
    route: str
    lease: Lease | None
    error: MusterException | None


class Batch:
    """A blocking view of :class:`muster.Batch`: build it with
    ``Session.batch()``, send it with ``do()``. Not safe for concurrent use."""

    def __init__(self, loop: _Loop, b: _batch.Batch) -> None:
        self._loop = loop
        self._b = b
        self._given: dict[int, Lease] = {}

    def __len__(self) -> int:
        return len(self._b)

    def acquire(self, route: str, ttl: float) -> Batch:
        """See :meth:`muster.Batch.acquire` (never waits)."""
        self._b.acquire(route, ttl)
        return self

    def extend(self, lease: Lease, ttl: float) -> Batch:
        """See :meth:`muster.Batch.extend`."""
        self._given[id(lease._l)] = lease
        self._b.extend(lease._l, ttl)
        return self

    def release(self, lease: Lease) -> Batch:
        """See :meth:`muster.Batch.release`."""
        self._given[id(lease._l)] = lease
        self._b.release(lease._l)
        return self

    def do(self) -> list[BatchResult]:
        """See :meth:`muster.Batch.do`: one result per operation, in order."""
        out = []
        for r in self._loop.run(self._b.do()):
            lease = None
            if r.lease is not None:
                lease = self._given.get(id(r.lease)) or Lease(self._loop, r.lease)
            out.append(BatchResult(r.op, r.route, lease, r.error))
        return out


class Fleet:
    """A blocking view of :class:`muster.Fleet`."""

    def __init__(self, loop: _Loop, f: _fleet.Fleet) -> None:
        self._loop = loop
        self._f = f
        self.root = f.root

    def register(self, kind: str, spec: Any) -> Spec:
        return self._loop.run(self._f.register(kind, spec))

    def get(self, name: str) -> Spec:
        return self._loop.run(self._f.get(name))

    def forget(self, name: str) -> None:
        self._loop.run(self._f.forget(name))

    def desired(self) -> Iterator[Spec]:
        return self._loop.iterate(self._f.desired())

    def sweep(self, validate: Callable[[Any], T]) -> SweepResult[T]:
        return self._loop.run(self._f.sweep(validate))

    def plan(self, desired: Sequence[str], live: Sequence[str]) -> Plan:
        return self._loop.run(self._f.plan(desired, live))

    def gap(self, live_selector: str) -> Plan:
        return self._loop.run(self._f.gap(live_selector))
