"""Session (a worker's liveness, kept alive in the background) and Lease (the
only ownership handle), as in clients/go/session.go and lease.go."""

from __future__ import annotations

import asyncio
import contextlib
import typing
import warnings
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from . import _loss
from . import _models as m
from ._backoff import Backoff, ms
from ._errors import (
    ClosedError,
    FencedError,
    LeaseExpiredError,
    LeaseLostError,
    MusterError,
    MusterException,
    NotOwnerError,
    ReleasedError,
    SessionLostError,
    SessionNotFoundError,
)
from ._http import Route, parse_route

if TYPE_CHECKING:
    from ._batch import Batch
    from ._client import Client
    from ._scope import LeaseScope
    from ._watch import Subscription

T = TypeVar("T")


class Session:
    """A worker's liveness on one broker: it keeps itself alive in the
    background (a keepalive every TTL/3) until ``close``, or until it is lost.
    Every lease is acquired through a session and is lost with it.

    ``done`` is set when the session ends, and ``error`` says why:
    :class:`ClosedError` after ``close``, a :class:`SessionLostError`
    otherwise. A lost session is never revived: create a new one (and acquire
    again; after a broker restart every route is free). Use it as
    ``async with await client.new_session(...) as s:``.
    """

    def __init__(self, c: Client, wire: m.Session, host: str = "") -> None:
        self._c = c
        # The broker (host:port) that last answered one of its requests with
        # success, and that broker's epoch: it holds the session (its
        # creator, or the broker a planned move took its family to; _loss).
        self._host = host
        self.id = wire.session_id  #: a secret: whoever has it can release this session's leases
        self.owner_id = wire.owner_id
        self.holder_incarnation = wire.holder_incarnation  #: as shown in inventory items
        self.epoch = wire.epoch  #: the lifetime of the broker that holds the session (see _host)
        self.ttl = wire.ttl_ms / 1000
        self.done = asyncio.Event()
        self._error: MusterException | None = None
        self._leases: dict[str, Lease] = {}
        self._task: asyncio.Task[None] | None = None
        self._on_end: list[Callable[[], None]] = []
        self._warn_unclosed = True  # cleared by a wrapper that warned already (muster.sync)

    @classmethod
    async def _create(cls, c: Client, owner_id: str, ttl: float) -> Session:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        raw, host = await c._call_at(
            "POST", "/v1/sessions", 201, body=m.CreateSessionRequest(owner_id=owner_id, ttl_ms=ms(ttl))
        )
        s = cls(c, m.decode(m.Session, raw), host)
        _loss.track(c, s)
        s._task = asyncio.create_task(s._keepalive(t0 + s.ttl), name=f"muster-keepalive-{s.owner_id}")
        return s

    @property
    def client(self) -> Client:
        return self._c

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

    @property
    def error(self) -> MusterException | None:
        """None while the session lives, then why it ended."""
        return self._error

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

    def _end(self, cause: MusterException) -> None:
        """Records why the session ended, once, stops its keepalive and loses
        its leases."""
        if self._error is not None:
            return
        self._error = cause
        _loss.untrack(self._c, self)
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        leases, self._leases = self._leases, {}
        self.done.set()
        for lease in leases.values():
            lease._end(LeaseLostError(cause))
        for cb in self._on_end:
            cb()

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

    # ---- leases -----------------------------------------------------------

    async def acquire(self, route: str, ttl: float, *, wait: float = 0.0) -> Lease:
        """Acquires the exact ``route`` (lease://realm/area/resource) for
        ``ttl`` seconds (0.1 .. 600). With ``wait`` > 0 (at most 30 s) it waits
        in the route's FIFO queue when another session holds the lease, then
        fails with WaitTimeoutError; without, it fails at once with
        LeaseHeldError. When this session already holds the route it returns
        the same Lease (a second handle if the first was dropped) without
        resetting its TTL."""
        r = parse_route(route)
        if self._error is not None:
            raise self._error
        loop = asyncio.get_running_loop()
        body = m.AcquireRequest(session_id=self.id, ttl_ms=ms(ttl), wait_ms=ms(wait) if wait > 0 else None)
        t0 = loop.time()
        try:
            out = await self._c._decode_call(
                m.Lease, "POST", f"/v1/leases/{r.path}/acquire", 200, body=body, wait=max(wait, 0.0), session=self
            )
        except SessionNotFoundError as e:
            _loss.not_found(self, e)
            raise
        return self._adopt(r, out, t0, ttl)

    def _adopt(self, r: Route, out: m.Lease, t0: float, ttl: float) -> Lease:
        """The handle of a lease the broker granted (or answered already_held
        for) to a request sent at loop time t0 for ttl (a single or a batch
        acquire): the tracked handle when it is the same grant, otherwise a
        new one whose local deadline is t0 + expires_after_request_ms (see
        _local_deadline)."""
        loop = asyncio.get_running_loop()
        if out.outcome == "already_held":
            held = self._leases.get(str(r))
            if held is not None and held.fencing_token == out.fencing_token:
                return held
        deadline = t0 + ttl if self._c._send_plus_ttl else _local_deadline(out, t0, ttl)
        lease = Lease(self, r, out)
        lease._timer = loop.call_at(deadline, lease._expired)
        if self._error is not None:
            lease._end(LeaseLostError(self._error))
        else:
            self._leases[str(r)] = lease
        return lease

    def _untrack(self, lease: Lease) -> None:
        if self._leases.get(lease.route) is lease:
            del self._leases[lease.route]

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
        from ._scope import LeaseScope

        return LeaseScope(self, route, ttl, wait)

    def batch(self) -> Batch:
        """Starts an empty batch of this session's lease operations: up to
        MAX_BATCH_OPS acquisitions (never waiting), extensions and releases
        sent in one request by ``Batch.do``, one BatchResult per operation."""
        from ._batch import Batch

        return Batch(self)

    async def watch(self, *selectors: str) -> Subscription:
        """Opens a watch stream whose registrations belong to this session:
        they end with it, a duplicate open of the same selector supersedes the
        older stream, and Subscription.unsubscribe can remove one of them."""
        from ._watch import open_watch

        return await open_watch(self._c, self, list(selectors))


