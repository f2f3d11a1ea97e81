"""Batches: many lease operations of one session in one request, as in
clients/go/batch.go."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus

from . import _models as m
from ._backoff import ms
from ._errors import (
    InternalError,
    InvalidRequestError,
    LeaseLostError,
    MusterError,
    MusterException,
    ReleasedError,
    SessionNotFoundError,
    error_for,
)
from ._http import Route, parse_route
from ._lease import Lease, SessionState, ownership_gone
from ._loss import not_found

#: The most operations one batch may carry (the contract's BatchRequest.ops maxItems).
MAX_BATCH_OPS = 256


@dataclass(frozen=True)
class BatchResult:
    """The outcome of one operation of a batch, in the order of the batch.

    ``error`` is None on success; otherwise it is what the operation on its
    own (``Session.acquire``, ``Lease.extend``, ``Lease.release``) would have
    raised: the MusterError subclass of the broker's code for that operation
    (``isinstance(r.error, LeaseHeldError)``, ``advice(r.error)``), or the
    lease's loss (a LeaseLostError). ``lease`` is the handle: after a
    successful acquire the new one (or the same one, when this session already
    held the route); for an extend or a release the lease it was given; None
    after a failed acquire."""

    op: str  # "acquire", "extend" or "release"
    route: str
    lease: Lease | None
    error: MusterException | None


@dataclass
class _Entry:
    op: str
    route: Route | None  # None after a malformed route (the batch is refused)
    key: str
    ttl: float
    lease: Lease | None  # extend and release


class Batch:
    """Lease operations of one session (acquisitions, which never wait,
    extensions and releases) applied by the broker in one request and one
    step, in the order they were added. Build it with ``Session.batch()``,
    send it with ``await batch.do()``. Adding never raises: the first local
    refusal is what ``do`` raises. Not safe for concurrent use."""

    def __init__(self, s: SessionState) -> None:
        self._s = s
        self._ops: list[_Entry] = []
        self._err: MusterException | None = None

    def __len__(self) -> int:
        """The number of operations added so far."""
        return len(self._ops)

    def acquire(self, route: str, ttl: float) -> Batch:
        """Adds an acquisition of the exact route for ``ttl`` seconds (0.1 ..
        600). It never waits: when another session holds the route, its result
        is LeaseHeldError."""
        r: Route | None = None
        try:
            r = parse_route(route)
        except MusterError as e:
            self._refuse(e)
        return self._add(_Entry("acquire", r, route, ttl, None))

    def extend(self, lease: Lease, ttl: float) -> Batch:
        """Adds an extension of ``lease`` to now + ``ttl``, as Lease.extend."""
        if self._own(lease):
            self._add(_Entry("extend", lease._r, lease.route, ttl, lease))
        return self

    def release(self, lease: Lease) -> Batch:
        """Adds a release of ``lease``, as Lease.release."""
        if self._own(lease):
            self._add(_Entry("release", lease._r, lease.route, 0.0, lease))
        return self

    async def do(self) -> list[BatchResult]:
        """Sends the batch and returns one result per operation, in order.

        It raises as a whole, and nothing was applied, when the batch was
        refused locally (no operation, more than MAX_BATCH_OPS, a malformed
        route, a lease of another session: InvalidRequestError or
        InvalidRouteError) or by the broker (SessionNotFoundError: the
        session's leases are then lost, as with Lease.extend). On a transport
        error or a cancellation nothing is known: the leases stay as they were
        (retry before their deadline), and grants the broker made for a
        request that left are rolled back by the broker.

        Operations on leases already known to be lost are not sent: their
        results are what extend and release would give (the error, and None
        for a release)."""
        if self._err is not None:
            raise self._err
        if not self._ops:
            raise InvalidRequestError(detail="a batch has at least one operation")
        s = self._s
        if s.error is not None:
            raise s.error
        out: list[BatchResult] = []
        ops: list[m.BatchOp] = []
        sent: list[int] = []
        for i, e in enumerate(self._ops):
            done, err = _settled_locally(e)
            out.append(BatchResult(e.op, e.key, e.lease, err))
            if done:
                continue
            ops.append(
                m.BatchOp(
                    op=e.op,
                    route=e.key,
                    ttl_ms=None if e.op == "release" else ms(e.ttl),
                    fencing_token=None if e.lease is None else e.lease.fencing_token,
                )
            )
            sent.append(i)
        if not sent:
            return out
        t0 = asyncio.get_running_loop().time()
        try:
            resp = await s.client._decode_call(
                m.BatchResponse,
                "POST",
                "/v1/leases/batch",
                200,
                body=m.BatchRequest(session_id=s.id, ops=ops),
                session=s,
            )
        except SessionNotFoundError as e:
            not_found(s, e)
            for i in sent:
                lease = self._ops[i].lease
                if lease is not None:
                    lease._end(LeaseLostError(e))
            raise
        if len(resp.results) != len(sent):
            raise InternalError(detail=f"the broker answered {len(resp.results)} results for {len(sent)} operations")
        for k, i in enumerate(sent):
            out[i] = _settle(s, self._ops[i], resp.results[k], t0, out[i])
        return out

    def _add(self, e: _Entry) -> Batch:
        if len(self._ops) == MAX_BATCH_OPS:
            self._refuse(InvalidRequestError(detail=f"a batch has at most {MAX_BATCH_OPS} operations"))
        self._ops.append(e)
        return self

    def _own(self, lease: Lease) -> bool:
        """Checks that lease is a lease of the batch's session."""
        if not isinstance(lease, Lease) or lease._s is not self._s:
            self._refuse(InvalidRequestError(detail="a batch takes only leases of its own session"))
            return False
        return True

    def _refuse(self, err: MusterException) -> None:
        if self._err is None:
            self._err = err


def _settled_locally(e: _Entry) -> tuple[bool, MusterException | None]:
    """Whether the operation's outcome is already known without asking the
    broker, as Lease.extend and Lease.release know it."""
    lease = e.lease
    if lease is None:
        return False, None
    if e.op == "extend" and lease.error is not None:
        return True, lease.error
    if e.op == "release" and lease.error is not None:
        return True, None
    serr = lease._s.error
    if e.op == "release" and serr is not None:
        lease._end(LeaseLostError(serr))  # the broker released it when the session ended
        return True, None
    return False, None


def _settle(s: SessionState, e: _Entry, r: m.BatchResult, t0: float, out: BatchResult) -> BatchResult:
    """Applies one broker result to the SDK's handles, as the single operation would."""
    err = None if r.ok else _result_error(r)
    if e.op == "acquire":
        if err is None and r.lease is not None and e.route is not None:
            return BatchResult(out.op, out.route, s._adopt(e.route, r.lease, t0, e.ttl), None)
        return BatchResult(out.op, out.route, None, err)
    lease = e.lease
    assert lease is not None
    if e.op == "extend":
        if err is None and r.lease is not None:
            try:
                lease._extended(r.lease, t0, e.ttl)
            except MusterException as lost:
                return BatchResult(out.op, out.route, lease, lost)
            return out
        if err is not None and ownership_gone(err):
            lease._end(LeaseLostError(err))
            return BatchResult(out.op, out.route, lease, lease.error)
        return BatchResult(out.op, out.route, lease, err)
    if err is None:
        lease._end(ReleasedError())
    elif ownership_gone(err):
        lease._end(LeaseLostError(err))
    else:
        return BatchResult(out.op, out.route, lease, err)
    return out


def _result_error(r: m.BatchResult) -> MusterError:
    """The error of a failed result, as a problem body with the same code would make it."""
    title = ""
    if r.status is not None:
        try:
            title = HTTPStatus(r.status).phrase
        except ValueError:
            title = ""
    return error_for(r.code or "internal", r.detail or "", status=r.status or 0, title=title)


__all__ = ["MAX_BATCH_OPS", "Batch", "BatchResult"]
