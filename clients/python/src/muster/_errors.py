"""Errors of the Muster contract and of the SDK itself, and the retry advice.

Every answer of the broker that is not a success becomes a :class:`MusterError`
(or, for a code this SDK knows, one of its subclasses): ``err.code`` is the
contract's stable ``code`` string, kept as is for a code newer than this SDK.
"""

from __future__ import annotations

import asyncio
import enum
from typing import ClassVar

import httpx

__all__ = [
    "AlreadyQueuedError",
    "ClosedError",
    "CursorExpiredError",
    "EpochChangedError",
    "FamilyUnavailableError",
    "FencedError",
    "ForbiddenError",
    "InternalError",
    "InvalidCursorError",
    "InvalidNameError",
    "InvalidRequestError",
    "InvalidRouteError",
    "InvalidSelectorError",
    "InventoryUnavailableError",
    "LeaseExpiredError",
    "LeaseHeldError",
    "LeaseLostError",
    "MethodNotAllowedError",
    "MusterError",
    "MusterException",
    "NotFoundError",
    "NotImplementedByBrokerError",
    "NotOwnerError",
    "PayloadTooLargeError",
    "QueueFullError",
    "ReleasedError",
    "Retry",
    "SessionLimitError",
    "SessionLostError",
    "SessionNotFoundError",
    "SpecLimitError",
    "SpecNotFoundError",
    "StreamEndError",
    "StreamEndedError",
    "SubscriptionLimitError",
    "TransportError",
    "UnauthenticatedError",
    "UnavailableError",
    "WaitTimeoutError",
    "WrongBrokerError",
    "advice",
    "codes",
    "error_for",
    "is_retryable",
]


class Retry(enum.Enum):
    """The SDK's advice for what to do after an error; see :func:`advice`."""

    #: The same request fails again: fix the input, the configuration or the grants.
    NO = "retry-no"
    #: The same request may succeed later: retry with exponential backoff and jitter.
    BACKOFF = "retry-backoff"
    #: The state the request relied on is gone (a lease, a session, a cursor's
    #: snapshot, a broker lifetime): start over from fresh state.
    RESTART = "retry-restart"

    def __str__(self) -> str:
        return self.value


class MusterException(Exception):
    """The base of every exception this package raises."""


class MusterError(MusterException):
    """An error answered by the broker (an RFC 9457 problem body), or a request
    the SDK refused locally with the code the broker would have used (``status``
    is then 0). A code this SDK does not know stays a plain ``MusterError`` with
    that ``code``.

    ``scope``, on a limit (429), is the bound that was hit: ``"broker"`` (a cap
    shared by every family), ``"family"`` (the caller's family's quota),
    ``"session"``, ``"route"`` or ``"root"``; "" otherwise. Values may be added.

    ``owner``, on ``wrong_broker`` (421), is the base URL of the broker that
    serves the family (docs/placement.md); "" otherwise.
    """

    #: The contract code of the subclass; "" on the generic class.
    CODE: ClassVar[str] = ""

    def __init__(
        self, code: str = "", detail: str = "", *, status: int = 0, title: str = "", scope: str = "", owner: str = ""
    ) -> None:
        self.code = code or self.CODE
        self.status = status
        self.title = title
        self.detail = detail
        self.scope = scope
        self.owner = owner
        super().__init__(str(self))

    def __str__(self) -> str:
        if not self.detail:
            return "muster: " + self.code
        return "muster: " + self.code + ": " + self.detail

    def __repr__(self) -> str:
        scope = f", scope={self.scope!r}" if self.scope else ""
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, detail={self.detail!r}{scope})"

    @property
    def advice(self) -> Retry:
        """The retry advice for this error (see :func:`advice`)."""
        return advice(self)


_TABLE: dict[str, tuple[type[MusterError], Retry]] = {}

# The code table of openapi.yaml's ErrorCode, in the contract's order, each
# with the same retry advice as the Go SDK (clients/go/errors.go).


class InvalidRouteError(MusterError):
    """A route is not lease://{realm}/{area}/{resource}, or an exact operation was given a wildcard. Retry: no."""

    CODE = "invalid_route"


class InvalidSelectorError(MusterError):
    """A selector does not follow the grammar. Retry: no."""

    CODE = "invalid_selector"


class InvalidRequestError(MusterError):
    """A malformed request (body, parameter, TTL out of range). Retry: no."""

    CODE = "invalid_request"


class UnauthenticatedError(MusterError):
    """No token, or one the broker does not know. Retry: no."""

    CODE = "unauthenticated"


class ForbiddenError(MusterError):
    """No single grant of the token covers the route or the whole selector. Retry: no."""

    CODE = "forbidden"


class SessionNotFoundError(MusterError):
    """The session ended (DELETE, missed keepalives, or a broker restart); its leases are gone. Retry: restart."""

    CODE = "session_not_found"


class LeaseHeldError(MusterError):
    """Another session holds the lease and the acquisition did not wait. Retry: backoff."""

    CODE = "lease_held"