def _local_deadline(out: m.Lease, t0: float, ttl: float) -> float:
    """The local deadline, in loop time (monotonic), of a lease that an
    acquire sent at loop time t0 for ttl was answered with: t0 +
    expires_after_request_ms, the broker's expiry counted from the moment it
    took the request up, which came after t0. So the deadline is never later
    than the broker's expiry, and after a wait in the queue it stays as close
    to it as the network allows (t0 + ttl would be the whole wait early). A
    broker that does not send the member (an older one) gets t0 + ttl: a
    lower bound for a grant, and, for already_held, no more than what the
    answer's expires_at leaves (read against the wall clock: all such a
    broker says), counted from now on the loop's clock."""
    if out.expires_after_request_ms is not None:
        return t0 + out.expires_after_request_ms / 1000
    deadline = t0 + ttl
    if out.outcome == "already_held":
        # The TTL was not reset: never trust more than what remains.
        rem = (out.expires_at - datetime.now(UTC)).total_seconds()
        if rem < ttl:
            deadline = asyncio.get_running_loop().time() + rem
    return deadline


def lease_repr(name: str, lease: Lease) -> str:
    """The repr of a lease handle: what it is and its state, never the
    session id (a secret)."""
    err = lease.error
    if err is None:
        state = f"held until {lease.expires_at.isoformat()}"
    elif isinstance(err, ReleasedError):
        state = "released"
    else:
        cause = err.cause if isinstance(err, LeaseLostError) else err
        state = f"lost ({type(cause).__name__})"
    return f"<{name} {lease.route} fencing_token={lease.fencing_token} {state}>"


def _ownership_gone(e: MusterError) -> bool:
    """Answers that mean the lease is not this session's."""
    return isinstance(e, NotOwnerError | FencedError | LeaseExpiredError | SessionNotFoundError)


