"""The synchronous facade, for scripts: session, acquire/extend/release, the
lease scope, with_lease, batch, list, get, watch, observe and fleet, with the
same behaviour as the asyncio API (it *is* the asyncio API, run on a private
event loop in a daemon thread that the Client owns, so the session keepalive
runs in the background while the script blocks).

    with muster.sync.Client("http://127.0.0.1:7420", token="...") as c:
        with c.new_session("worker-1", ttl=10) as s:
            with s.lease("lease://acme/renderers/doc-1", ttl=30) as lease:
                ...  # extended in the background; check lease.lost
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from . import _batch, _client, _fleet, _lease, _observe, _session
from ._errors import LeaseLostError, MusterException
from ._scope import RELEASE_TIMEOUT
from ._syncloop import Loop
from ._syncstream import Observer, Subscription
from ._tls import StrPath
from ._types import Item, LeaseStatus, Page, Plan, Spec, SweepResult

T = TypeVar("T")

__all__ = ["Batch", "BatchResult", "Client", "Fleet", "Lease", "Observer", "Session", "Subscription"]


class Client:
    """A blocking client of the broker at ``base_url``, or of several brokers
    (a list of base URLs, or one string with them separated by commas); see
    :class:`muster.Client` (``ca_file`` and ``client_cert`` too)."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        token: str = "",
        without_follow: bool = False,
        timeout: float | None = _client.DEFAULT_TIMEOUT,
        ca_file: StrPath | None = None,
        client_cert: tuple[StrPath, StrPath] | None = None,
    ) -> None:
        self._loop = Loop()

        async def make() -> _client.Client:
            return _client.Client(
                base_url,
                token=token,
                without_follow=without_follow,
                timeout=timeout,
                ca_file=ca_file,
                client_cert=client_cert,
            )

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

    def __repr__(self) -> str:
        state = " closed" if self._loop.loop.is_closed() else ""
        return f"<muster.sync.Client {','.join(self._c.base_urls)}{state}>"

    def __del__(self) -> None:
        loop = getattr(self, "_loop", None)
        if loop is not None and hasattr(self, "_c") and not loop.loop.is_closed():
            warnings.warn(f"unclosed {self!r}: use `with` or close()", ResourceWarning, stacklevel=2, source=self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def epoch(self) -> str:
        return self._c.epoch

    @property
    def timeout(self) -> float | None:
        return self._c.timeout

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

    def watch(self, *selectors: str) -> Subscription:
        """See :meth:`muster.Client.watch`: ``with c.watch(sel) as sub: for change in sub: ...``."""
        return Subscription(self._loop, self._loop.run(self._c.watch(*selectors)))

    def observe(
        self,
        selector: str,
        *,
        shortest_ttl: float = 0.0,
        reconcile_interval: float | None = None,
        reconcile_jitter: float = 0.2,
        page_size: int = 500,
    ) -> Observer:
        """See :meth:`muster.Client.observe`: ``with c.observe(sel) as o: o.ready(timeout=10); o.view()``."""

        async def start() -> _observe.Observer:
            return self._c.observe(
                selector,
                shortest_ttl=shortest_ttl,
                reconcile_interval=reconcile_interval,
                reconcile_jitter=reconcile_jitter,
                page_size=page_size,
            )

        return Observer(self._loop, self._loop.run(start()))


class Session:
    """A blocking view of :class:`muster.Session`; ``done`` is a threading.Event."""

    def __init__(self, loop: Loop, s: _session.Session) -> None:
        self._loop = loop
        self._s = s
        self.id = s.id
        self.owner_id = s.owner_id
        self.holder_incarnation = s.holder_incarnation
        self.ttl = s.ttl
        self.done = threading.Event()
        s._on_end.append(self.done.set)
        if s.error is not None:
            self.done.set()

    @property
    def error(self) -> MusterException | None:
        return self._s.error

    @property
    def epoch(self) -> str:
        """The lifetime of the broker that holds the session: its creator, or
        the broker a planned move took its family to."""
        return self._s.epoch

    def __repr__(self) -> str:
        return repr(self._s)

    def __del__(self) -> None:
        s = getattr(self, "_s", None)
        if s is not None and s.error is None and s._warn_unclosed:
            s._warn_unclosed = False  # once, not again for the session itself
            warnings.warn(f"unclosed {s!r}: use `with` or close()", ResourceWarning, stacklevel=2, source=self)

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

    @contextlib.contextmanager
    def lease(self, route: str, ttl: float, *, wait: float = 0.0) -> Iterator[Lease]:
        """``with session.lease(route, ttl) as lease:`` acquires ``route``
        (waiting up to ``wait``, as :meth:`acquire`), keeps it extended every
        ttl/3 in the background while the block runs, and releases it at the
        end. A blocking block cannot be cancelled: it should check
        ``lease.lost``. When the lease was lost while the block ran, the loss
        (a LeaseLostError) is raised at its end."""
        lease = self.acquire(route, ttl, wait=wait)
        renew = asyncio.run_coroutine_threadsafe(lease._l._renew(ttl), self._loop.loop)
        try:
            yield lease
        finally:
            renew.cancel()
            # On a failure the lease ends at its TTL at the latest.
            with contextlib.suppress(Exception):
                self._loop.run(asyncio.wait_for(lease._l.release(), RELEASE_TIMEOUT))
        err = lease._l.error
        if isinstance(err, LeaseLostError):
            raise err

    def with_lease(self, route: str, ttl: float, fn: Callable[[Lease], T], *, wait: float = 0.0) -> T:
        """``fn(lease)`` run in this thread inside :meth:`lease`: the lease is
        extended in the background and released when fn returns; when it was
        lost while fn ran, the loss (a LeaseLostError) is raised instead of
        fn's result."""
        with self.lease(route, ttl, wait=wait) as lease:
            return fn(lease)

    def watch(self, *selectors: str) -> Subscription:
        """See :meth:`muster.Session.watch`."""
        return Subscription(self._loop, self._loop.run(self._s.watch(*selectors)))


class Lease:
    """A blocking view of :class:`muster.Lease`; ``lost`` is a threading.Event."""

    def __init__(self, loop: Loop, lease: _lease.Lease) -> None:
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

    def __repr__(self) -> str:
        return _lease.lease_repr("muster.sync.Lease", self._l)

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

    def __init__(self, loop: Loop, b: _batch.Batch) -> None:
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

    def __init__(self, loop: Loop, f: _fleet.Fleet) -> None:
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
