"""Session: a worker's liveness, kept alive in the background, and what it
makes (leases, lease scopes, batches, watch streams), as in
clients/go/session.go."""

from __future__ import annotations

import asyncio
import contextlib
import typing
import warnings
from collections.abc import Awaitable, Callable
from typing import TypeVar

from . import _models as m
from ._backoff import Backoff, ms
from ._batch import Batch
from ._conn import Conn
from ._errors import ClosedError, LeaseLostError, SessionLostError, SessionNotFoundError
from ._lease import Lease, SessionState
from ._scope import LeaseScope
from ._watch import Subscription, open_watch

T = TypeVar("T")


class Session(SessionState):
    """A worker's liveness on one broker: it keeps itself alive in the
    background (a keepalive every TTL/3) until ``close``, or until it is lost.
    Every lease is acquired through a session and is lost with it.

    ``done`` is set when the session ends, and ``error`` says why:
    :class:`ClosedError` after ``close``, a :class:`SessionLostError`
    otherwise. A lost session is never revived: create a new one (and acquire
    again; after a broker restart every route is free). Use it as
    ``async with await client.new_session(...) as s:``.
    """

    @classmethod
    async def _create(cls, c: Conn, owner_id: str, ttl: float) -> Session:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        raw, host = await c._call_at(
            "POST", "/v1/sessions", 201, body=m.CreateSessionRequest(owner_id=owner_id, ttl_ms=ms(ttl))
        )
        s = cls(c, m.decode(m.Session, raw), host)
        c._sessions.add(s)
        s._task = asyncio.create_task(s._keepalive(t0 + s.ttl), name=f"muster-keepalive-{s.owner_id}")
        return s

    def __repr__(self) -> str:
        # Never the session id: it is a secret (it releases this session's leases).
        state = "live" if self._error is None else ("closed" if isinstance(self._error, ClosedError) else "lost")
        return (
            f"<muster.Session owner_id={self.owner_id!r} holder_incarnation={self.holder_incarnation!r}"
            f" ttl={self.ttl:g}s {state} leases={len(self._leases)}>"
        )

    def __del__(self) -> None:
        if getattr(self, "_error", True) is None and getattr(self, "_warn_unclosed", False):
            warnings.warn(
                f"unclosed {self!r}: use `async with client.session(...)` or close()",
                ResourceWarning,
                stacklevel=2,
                source=self,
            )

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Ends the session at the broker (its leases are released there) and
        locally (every Lease is lost with ClosedError). Closing a session that
        already ended only stops its keepalive."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._error is not None:
            self._end(ClosedError())
            return
        self._end(ClosedError())
        with contextlib.suppress(SessionNotFoundError):
            await self._c._call("DELETE", f"/v1/sessions/{self.id}", 204, session=self)

    async def _keepalive(self, deadline: float) -> None:
        """A keepalive every TTL/3; a failed one is retried with backoff; when
        none got through by the local deadline (a lower bound of the broker's),
        the session is lost."""
        loop = asyncio.get_running_loop()
        interval = self.ttl / 3
        backoff = Backoff(0.1, interval)
        delay = interval
        last: BaseException | None = None
        while True:
            await asyncio.sleep(delay)
            if self._error is not None:
                return
            if last is not None and loop.time() >= deadline:
                self._end(SessionLostError("no keepalive got through within the TTL", last))
                return
            t0 = loop.time()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._c._call("POST", f"/v1/sessions/{self.id}/keepalive", 200, session=self)
            except SessionNotFoundError as e:
                self._end(SessionLostError("the broker ended it", e))
                return
            except Exception as e:  # any other failure is retried until the deadline
                if last is None or not isinstance(e, TimeoutError):
                    last = e
                delay = max(0.0, min(backoff.next(), deadline - loop.time()))
                continue
            deadline, last = t0 + self.ttl, None
            backoff.reset()
            delay = interval

    async def with_lease(
        self,
        route: str,
        ttl: float,
        fn: Callable[[Lease], Awaitable[T]],
        *,
        wait: float = 0.0,
    ) -> T:
        """Acquires ``route`` for ``ttl``, runs ``await fn(lease)`` while
        holding it (extending it every ttl/3) and releases it when fn returns.
        When the lease is lost, fn is cancelled and the loss (a LeaseLostError)
        is raised; when fn returned but the lease was lost while it ran, the
        loss is raised too: work done without the lease must not be taken as
        done. An exception of fn is raised as is."""
        lease = await self.acquire(route, ttl, wait=wait)
        work: asyncio.Future[T] = asyncio.ensure_future(fn(lease))
        renew = asyncio.create_task(lease._renew(ttl))
        lost = asyncio.create_task(lease.lost.wait())
        try:
            await asyncio.wait([work, typing.cast("asyncio.Future[T]", lost)], return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
        finally:
            for t in (renew, lost):
                t.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(renew, lost, work, return_exceptions=True)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await asyncio.shield(lease.release())
        exc = None if work.cancelled() else work.exception()
        if exc is not None:
            raise exc
        if isinstance(lease.error, LeaseLostError):
            raise lease.error
        return work.result()

    def lease(self, route: str, ttl: float, *, wait: float = 0.0) -> LeaseScope:
        """``async with session.lease(route, ttl) as lease:`` acquires
        ``route`` for ``ttl`` seconds (waiting up to ``wait``, as
        :meth:`acquire`), keeps it extended every ttl/3 while the block runs
        and releases it at the end. A loss cancels the block, which then
        raises the LeaseLostError (see :class:`muster.LeaseScope`)."""
        return LeaseScope(self, route, ttl, wait)

    def batch(self) -> Batch:
        """Starts an empty batch of this session's lease operations: up to
        MAX_BATCH_OPS acquisitions (never waiting), extensions and releases
        sent in one request by ``Batch.do``, one BatchResult per operation."""
        return Batch(self)

    async def watch(self, *selectors: str) -> Subscription:
        """Opens a watch stream whose registrations belong to this session:
        they end with it, a duplicate open of the same selector supersedes the
        older stream, and Subscription.unsubscribe can remove one of them."""
        return await open_watch(self._c, self.id, list(selectors))