class Lease:
    """A lease held by a Session: the only ownership handle of this package,
    and only ``Session.acquire`` makes one.

    ``lost`` is set when the lease is no longer held, and ``error`` says why:
    ReleasedError after its own release; otherwise a LeaseLostError whose
    ``cause`` is NotOwnerError, FencedError or LeaseExpiredError from the
    broker, LeaseExpiredError when the local deadline passed without a
    successful extension, or the session's end. The local deadline is a
    lower bound of the broker's expiry, on the event loop's (monotonic)
    clock: the acquire's send time + the answer's expires_after_request_ms
    (after a wait in the queue, the wait + the TTL), then each successful
    extension's send time + its TTL.
    """

    def __init__(self, s: Session, r: Route, wire: m.Lease) -> None:
        self._s = s
        self._r = r
        self.route = str(r)
        #: The broker revision at which the lease was granted: strictly
        #: increasing per route, stable across renewals. Pass it to the guarded
        #: resource, which must refuse a token lower than the highest it saw.
        self.fencing_token = wire.fencing_token
        self.acquired_at = wire.acquired_at
        self.expires_at = wire.expires_at  #: the broker's expiry as of the last grant or extension
        self.renewals = wire.renewals
        self.lost = asyncio.Event()
        self._error: MusterException | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._on_end: list[Callable[[], None]] = []

    @property
    def error(self) -> MusterException | None:
        """None while the lease is held, then why it is not."""
        return self._error

    def __repr__(self) -> str:
        return lease_repr("muster.Lease", self)

    async def extend(self, ttl: float) -> None:
        """Extends the lease to now + ``ttl``. When the broker answers that the
        lease is no longer this session's, the lease is lost and its error is
        raised. Any other failure (transport, UnavailableError) leaves the
        lease as it was: retry before the deadline."""
        if self._error is not None:
            raise self._error
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        body = m.ExtendRequest(session_id=self._s.id, fencing_token=self.fencing_token, ttl_ms=ms(ttl))
        try:
            out = await self._s._c._decode_call(
                m.Lease, "POST", f"/v1/leases/{self._r.path}/extend", 200, body=body, session=self._s
            )
        except MusterError as e:
            _loss.not_found(self._s, e)
            if _ownership_gone(e):
                lost = LeaseLostError(e)
                self._end(lost)
                raise (self._error or lost) from None
            raise
        self._extended(out, t0, ttl)

    def _extended(self, out: m.Lease, t0: float, ttl: float) -> None:
        """Records a successful extension sent at loop time t0 for ttl; raises
        the lease's error when it was lost meanwhile."""
        if self._error is not None:
            raise self._error
        self.expires_at, self.renewals = out.expires_at, out.renewals
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(t0 + ttl, self._expired)

    async def release(self) -> None:
        """Releases the lease; the next FIFO waiter (if any) is granted. It
        returns once the lease is known not to be held by this session any
        more, including when it was already lost; it raises only when that is
        unknown (a transport failure): the lease then ends at its TTL at the
        latest."""
        if isinstance(self._error, ReleasedError):
            return
        if self._s.error is not None:
            self._end(LeaseLostError(self._s.error))
            return
        body = m.ReleaseRequest(session_id=self._s.id, fencing_token=self.fencing_token)
        try:
            await self._s._c._call("POST", f"/v1/leases/{self._r.path}/release", 204, body=body, session=self._s)
        except MusterError as e:
            _loss.not_found(self._s, e)
            if _ownership_gone(e):
                self._end(LeaseLostError(e))
                return
            raise
        self._end(ReleasedError())

    def _expired(self) -> None:
        self._end(LeaseLostError(LeaseExpiredError(detail="the local deadline passed without a successful extension")))

    def _end(self, cause: MusterException) -> None:
        """Records why the lease is not held, once."""
        if self._error is not None or (self._s._c._never_lost and not isinstance(cause, ReleasedError)):
            return
        self._error = cause
        if self._timer is not None:
            self._timer.cancel()
        self.lost.set()
        self._s._untrack(self)
        for cb in self._on_end:
            cb()

    async def _renew(self, ttl: float) -> None:
        """Extends every ttl/3 until cancelled or lost; a failed extension is
        retried at the next tick; the local deadline decides the loss."""
        while not self.lost.is_set():
            await asyncio.sleep(ttl / 3)
            if self.lost.is_set():
                return
            with contextlib.suppress(Exception):
                async with asyncio.timeout(ttl / 3):
                    await self.extend(ttl)