class AlreadyQueuedError(MusterError):
    """This session already waits for the lease in another request. Retry: no."""

    CODE = "already_queued"


class WaitTimeoutError(MusterError):
    """The wait for the lease ended before a grant. Retry: backoff."""

    CODE = "wait_timeout"


class QueueFullError(MusterError):
    """The lease already has the maximum of waiters. Retry: backoff."""

    CODE = "queue_full"


class NotOwnerError(MusterError):
    """The lease is held by another session; the caller's lease is lost. Retry: restart."""

    CODE = "not_owner"


class FencedError(MusterError):
    """The fencing token is not the current one for this route; the caller's lease is lost. Retry: restart."""

    CODE = "fenced"


class LeaseExpiredError(MusterError):
    """The lease's TTL ran out before the extension (also reported locally when a
    Lease's deadline passed). Retry: restart."""

    CODE = "lease_expired"


class InvalidCursorError(MusterError):
    """A cursor from another selector or family, or a forged one: list from the first page. Retry: no."""

    CODE = "invalid_cursor"


class CursorExpiredError(MusterError):
    """The snapshot behind the cursor was evicted: restart from the first page. Retry: restart."""

    CODE = "cursor_expired"


class EpochChangedError(MusterError):
    """The cursor belongs to an earlier broker lifetime: restart from the first page. Retry: restart."""

    CODE = "epoch_changed"


class SubscriptionLimitError(MusterError):
    """The session has 128 wildcard (1,024 in all) registrations (scope "session"),
    or the family its quota of streams or registrations (scope "family"), or the
    broker its cap (scope "broker"): unsubscribe or close streams first. Retry: no."""

    CODE = "subscription_limit"


class InventoryUnavailableError(MusterError):
    """The inventory could not be read (never an empty result in disguise). Retry: backoff."""

    CODE = "inventory_unavailable"


class InvalidNameError(MusterError):
    """An illegal fleet root, kind or spec name. Retry: no."""

    CODE = "invalid_name"


class SpecNotFoundError(MusterError):
    """The fleet has no spec of that name. Retry: no."""

    CODE = "spec_not_found"


class PayloadTooLargeError(MusterError):
    """The body is larger than the operation allows. Retry: no."""

    CODE = "payload_too_large"


class InternalError(MusterError):
    """The broker failed. Retry: backoff."""

    CODE = "internal"


class NotFoundError(MusterError):
    """No such path (wrong base URL?). Retry: no."""

    CODE = "not_found"


class MethodNotAllowedError(MusterError):
    """Wrong method for the path. Retry: no."""

    CODE = "method_not_allowed"


class NotImplementedByBrokerError(MusterError):
    """The broker does not implement the operation (yet). Retry: no."""

    CODE = "not_implemented"


class UnavailableError(MusterError):
    """The broker is shutting down or overloaded (also a gateway's 502/503/504
    without a problem body). Retry: backoff."""

    CODE = "unavailable"


class SessionLimitError(MusterError):
    """The broker holds its maximum of live sessions (scope "broker"), or the
    caller's family its quota (scope "family"). Retry: backoff."""

    CODE = "session_limit"


class SpecLimitError(MusterError):
    """The fleet root holds its family's quota of specs (scope "root"): forget
    specs first. Retry: no."""

    CODE = "spec_limit"


class WrongBrokerError(MusterError):
    """Another broker of a multi-broker deployment serves the caller's family
    (421); the problem names it. Retry: restart (at the owner)."""

    CODE = "wrong_broker"


class FamilyUnavailableError(MusterError):
    """No broker serves the caller's family right now (a failover is in
    progress). Retry: backoff."""

    CODE = "family_unavailable"


for _cls, _retry in (
    (InvalidRouteError, Retry.NO),
    (InvalidSelectorError, Retry.NO),
    (InvalidRequestError, Retry.NO),
    (UnauthenticatedError, Retry.NO),
    (ForbiddenError, Retry.NO),
    (SessionNotFoundError, Retry.RESTART),
    (LeaseHeldError, Retry.BACKOFF),
    (AlreadyQueuedError, Retry.NO),
    (WaitTimeoutError, Retry.BACKOFF),
    (QueueFullError, Retry.BACKOFF),
    (NotOwnerError, Retry.RESTART),
    (FencedError, Retry.RESTART),
    (LeaseExpiredError, Retry.RESTART),
    (InvalidCursorError, Retry.NO),
    (CursorExpiredError, Retry.RESTART),
    (EpochChangedError, Retry.RESTART),
    (SubscriptionLimitError, Retry.NO),
    (InventoryUnavailableError, Retry.BACKOFF),
    (InvalidNameError, Retry.NO),
    (SpecNotFoundError, Retry.NO),
    (PayloadTooLargeError, Retry.NO),
    (InternalError, Retry.BACKOFF),
    (NotFoundError, Retry.NO),
    (MethodNotAllowedError, Retry.NO),
    (NotImplementedByBrokerError, Retry.NO),
    (UnavailableError, Retry.BACKOFF),
    (SessionLimitError, Retry.BACKOFF),
    (SpecLimitError, Retry.NO),
    (WrongBrokerError, Retry.RESTART),
    (FamilyUnavailableError, Retry.BACKOFF),
):
    _TABLE[_cls.CODE] = (_cls, _retry)


