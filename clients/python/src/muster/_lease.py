"""Lease (the only ownership handle) and SessionState, the part of a
Session its leases share: its id, its connection, the leases it holds,
acquiring them and its end. Session (_session.py) is a SessionState that
keeps itself alive. As in clients/go/lease.go."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime

from . import _models as m
from ._backoff import ms
from ._conn import Conn
from ._errors import (
    FencedError,
    LeaseExpiredError,
    LeaseLostError,
    MusterError,
    MusterException,
    NotOwnerError,
    ReleasedError,
    SessionNotFoundError,
)
from ._http import Route, parse_route
from ._loss import not_found


class SessionState:
    """What a session's leases share with it (see :class:`muster.Session`,
    which is one): its id, its connection, its end, and the leases it holds,
    which only ``acquire`` (and a batch's acquisitions) make."""

    def __init__(self, c: Conn, wire: m.Session, host: str = "") -> None:
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

    @property
    def client(self) -> Conn:
        """The client the session belongs to (typed as its connection)."""
        return self._c

    @property
    def error(self) -> MusterException | None:
        """None while the session lives, then why it ended."""
        return self._error

    def _end(self, cause: MusterException) -> None:
        """Records why the session ended, once, stops its keepalive and loses
        its leases."""
        if self._error is not None:
            return
        self._error = cause
        self._c._sessions.discard(self)
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        leases, self._leases = self._leases, {}
        self.done.set()
        for lease in leases.values():
            lease._end(LeaseLostError(cause))
        for cb in self._on_end:
            cb()

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
            not_found(self, e)
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

    @property
    def _late_loss(self) -> bool:
        """Conformance tests only: lost at its keepalive only (_loss.Held)."""
        return self._c._late_loss

    @property
    def _creator_loss(self) -> bool:
        """Conformance tests only: its broker stays its creator (_loss.Held)."""
        return self._c._creator_loss


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


def ownership_gone(e: MusterError) -> bool:
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

    def __init__(self, s: SessionState, r: Route, wire: m.Lease) -> None:
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
            not_found(self._s, e)
            if ownership_gone(e):
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
            not_found(self._s, e)
            if ownership_gone(e):
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
