"""Batches: many lease operations of one session in one request, as in
clients/go/batch.go (the reference)."""

from __future__ import annotations

import asyncio
import http
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from . import _models as m
from ._backoff import ms
from ._client import Route, parse_route
from ._errors import (
    InvalidRequestError,
    LeaseLostError,
    MusterError,
    MusterException,
    ReleasedError,
    SessionNotFoundError,
    error_for,
)

if TYPE_CHECKING:
    from ._session import Lease, Session

#: The most operations one batch may carry (the contract's ``ops`` maxItems).
MAX_BATCH_OPS = 256


@dataclass(frozen=True)
class BatchResult:
    """The outcome of one operation of a batch, in the order of the batch.

    ``error`` is None on success; otherwise it is what the operation on its own
    (``Session.acquire``, ``Lease.extend``, ``Lease.release``) would have
    raised: the broker's code for that operation (e.g. LeaseHeldError), or
    the lease's loss. ``lease`` is the handle: after a successful acquire the
    new one (or the same one, when this session already held the route); for
    an extend or a release the lease it was given; None after a failed
    acquire."""

    op: str
    route: str
    lease: Lease | None
    error: MusterException | None


@dataclass
class _Entry:
    op: str
    route: Route | None
    text: str
    ttl: float
    lease: Lease | None


class Batch:
    """Lease operations of one session — acquisitions (which never wait),
    extensions and releases — applied by the broker in one request and one
    step, in the order they were added. Build it with ``Session.batch()``,
    send it with ``send()``."""

    def __init__(self, s: Session) -> None:
        self._s = s
        self._ops: list[_Entry] = []
        self._error: MusterException | None = None

    def __len__(self) -> int:
        return len(self._ops)

    def acquire(self, route: str, ttl: float) -> Batch:
        """Adds an acquisition of the exact ``route`` for ``ttl`` seconds; it
        never waits (LeaseHeldError)."""
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

    def _add(self, e: _Entry) -> Batch:
        if len(self._ops) == MAX_BATCH_OPS:
            self._refuse(InvalidRequestError("invalid_request", f"a batch has at most {MAX_BATCH_OPS} operations"))
        self._ops.append(e)
        return self

    def _own(self, lease: Lease) -> bool:
        if lease._s is not self._s:
            self._refuse(InvalidRequestError("invalid_request", "a batch takes only leases of its own session"))
            return False
        return True

    def _refuse(self, e: MusterException) -> None:
        if self._error is None:
            self._error = e

    async def send(self) -> list[BatchResult]:
        """Sends the batch; returns one result per operation, in order.

        It raises, and nothing was applied, when the batch was refused
        locally (no operation, more than MAX_BATCH_OPS, a malformed route, a
        lease of another session) or by the broker (SessionNotFoundError: the
        session's leases are then lost, as with Lease.extend). On a transport
        error or a cancellation nothing is known: the leases stay as they
        were. Operations on leases already known to be lost are not sent."""
        if self._error is not None:
            raise self._error
        if not self._ops:
            raise InvalidRequestError("invalid_request", "a batch has at least one operation")
        s = self._s
        if s.error is not None:
            raise s.error
        out = [BatchResult(e.op, e.text, e.lease, None) for e in self._ops]
        ops: list[m.BatchOp] = []
        sent: list[int] = []
        for i, e in enumerate(self._ops):
            settled, local = _settled_locally(e)
            if settled:
                out[i] = replace(out[i], error=local)
                continue
            ops.append(
                m.BatchOp(
                    op=e.op,
                    route=e.text,
                    ttl_ms=ms(e.ttl) if e.op != "release" else None,
                    fencing_token=e.lease.fencing_token if e.lease is not None else None,
                )
            )
            sent.append(i)
        if not sent:
            return out
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            answer = await s._c._decode_call(
                m.BatchResponse, "POST", "/v1/leases/batch", 200, body=m.BatchRequest(session_id=s.id, ops=ops)
            )
        except SessionNotFoundError as e:
            for i in sent:
                lease = self._ops[i].lease
                if lease is not None:
                    lease._end(LeaseLostError(e))
            raise
        if len(answer.results) != len(sent):
            raise MusterError(
                "internal", f"the broker answered {len(answer.results)} results for {len(sent)} operations"
            )
        for k, i in enumerate(sent):
            out[i] = _settle(s, self._ops[i], answer.results[k], t0, out[i])
        return out


def _settled_locally(e: _Entry) -> tuple[bool, MusterException | None]:
    """Whether the operation's outcome is known without asking the broker,
    and that outcome."""
    lease = e.lease
    if lease is None:
        return False, None
    if e.op == "extend" and lease.error is not None:
        return True, lease.error
    if e.op == "release" and lease.error is not None:
        return True, None
    if e.op == "release" and lease._s.error is not None:
        lease._end(LeaseLostError(lease._s.error))  # the broker released it when the session ended
        return True, None
    return False, None


def _settle(s: Session, e: _Entry, r: m.BatchResult, t0: float, out: BatchResult) -> BatchResult:
    """Applies one broker result to the SDK's handles, as the single operation would."""
    from ._session import _ownership_gone

    err: MusterError | None = None
    if not r.ok:
        status = r.status or 0
        title = http.HTTPStatus(status).phrase if status in http.HTTPStatus._value2member_map_ else ""
        err = error_for(r.code or "internal", r.detail or "", status=status, title=title)
    lease = e.lease
    if e.op == "acquire":
        if err is None and r.lease is not None and e.route is not None:
            return replace(out, lease=s._adopt(e.route, r.lease, t0, e.ttl))
        return replace(out, lease=None, error=err)
    assert lease is not None
    if e.op == "extend":
        if err is None and r.lease is not None:
            if lease.error is not None:
                return replace(out, error=lease.error)
            lease._extended(r.lease, t0, e.ttl)
            return out
        if err is not None and _ownership_gone(err):
            lease._end(LeaseLostError(err))
            return replace(out, error=lease.error)
        return replace(out, error=err)
    if err is None:
        lease._end(ReleasedError())
    elif _ownership_gone(err):
        lease._end(LeaseLostError(err))
    else:
        return replace(out, error=err)
    return out