def codes() -> list[str]:
    """Every code this SDK knows, in the contract's order."""
    return list(_TABLE)


def error_for(
    code: str, detail: str = "", *, status: int = 0, title: str = "", scope: str = "", owner: str = ""
) -> MusterError:
    """The exception for a contract code: its subclass when the code is known,
    a generic :class:`MusterError` keeping the code otherwise (never a crash)."""
    entry = _TABLE.get(code)
    cls = entry[0] if entry else MusterError
    return cls(code, detail, status=status, title=title, scope=scope, owner=owner)


class ClosedError(MusterException):
    """The Session, Subscription or Observer was closed by its owner."""

    def __init__(self, what: str = "") -> None:
        super().__init__("muster: closed" + (f": {what}" if what else ""))


class ReleasedError(MusterException):
    """A Lease's ``error`` after its own successful release."""

    def __init__(self) -> None:
        super().__init__("muster: lease released")


class LeaseLostError(MusterException):
    """Every reason a Lease stopped being held other than its own release.
    ``cause`` is why: a :class:`NotOwnerError`, :class:`FencedError`,
    :class:`LeaseExpiredError`, :class:`SessionNotFoundError`, a
    :class:`SessionLostError` or a :class:`ClosedError` (the session's end)."""

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"muster: lease lost: {cause}")
        self.__cause__ = cause


class SessionLostError(MusterException):
    """Every reason a Session ended other than its own close: the broker that
    holds it answered for another lifetime (another Muster-Epoch: it
    restarted) or family_unavailable, the broker answered session_not_found
    to one of its requests, or no keepalive got through within the TTL."""

    def __init__(self, detail: str, cause: BaseException | None = None) -> None:
        self.cause = cause
        super().__init__(f"muster: session lost: {detail}" + (f": {cause}" if cause else ""))
        self.__cause__ = cause


class StreamEndedError(MusterException):
    """A watch stream ended without a terminal event (the connection dropped,
    or the broker went away), or, as the base of :class:`StreamEndError`, with one."""


class StreamEndError(StreamEndedError):
    """A terminal event of a watch stream: ``reason`` is one of ``overflow``
    (this client read too slowly; changes were lost), ``superseded``,
    ``unsubscribed``, ``session_closed`` or ``shutdown``; ``revision`` is the
    broker revision at which the stream ended when the broker sent one, else 0."""

    def __init__(self, reason: str, revision: int = 0) -> None:
        self.reason = reason
        self.revision = revision
        super().__init__("muster: watch stream ended: " + reason)


class TransportError(MusterException, httpx.TransportError):
    """The request or its answer failed on the way: the connection could not
    be made or broke, or a phase of it timed out (the Client's ``timeout``).
    The broker may or may not have acted on the request. ``__cause__`` (also
    ``cause``) is the original ``httpx`` exception, e.g. ``httpx.ConnectError``
    or ``httpx.ReadTimeout``. Retry: backoff.

    It is also an ``httpx.TransportError``, so code written for the SDK's
    earlier surface, which raised the ``httpx`` exception itself, still
    catches it."""

    def __init__(self, cause: httpx.HTTPError) -> None:
        self.cause = cause
        try:
            request: httpx.Request | None = cause.request
        except RuntimeError:  # an exception raised without its request
            request = None
        super().__init__(f"muster: transport: {type(cause).__name__}: {cause}", request=request)
        self.__cause__ = cause


def advice(err: BaseException | None) -> Retry:
    """What to do after ``err``. A broker :class:`MusterError` is advised by its
    code (an unknown code by its status: 5xx and 429 back off, anything else
    does not retry). Lease loss, session loss and stream ends advise a restart;
    a close, a cancellation or a timeout of the caller's own advise no retry;
    any other error (a :class:`TransportError`, which includes the Client's
    own ``timeout``) advises backoff."""
    if err is None:
        return Retry.NO
    if isinstance(err, TransportError):
        return Retry.BACKOFF
    if isinstance(err, MusterError):
        entry = _TABLE.get(err.code)
        if entry is not None:
            return entry[1]
        if err.status >= 500 or err.status == 429:
            return Retry.BACKOFF
        return Retry.NO
    if isinstance(err, LeaseLostError | SessionLostError | StreamEndedError):
        return Retry.RESTART
    if isinstance(err, ClosedError | ReleasedError | asyncio.CancelledError | TimeoutError):
        return Retry.NO
    return Retry.BACKOFF


def is_retryable(err: BaseException | None) -> bool:
    """True when the same request may succeed later (advice BACKOFF)."""
    return advice(err) is Retry.BACKOFF
